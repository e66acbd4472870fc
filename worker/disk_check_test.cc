#include "worker/disk_check.h"

#include <catch2/catch.hpp>

#include "common/run_config.h"

namespace headlab {

TEST_CASE("DiskNeedOf: SAF's 124M parent holds 5 checkpoints at once, 8.26 GB with margin") {
  auto c = NormalizeRunConfig(Json::parse(R"({"model": {"preset": "124m", "pos": "rope"},
      "train": {"steps": 5000, "checkpoint_every": 500, "keep_steps": "1500,2500"}})"),
                              "f");
  REQUIRE(c.ok());
  auto policy = RetentionOf(*c, nullptr);
  REQUIRE(policy.ok());
  const CheckpointDiskNeed need = DiskNeedOf(*c, *policy);
  CHECK(need.checkpoint_bytes == 1490356224);  // common/checkpoint_size_test.cc
  CHECK(need.checkpoints == 5);                // newest 2 + 1500 + 2500 + the one written
  const int64_t exact = 5 * 1490356224LL * 11 / 10 + (int64_t(64) << 20);
  CHECK(need.bytes >= exact);
  CHECK(need.bytes <= exact + 1);
  // Keeping every checkpoint: all ten.
  policy->keep_last = 0;
  CHECK(DiskNeedOf(*c, *policy).checkpoints == 10);
}

TEST_CASE("DiskNeedOf: nothing for kinds without checkpoints and for imported models") {
  Json c = DefaultRunConfig();
  RetentionPolicy p{2, {}};
  CHECK(DiskNeedOf(c, p).bytes > 0);
  c["kind"] = "bench-update";
  CHECK(DiskNeedOf(c, p).bytes == 0);
  c["kind"] = "train";
  c["model"]["init_from"] = "/models/gpt2";
  CHECK(DiskNeedOf(c, p).bytes == 0);
}

TEST_CASE("CheckDiskRoom names the need, the checkpoints and the free space") {
  CheckpointDiskNeed need{int64_t(3) << 30, 2, int64_t(7) << 30};
  CHECK(CheckDiskRoom(need, 1, "/w", int64_t(8) << 30, 0).ok());
  // Room the running attempts hold: the run waits (REJECT busy=true, not charged).
  Status st = CheckDiskRoom(need, 1, "/w", int64_t(8) << 30, int64_t(2) << 30);
  REQUIRE(!st.ok());
  CHECK(st.code() == Status::Code::kUnavailable);
  CHECK(st.message() ==
        "not enough disk for the run's checkpoints in /w: needs 7.00 GiB (2 checkpoint(s) at "
        "once of 3.00 GiB, train.keep_checkpoints 1, + 10% + 64 MiB), 8.00 GiB free, of which "
        "2.00 GiB is held for the attempts running here");
  // More than the disk has free: charged (REJECT busy=false), the run fails after its
  // attempts with the message.
  st = CheckDiskRoom(need, 1, "/w", int64_t(6) << 30, int64_t(2) << 30);
  REQUIRE(!st.ok());
  CHECK(st.code() == Status::Code::kIoError);
  CHECK(st.message().find("needs 7.00 GiB") != std::string::npos);
}

TEST_CASE("FreeDiskBytes reads statvfs, of the nearest existing ancestor if need be") {
  auto root = FreeDiskBytes("/tmp");
  REQUIRE(root.ok());
  CHECK(*root > 0);
  auto missing = FreeDiskBytes("/tmp/headlab-no-such-dir/runs");
  REQUIRE(missing.ok());
  CHECK(*missing > 0);
}

}  // namespace headlab
