#include "worker/host_provenance.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "common/files.h"
#include "common/sha256.h"
#include "common/source_dir.h"
#include "common/testing/temp_dir.h"

namespace headlab {

TEST_CASE("RunAndCapture returns stdout and the exit status") {
  std::string out;
  auto rc = RunAndCapture({"sh", "-c", "echo hello; echo err >&2; exit 3"},
                          [&](const std::string& s) { out += s; });
  REQUIRE(rc.ok());
  CHECK(*rc == 3);
  CHECK(out == "hello\n");
  CHECK(*RunAndCapture({"no-such-binary-headlab"}, [](const std::string&) {}) == 127);
}

TEST_CASE("RunAndCapture times out a hung command") {
  auto rc = RunAndCapture(
      {"sleep", "10"}, [](const std::string&) {}, 100);
  CHECK(!rc.ok());
}

TEST_CASE("ComputeHostProvenance records the source tree and the binary") {
  DeviceInventory inv;
  inv.devices.push_back(CpuDevice());
  std::string self = "/proc/self/exe";
  Json p = ComputeHostProvenance(SourceDir(), self, inv);
  CHECK(p["binary_sha256"] == *Sha256File(self));
  CHECK(p["driver_version"] == "none");
  CHECK(p["devices"].get<std::string>().rfind("cpu: ", 0) == 0);
  CHECK(!p["host"].get<std::string>().empty());
  if (p["git_commit"] != "unknown") {  // the build tree is a git checkout with git installed
    CHECK(p["git_commit"].get<std::string>().size() == 40);
    CHECK(p["git_dirty"].is_boolean());
    CHECK(p["git_diff_sha256"].get<std::string>().size() == 64);
  }
}

TEST_CASE("ComputeHostProvenance says unknown outside a git tree") {
  DeviceInventory inv;
  inv.devices.push_back(CpuDevice());
  const testing::TempDir tmp("headlab-nogit");
  REQUIRE(!tmp.path().empty());
  Json p = ComputeHostProvenance(tmp.path(), "/nonexistent/binary", inv);
  CHECK(p["git_commit"] == "unknown");
  CHECK(p["git_dirty"] == "unknown");
  CHECK(p["git_diff_sha256"] == "unknown");
  CHECK(p["binary_sha256"] == "unknown");
  CHECK(p["exec_plugin_sha256"] == "unknown");
}

TEST_CASE("ComputeHostProvenance hashes the exec plugin beside the binary") {
  DeviceInventory inv;
  inv.devices.push_back(CpuDevice());
  const testing::TempDir tmp("headlab-plugin");
  REQUIRE(!tmp.path().empty());
  const std::string dir = tmp.path();
  REQUIRE(WriteFileAtomic(dir + "/headlab", "binary").ok());
  REQUIRE(WriteFileAtomic(dir + "/libheadlab_exec.so", "payload").ok());
  Json p = ComputeHostProvenance(dir, dir + "/headlab", inv);
  CHECK(p["binary_sha256"] == Sha256Hex("binary"));
  CHECK(p["exec_plugin_sha256"] == Sha256Hex("payload"));
}

}  // namespace headlab

namespace headlab {

// A CPU-only run used to show "CUDA 13.0" (the host's runtime) in its provenance.
TEST_CASE("MarkCpuOnlyAttempt: a CPU run names the CPU and no CUDA") {
  Json p = {{"devices", "cuda:0 NVIDIA H200"},
            {"cuda_version", "13.0"},
            {"driver_version", "13.0"},
            {"host", "h"}};
  MarkCpuOnlyAttempt(&p);
  CHECK(p["devices"].get<std::string>().rfind("cpu: ", 0) == 0);
  CHECK(p["cuda_version"] == "none (CPU run)");
  CHECK(p["driver_version"] == "none (CPU run)");
  CHECK(p["host"] == "h");
}

}  // namespace headlab
