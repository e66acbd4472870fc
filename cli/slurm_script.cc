// The sbatch script for Slurm-started workers.
#include "cli/slurm_script.h"

#include <cctype>

namespace headlab {
namespace {

Status Bad(const std::string& option, const std::string& expected, const std::string& got) {
  return Status::InvalidArgument(option + ": expected " + expected + ", got \"" + got + "\"");
}

// Slurm names and time limits reach the script as #SBATCH values: no spaces or quotes.
bool PlainToken(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
          c == ':' || c == ',' || c == '+' || c == '[' || c == ']'))
      return false;
  return true;
}

}  // namespace

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Status CheckSlurmWorkerJob(const SlurmWorkerJob& job) {
  if (!PlainToken(job.partition))
    return Bad("--partition", "a Slurm partition name", job.partition);
  if (job.nodes < 1 || job.nodes > 100000)
    return Bad("--nodes", "an integer in [1, 100000]", std::to_string(job.nodes));
  if (job.gpus_per_node < 0 || job.gpus_per_node > 64)
    return Bad("--gpus-per-node", "an integer in [0, 64]", std::to_string(job.gpus_per_node));
  if (job.cpu_slots < 1 || job.cpu_slots > 1024)
    return Bad("--cpu-slots", "an integer in [1, 1024]", std::to_string(job.cpu_slots));
  if (job.cpus_per_node < 0 || job.cpus_per_node > 100000)
    return Bad("--cpus-per-node", "an integer in [0, 100000]", std::to_string(job.cpus_per_node));
  if (!job.time.empty() && !PlainToken(job.time))
    return Bad("--time", "a Slurm time limit such as 4:00:00", job.time);
  if (!PlainToken(job.job_name)) return Bad("--job-name", "a name without spaces", job.job_name);
  const std::string& ep = job.coordinator;
  size_t colon = ep.rfind(':');
  bool ep_ok = ep.rfind("tcp://", 0) == 0 && colon != std::string::npos && colon > 6 &&
               colon + 1 < ep.size() &&
               ep.find_first_not_of("0123456789", colon + 1) == std::string::npos;
  if (!ep_ok) return Bad("--coordinator", "tcp://HOST:PORT", ep);
  for (auto [opt, path] : {std::pair<const char*, const std::string*>{"--headlab", &job.headlab},
                           {"--data-dir", &job.data_dir},
                           {"--output", &job.output}}) {
    if (path->empty() || (*path)[0] != '/') return Bad(opt, "an absolute path", *path);
  }
  if (!job.token_file.empty() && job.token_file[0] != '/')
    return Bad("--token-file", "an absolute path", job.token_file);
  if (!job.coordinator_key.empty() && job.coordinator_key[0] != '/')
    return Bad("coordinator.json: worker_key", "an absolute path", job.coordinator_key);
  return Status::Ok();
}

std::string SbatchScript(const SlurmWorkerJob& job) {
  std::string s = "#!/bin/bash\n";
  s += "#SBATCH --job-name=" + job.job_name + "\n";
  s += "#SBATCH --partition=" + job.partition + "\n";
  s += "#SBATCH --nodes=" + std::to_string(job.nodes) + "\n";
  s += "#SBATCH --ntasks-per-node=1\n";
  if (job.gpus_per_node > 0)
    s += "#SBATCH --gpus-per-node=" + std::to_string(job.gpus_per_node) + "\n";
  if (job.cpus_per_node > 0)
    s += "#SBATCH --cpus-per-task=" + std::to_string(job.cpus_per_node) + "\n";
  if (!job.time.empty()) s += "#SBATCH --time=" + job.time + "\n";
  // Requeue (not cancel) on node failure or preemption; append so a requeued run's output
  // follows the first one's in the same file.
  s += "#SBATCH --requeue\n";
  s += "#SBATCH --open-mode=append\n";
  s += "#SBATCH --output=" + job.output + "\n";
  s += "#\n"
       "# Written by `headlab slurm submit-workers`: one headlab worker per node, connecting to\n"
       "# " +
       job.coordinator +
       ". Workers are named slurm-<job id>-<node>; when Slurm\n"
       "# requeues or preempts the allocation they get SIGTERM, stop their attempts and\n"
       "# disconnect (the coordinator requeues those runs, resuming from checkpoints), and the\n"
       "# restarted allocation brings back workers of the same names.\n";
  s += "set -u\n";
  s += "echo \"headlab workers: job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}) on "
       "$SLURM_JOB_NODELIST at $(date -u +%FT%TZ)\"\n";
  std::string worker = "exec \"$0\" worker --coordinator \"$1\" --data-dir \"$2\"";
  if (!job.token_file.empty()) worker += " --token-file \"$3\"";
  if (!job.coordinator_key.empty()) worker += " --coordinator-key \"$4\"";
  worker += " --name \"slurm-${SLURM_JOB_ID}-${SLURMD_NODENAME}\"";
  if (job.gpus_per_node == 0) worker += " --cpu-only --slots " + std::to_string(job.cpu_slots);
  // One task per node; a worker that exits does not take the other nodes' workers down.
  s += "exec srun --kill-on-bad-exit=0 --ntasks-per-node=1 bash -c " + ShellQuote(worker) + " " +
       ShellQuote(job.headlab) + " " + ShellQuote(job.coordinator) + " " +
       ShellQuote(job.data_dir) + " " + ShellQuote(job.token_file) +
       (job.coordinator_key.empty() ? "" : " " + ShellQuote(job.coordinator_key)) + "\n";
  return s;
}

}  // namespace headlab
