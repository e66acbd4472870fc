#include "worker/worker_flags.h"

#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/testing/temp_dir.h"

namespace headlab {
namespace {

StatusOr<WorkerFlags> Parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseWorkerFlags(int(argv.size()), argv.data());
}

DeviceInventory Gpus(int n) {
  DeviceInventory inv;
  for (int i = 0; i < n; ++i) {
    Device d;
    d.index = i;
    d.kind = "cuda";
    d.name = "GPU";
    inv.devices.push_back(d);
  }
  inv.has_gpu = n > 0;
  return inv;
}

}  // namespace

TEST_CASE("ParseWorkerFlags: defaults and every flag") {
  auto f = Parse({"worker"});
  REQUIRE(f.ok());
  CHECK(f->coordinator == "tcp://127.0.0.1:8322");
  CHECK(f->data_dir == ".headlab");
  f = Parse({"worker", "--coordinator", "tcp://10.0.0.1:9000", "--data-dir=/d", "--token-file",
             "/t", "--name", "n1", "--slots", "3", "--cpu-only", "--work-dir", "/w"});
  REQUIRE(f.ok());
  CHECK(f->coordinator == "tcp://10.0.0.1:9000");
  CHECK(f->data_dir == "/d");
  CHECK(f->token_file == "/t");
  CHECK(f->name == "n1");
  CHECK(f->slots == 3);
  CHECK(f->cpu_only);
  CHECK(f->work_dir == "/w");
  CHECK(Parse({"worker", "--help"})->help);
  CHECK(Parse({"worker", "--coordinator", "tcp://[::1]:8322"}).ok());
  CHECK(Parse({"worker", "--coordinator", "ipc:///tmp/hl.sock"}).ok());
}

TEST_CASE("ParseWorkerFlags rejects bad input") {
  for (auto args :
       std::vector<std::vector<std::string>>{{"worker", "--slots", "0"},
                                             {"worker", "--slots", "two"},
                                             {"worker", "--slots"},
                                             {"worker", "--coordinator", "localhost:1"},
                                             {"worker", "--bogus"},
                                             {"worker", "--coordinator", "tcp://foo"},
                                             {"worker", "--coordinator", "tcp://h:x"},
                                             {"worker", "--coordinator", "tcp://h:0"},
                                             {"worker", "--coordinator", "tcp://h:70000"},
                                             {"worker", "--coordinator", "tcp://:5"},
                                             {"worker", "extra"},
                                             {"worker", "--name="},
                                             {"worker", "--cpu-only=yes"}}) {
    INFO(Json(args).dump());
    CHECK(!Parse(args).ok());
  }
}

TEST_CASE("ResolveToken: --token-file, then HEADLAB_WORKER_TOKEN, then <data-dir>/worker_token") {
  const testing::TempDir tmp("headlab-token");
  REQUIRE(!tmp.path().empty());
  const std::string dir = tmp.path();
  WorkerFlags f;
  f.data_dir = dir;
  auto t = ResolveToken(f, nullptr);
  REQUIRE(!t.ok());
  CHECK(t.status().message().find("HEADLAB_WORKER_TOKEN") != std::string::npos);
  // The user's token is not the workers': the worker port refuses it.
  REQUIRE(WriteFileAtomic(dir + "/token", "user\n").ok());
  CHECK(!ResolveToken(f, nullptr).ok());
  REQUIRE(WriteFileAtomic(dir + "/worker_token", "from-dir\n").ok());
  CHECK(*ResolveToken(f, nullptr) == "from-dir");
  CHECK(*ResolveToken(f, "from-env") == "from-env");
  REQUIRE(WriteFileAtomic(dir + "/other", "  from-file \n").ok());
  f.token_file = dir + "/other";
  CHECK(*ResolveToken(f, "from-env") == "from-file");
  f.token_file = dir + "/missing";
  CHECK(!ResolveToken(f, "from-env").ok());
  REQUIRE(WriteFileAtomic(dir + "/empty", "\n").ok());
  f.token_file = dir + "/empty";
  CHECK(!ResolveToken(f, nullptr).ok());
}

TEST_CASE("MakeWorkerOptions: one slot per GPU, --slots when CPU-only") {
  WorkerFlags f;
  f.name = "w";
  WorkerOptions o = MakeWorkerOptions(f, "tok", Gpus(4), {"/bin/headlab", "exec"});
  CHECK(o.slots == 4);
  CHECK(o.slot_devices == std::vector<std::string>{"0", "1", "2", "3"});
  CHECK(o.work_dir == ".headlab/worker-w");
  CHECK(o.connection.identity.rfind("worker-", 0) == 0);
  CHECK(o.connection.identity.find("-" + std::to_string(::getpid())) != std::string::npos);

  f.slots = 2;
  o = MakeWorkerOptions(f, "tok", Gpus(4), {});
  CHECK(o.slot_devices == std::vector<std::string>{"0", "1"});

  f.cpu_only = true;
  f.slots = 3;
  o = MakeWorkerOptions(f, "tok", Gpus(4), {});
  CHECK(o.slots == 3);
  CHECK(o.slot_devices == std::vector<std::string>{"", "", ""});
  REQUIRE(o.inventory.devices.size() == 1);
  CHECK(o.inventory.devices[0].kind == "cpu");

  WorkerFlags cpu;
  DeviceInventory none;
  none.devices.push_back(CpuDevice());
  o = MakeWorkerOptions(cpu, "tok", none, {});
  CHECK(o.slots == 1);
  CHECK(o.slot_devices == std::vector<std::string>{""});
}

TEST_CASE("Under Slurm the default worker name carries the job and node") {
  WorkerFlags f;
  ::setenv("SLURM_JOB_ID", "4242", 1);
  ::setenv("SLURMD_NODENAME", "gpu-07", 1);
  WorkerOptions o = MakeWorkerOptions(f, "tok", DeviceInventory{{CpuDevice()}}, {"x"});
  CHECK(o.name == "slurm-4242-gpu-07");
  f.name = "mine";
  CHECK(MakeWorkerOptions(f, "tok", DeviceInventory{{CpuDevice()}}, {"x"}).name == "mine");
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURMD_NODENAME");
  f.name = "";
  CHECK(
      MakeWorkerOptions(f, "tok", DeviceInventory{{CpuDevice()}}, {"x"}).name.rfind("slurm-", 0) !=
      0);
}

}  // namespace headlab
