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
  Json assign{{"run", 12},
              {"attempt", 1},
              {"experiment", 3},
              {"config", {{"kind", "noop"}}},
              {"resume", nullptr}};
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

  Json assign{
      {"run", 1}, {"attempt", 2}, {"experiment", 1}, {"config", Json::object()}, {"resume", good}};
  Json m = Json::parse(*ReadFile(*WriteManifest(work, assign)));
  CHECK(m["resume"] == good);
  CHECK(m["parent"].is_null());
}

TEST_CASE("a truncated latest checkpoint resumes from the previous good one, not from scratch") {
  // The worker used to start over while the coordinator recorded a
  // resume from the latest checkpoint.
  const testing::TempDir tmp("headlab-manifest");
  const std::string work = tmp.path();
  REQUIRE(WriteFileAtomic(work + "/100.pt", "weights at 100").ok());
  REQUIRE(WriteFileAtomic(work + "/200.pt", "weights at 200").ok());
  Json c100{{"path", work + "/100.pt"}, {"sha256", Sha256Hex("weights at 100")}, {"step", 100}};
  Json c200{{"path", work + "/200.pt"}, {"sha256", Sha256Hex("weights at 200")}, {"step", 200}};
  REQUIRE(WriteFileAtomic(work + "/200.pt", "weights a").ok());  // truncated
  Json assign{{"run", 4},        {"attempt", 3},
              {"experiment", 1}, {"config", Json::object()},
              {"resume", c200},  {"resume_fallbacks", {c100}}};
  CHECK(ChooseResume(assign) == c100);
  Json written;
  REQUIRE(WriteManifest(work, assign, &written).ok());
  CHECK(written["resume"] == c100);
  // With no good checkpoint left it starts from scratch, and says so (null).
  REQUIRE(WriteFileAtomic(work + "/100.pt", "").ok());
  CHECK(ChooseResume(assign).is_null());
}

TEST_CASE("AbsoluteWorkDir is absolute and normal, as the coordinator checks artifact paths") {
  CHECK(AbsoluteWorkDir("/w/./x/../y/") == "/w/y");
  CHECK(AbsoluteWorkDir("rel")[0] == '/');
  CHECK(AttemptOutDir("/w/./y/", Json(5), 2) == "/w/y/runs/5-2");
}

TEST_CASE("WriteManifest passes a shared parent checkpoint through beside resume") {
  const testing::TempDir tmp("headlab-manifest");
  REQUIRE(!tmp.path().empty());
  const std::string work = tmp.path();
  Json parent{{"run", 7}, {"path", "/elsewhere/ckpt.pt"}, {"sha256", Sha256Hex("w")}, {"step", 20}};
  Json assign{{"run", 9},          {"attempt", 1},    {"experiment", 2}, {"config", Json::object()},
              {"resume", nullptr}, {"parent", parent}};
  Json m = Json::parse(*ReadFile(*WriteManifest(work, assign)));
  CHECK(m["parent"] == parent);
  CHECK(m["resume"].is_null());
}

}  // namespace headlab
