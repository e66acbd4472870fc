#include "worker/attempt_manifest.h"



#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/sha256.h"
#include "common/testing/temp_dir.h"

namespace headlab {

TEST_CASE("WriteManifest writes the manifest into <work>/runs/<run>-<attempt>") {
  const testing::TempDir tmp("headlab-manifest");
  REQUIRE(!tmp.path().empty());
  const std::string work = tmp.path();
  Json assign{{"run", 12}, {"attempt", 1}, {"experiment", 3},
              {"config", {{"kind", "noop"}}}, {"resume", nullptr}};
  auto path = WriteManifest(work, assign);
  REQUIRE(path.ok());
  CHECK(*path == work + "/runs/12-1/manifest.json");
  Json m = Json::parse(*ReadFile(*path));
  CHECK(m["run"] == 12);
  CHECK(m["attempt"] == 1);
  CHECK(m["experiment"] == 3);
  CHECK(m["config"]["kind"] == "noop");
  CHECK(m["out_dir"] == work + "/runs/12-1");
  CHECK(m["resume"].is_null());
}

TEST_CASE("AttemptOutDir sanitises string run ids") {
  CHECK(AttemptOutDir("/w", Json("../x y"), 0) == "/w/runs/.._x_y-0");
}

TEST_CASE("VerifiedResume passes a matching checkpoint and drops a missing or changed one") {
  const testing::TempDir tmp("headlab-manifest");
  REQUIRE(!tmp.path().empty());
  const std::string work = tmp.path();
  std::string ckpt = work + "/ckpt.pt";
  REQUIRE(WriteFileAtomic(ckpt, "weights").ok());
  Json good{{"path", ckpt}, {"sha256", Sha256Hex("weights")}, {"step", 100}};
  CHECK(VerifiedResume(good) == good);
  Json changed = good;
  changed["sha256"] = Sha256Hex("other");
  CHECK(VerifiedResume(changed).is_null());
  Json missing = good;
  missing["path"] = work + "/nope.pt";
  CHECK(VerifiedResume(missing).is_null());
  CHECK(VerifiedResume(nullptr).is_null());

  Json assign{{"run", 1}, {"attempt", 2}, {"experiment", 1}, {"config", Json::object()},
              {"resume", good}};
  Json m = Json::parse(*ReadFile(*WriteManifest(work, assign)));
  CHECK(m["resume"] == good);
  CHECK(m["parent"].is_null());
}

TEST_CASE("WriteManifest passes a shared parent checkpoint through beside resume") {
  const testing::TempDir tmp("headlab-manifest");
  REQUIRE(!tmp.path().empty());
  const std::string work = tmp.path();
  Json parent{{"run", 7}, {"path", "/elsewhere/ckpt.pt"}, {"sha256", Sha256Hex("w")}, {"step", 20}};
  Json assign{{"run", 9}, {"attempt", 1}, {"experiment", 2}, {"config", Json::object()},
              {"resume", nullptr}, {"parent", parent}};
  Json m = Json::parse(*ReadFile(*WriteManifest(work, assign)));
  CHECK(m["parent"] == parent);
  CHECK(m["resume"].is_null());
}

}  // namespace headlab
