// The sbatch script of `headlab slurm submit-workers`: one headlab worker per node of a
// Slurm allocation, each connecting to the coordinator and named after the job and node.
#pragma once

#include <string>

#include "common/status.h"

namespace headlab {

struct SlurmWorkerJob {
  std::string partition;  // --partition (required)
  int nodes = 1;          // --nodes
  int gpus_per_node = 0;  // --gpus-per-node; 0 = CPU-only workers
  int cpu_slots = 1;      // concurrent runs of a CPU-only worker (gpus_per_node 0)
  int cpus_per_node = 0;  // --cpus-per-task of the one task per node; 0 = Slurm's default
  std::string time;       // --time, "" = the partition's limit
  std::string job_name = "headlab-workers";
  std::string coordinator;      // tcp://HOST:PORT the workers connect to
  std::string headlab;          // absolute path of the headlab binary on the nodes
  std::string data_dir;         // absolute; workers' --data-dir (work dirs worker-<name>)
  std::string token_file;       // absolute, or "" (then $HEADLAB_WORKER_TOKEN must reach the job)
  std::string coordinator_key;  // absolute: the worker port's CURVE key, or "" (unencrypted)
  std::string output;           // sbatch --output pattern, e.g. DIR/slurm-%j.out
};

// Returns InvalidArgument naming the option when a field is unusable (empty partition,
// nodes < 1, a coordinator that is not tcp://HOST:PORT, relative paths, ...).
Status CheckSlurmWorkerJob(const SlurmWorkerJob& job);

// Returns the script. Workers are named slurm-<SLURM_JOB_ID>-<SLURMD_NODENAME>, so a
// requeued or preempted allocation (same job id) brings back workers of the same names;
// the script asks Slurm to requeue (not cancel) on node failure or preemption.
std::string SbatchScript(const SlurmWorkerJob& job);

// Returns `s` quoted for bash (single quotes; embedded ones as '\'').
std::string ShellQuote(const std::string& s);

}  // namespace headlab
