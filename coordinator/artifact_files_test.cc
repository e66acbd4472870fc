#include "coordinator/artifact_files.h"

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/sha256.h"
#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {

TEST_CASE("artifact files: listed with a download path, sent only with their recorded hash") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  REQUIRE(e.ok());
  const int64_t run = e->queued[0];
  REQUIRE(s.StartAttempt({run, 1}, "w", {}, nullptr).ok());
  const std::string path = dir.path() + "/logprobs.bin",
                    data = std::string("\x00\x01\xff", 3) + "x";
  REQUIRE(WriteFileAtomic(path, data).ok());
  REQUIRE(s.InsertArtifact({run, 1}, 0, "logprobs", path, Sha256Hex(data), int64_t(data.size()), 5)
              .ok());
  REQUIRE(s.InsertArtifact({run, 1}, 1, "checkpoint", "/nonexistent/ckpt.pt", Sha256Hex("y"), 1, 10)
              .ok());
  REQUIRE(s.InsertArtifact({run, 1}, 2, "checkpoint", "/big.pt", Sha256Hex("z"),
                           kMaxArtifactDownloadBytes + 1, 20)
              .ok());
  auto list = ArtifactsView(s.db(), run);
  REQUIRE(list.ok());
  REQUIRE(list->size() == 3);
  CHECK((*list)[0]["name"] == "logprobs.bin");
  CHECK((*list)[0]["download"] == "/api/v1/runs/" + std::to_string(run) + "/artifacts/1/0");
  CHECK((*list)[2]["download"].is_null());
  auto f = ReadArtifactFile(s.db(), run, 1, 0);
  REQUIRE(f.ok());
  CHECK(f->bytes == data);
  CHECK(f->kind == "logprobs");
  CHECK(ReadArtifactFile(s.db(), run, 1, 1).status().code() == Status::Code::kNotFound);
  CHECK(ReadArtifactFile(s.db(), run, 1, 7).status().code() == Status::Code::kNotFound);
  // Changed bytes are not sent (the hash recorded with the run is the key to the file).
  REQUIRE(WriteFileAtomic(path, "changed").ok());
  CHECK(ReadArtifactFile(s.db(), run, 1, 0).status().code() == Status::Code::kCorruption);
  CHECK(ArtifactsView(s.db(), 9999).status().code() == Status::Code::kNotFound);
}

}  // namespace headlab::coord
