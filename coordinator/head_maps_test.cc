#include "coordinator/head_maps.h"

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/sha256.h"
#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {

TEST_CASE("head-map artifacts: kinds, both JSON shapes, hash check, rows stored") {
  CHECK(IsHeadMapKind("aah_head_maps"));
  CHECK(IsHeadMapKind("saf_head_map"));
  CHECK_FALSE(IsHeadMapKind("checkpoint"));

  auto a = ParseHeadMapRows(R"([{"layer": 0, "head": 1, "role": "local", "window": 64, "score": 2},
                                {"layer": 1, "head": 0, "role": "ordinary"}])");
  REQUIRE(a.ok());
  REQUIRE(a->size() == 2);
  CHECK(*(*a)[0].window == 64);
  CHECK_FALSE((*a)[1].score);
  auto b = ParseHeadMapRows(R"({"event": 1, "head_map": [{"layer": 0, "head": 0, "role": "fixed",
                                "score": 0.1, "fit_kl": null}]})");
  REQUIRE(b.ok());
  CHECK((*b)[0].role == "fixed");
  CHECK_FALSE(ParseHeadMapRows(R"([{"layer": "0", "head": 0, "role": "x"}])").ok());
  CHECK_FALSE(ParseHeadMapRows(R"({"rows": []})").ok());

  TempDir dir;
  std::string text = R"([{"layer": 2, "head": 3, "role": "streaming", "window": 16}])";
  REQUIRE(WriteFileAtomic(dir.path() + "/hm.json", text).ok());
  CHECK(LoadHeadMapArtifact(dir.path() + "/hm.json", "bad").status().code() ==
        Status::Code::kCorruption);
  CHECK_FALSE(LoadHeadMapArtifact(dir.path() + "/missing.json", "x").ok());
  auto rows = LoadHeadMapArtifact(dir.path() + "/hm.json", Sha256Hex(text));
  REQUIRE(rows.ok());

  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  AttemptRef ref{e->queued[0], 1};
  REQUIRE(s.StartAttempt(ref, "w", {}, nullptr).ok());
  REQUIRE(s.InsertHeadMaps(ref, *rows).ok());
  REQUIRE(s.InsertHeadMaps(ref, *rows).ok());  // idempotent
  Stmt q = s.db()->MustPrepare("SELECT count(*), max(role), max(window) FROM head_maps");
  REQUIRE(q.Step());
  CHECK(q.Int(0) == 1);
  CHECK(q.Text(1) == "streaming");
  CHECK(q.Int(2) == 16);
}

}  // namespace headlab::coord
