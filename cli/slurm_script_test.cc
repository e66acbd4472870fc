// The sbatch script of `headlab slurm submit-workers` and its option checks.
#include "cli/slurm_script.h"

#include <catch2/catch.hpp>

namespace headlab {
namespace {

SlurmWorkerJob Job() {
  SlurmWorkerJob j;
  j.partition = "gpu";
  j.nodes = 3;
  j.gpus_per_node = 4;
  j.coordinator = "tcp://head.example:8322";
  j.headlab = "/opt/headlab/bin/headlab";
  j.data_dir = "/shared/lab's data";
  j.token_file = "/shared/token";
  j.output = "/shared/slurm/slurm-%j.out";
  return j;
}

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("slurm script: one worker per node, named after job and node, requeueable") {
  std::string s = SbatchScript(Job());
  CHECK(s.rfind("#!/bin/bash\n", 0) == 0);
  CHECK(Has(s, "#SBATCH --partition=gpu\n"));
  CHECK(Has(s, "#SBATCH --nodes=3\n"));
  CHECK(Has(s, "#SBATCH --ntasks-per-node=1\n"));
  CHECK(Has(s, "#SBATCH --gpus-per-node=4\n"));
  CHECK(Has(s, "#SBATCH --requeue\n"));
  CHECK(Has(s, "#SBATCH --output=/shared/slurm/slurm-%j.out\n"));
  CHECK(!Has(s, "--time="));
  CHECK(Has(s, "--name \"slurm-${SLURM_JOB_ID}-${SLURMD_NODENAME}\""));
  CHECK(!Has(s, "--cpu-only"));
  // Paths are single-quoted, an embedded quote survives.
  CHECK(Has(s,
            "'/opt/headlab/bin/headlab' 'tcp://head.example:8322' '/shared/lab'\\''s data' "
            "'/shared/token'"));
  CHECK(Has(s, "exec srun "));

  SlurmWorkerJob cpu = Job();
  cpu.gpus_per_node = 0;
  cpu.cpu_slots = 2;
  cpu.time = "1:00:00";
  cpu.token_file = "";
  s = SbatchScript(cpu);
  CHECK(!Has(s, "--gpus-per-node"));
  CHECK(Has(s, "--cpu-only --slots 2"));
  CHECK(Has(s, "#SBATCH --time=1:00:00\n"));
  CHECK(!Has(s, "--token-file"));
}

TEST_CASE("slurm script: bad options are named") {
  CHECK(CheckSlurmWorkerJob(Job()).ok());
  auto msg = [](SlurmWorkerJob j) { return CheckSlurmWorkerJob(j).message(); };
  SlurmWorkerJob j = Job();
  j.partition = "a b";
  CHECK(msg(j) == "--partition: expected a Slurm partition name, got \"a b\"");
  j = Job();
  j.nodes = 0;
  CHECK(msg(j) == "--nodes: expected an integer in [1, 100000], got \"0\"");
  j = Job();
  j.coordinator = "head:8322";
  CHECK(msg(j) == "--coordinator: expected tcp://HOST:PORT, got \"head:8322\"");
  j = Job();
  j.coordinator = "tcp://head:port";
  CHECK(!CheckSlurmWorkerJob(j).ok());
  j = Job();
  j.data_dir = "rel/dir";
  CHECK(msg(j) == "--data-dir: expected an absolute path, got \"rel/dir\"");
  j = Job();
  j.gpus_per_node = -1;
  CHECK(msg(j) == "--gpus-per-node: expected an integer in [0, 64], got \"-1\"");
  j = Job();
  j.time = "1 day";
  CHECK(!CheckSlurmWorkerJob(j).ok());
  CHECK(ShellQuote("it's") == "'it'\\''s'");
}

}  // namespace headlab
