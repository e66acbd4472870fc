#include "worker/checkpoint_tracker.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/testing/temp_dir.h"

namespace headlab {
namespace {

std::vector<int64_t> Steps(const std::vector<CheckpointTracker::Checkpoint>& cs) {
  std::vector<int64_t> out;
  for (const auto& c : cs) out.push_back(c.step);
  return out;
}

}  // namespace

TEST_CASE("CheckpointTracker deletes what retention drops, keeping the newest and the pinned") {
  testing::TempDir tmp("headlab-ckpt-tracker");
  const std::string dir = tmp.path();
  CheckpointTracker t(RetentionPolicy{2, {20}}, dir);
  auto write = [&](int64_t seq, int64_t step) {
    const std::string path = dir + "/ckpt-" + std::to_string(step) + ".pt";
    REQUIRE(WriteFileAtomic(path, std::string(size_t(step), 'x')).ok());
    return t.Add({seq, path, step, step});
  };
  CHECK(write(0, 10).empty());
  CHECK(write(1, 20).empty());
  CHECK(Steps(write(2, 30)) == std::vector<int64_t>{10});  // 20 and 30 are the newest two
  CHECK_FALSE(PathExists(dir + "/ckpt-10.pt"));
  CHECK(t.bytes_held() == 20 + 30);
  CHECK(Steps(write(3, 40)).empty());  // 20 pinned; 30 and 40 the newest two
  CHECK(Steps(write(4, 50)) == std::vector<int64_t>{30});
  CHECK_FALSE(PathExists(dir + "/ckpt-30.pt"));
  for (int s : {20, 40, 50}) CHECK(PathExists(dir + "/ckpt-" + std::to_string(s) + ".pt"));
  CHECK(t.bytes_held() == 20 + 40 + 50);
}

TEST_CASE("CheckpointTracker: a rewritten path retires its old record without unlinking") {
  testing::TempDir tmp("headlab-ckpt-tracker");
  const std::string path = tmp.path() + "/ckpt-8.pt";
  CheckpointTracker t(RetentionPolicy{1, {}}, tmp.path());
  REQUIRE(WriteFileAtomic(path, "a").ok());
  CHECK(t.Add({0, path, 8, 1}).empty());
  REQUIRE(WriteFileAtomic(path, "bb").ok());  // the final save after a method changed the model
  auto gone = t.Add({1, path, 8, 2});
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].seq == 0);
  CHECK(*ReadFile(path) == "bb");
  CHECK(t.bytes_held() == 2);
}

TEST_CASE("CheckpointTracker never unlinks outside the attempt's directory or a symlink") {
  testing::TempDir tmp("headlab-ckpt-tracker");
  const std::string out = tmp.path() + "/run", other = tmp.path() + "/precious";
  REQUIRE(MakeDirs(out + "/sub").ok());
  REQUIRE(WriteFileAtomic(other, "keep me").ok());
  REQUIRE(WriteFileAtomic(out + "/sub/deep.pt", "nested").ok());
  REQUIRE(::symlink(other.c_str(), (out + "/link.pt").c_str()) == 0);
  CheckpointTracker t(RetentionPolicy{1, {}}, out);
  CHECK(t.Add({0, other, 1, 7}).empty());
  CHECK(t.Add({1, out + "/sub/deep.pt", 2, 6}).empty());  // `other` is outside: refused
  CHECK(t.bytes_held() == 6);                             // and no longer tracked
  CHECK(t.Add({2, out + "/link.pt", 3, 7}).empty());      // deep.pt is not directly inside
  REQUIRE(WriteFileAtomic(out + "/ckpt-4.pt", "4").ok());
  CHECK(t.Add({3, out + "/ckpt-4.pt", 4, 1}).empty());  // the link is not a regular file
  CHECK(*ReadFile(other) == "keep me");
  CHECK(PathExists(out + "/sub/deep.pt"));
  CHECK(PathExists(out + "/link.pt"));
  REQUIRE(WriteFileAtomic(out + "/ckpt-5.pt", "5").ok());
  auto gone = t.Add({4, out + "/ckpt-5.pt", 5, 1});
  REQUIRE(gone.size() == 1);  // the one inside, as a regular file, goes
  CHECK(gone[0].step == 4);
  CHECK_FALSE(PathExists(out + "/ckpt-4.pt"));
}

}  // namespace headlab
