// Data-parallel training across ranks (issue 10): one process per GPU (or per CPU rank in
// tests), a c10d process group — NCCL on CUDA, Gloo on CPU — rendezvoused through a
// FileStore in the attempt's directory, gradients averaged in buckets after backward.
// Rank 0 is the process the worker spawned: it launches ranks 1..N-1 (`headlab exec
// --rank R MANIFEST`) in its own process group, so the worker's cancel reaches every rank,
// and watches them: a rank that dies kills the others and fails the attempt (exit 1), so
// no communicator is left hanging; collectives also time out. Only rank 0 reports events
// and writes checkpoints. LibTorch translation units only.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "common/status.h"

namespace headlab {

// How long a collective may wait for a peer before the run fails.
inline constexpr std::chrono::seconds kCollectiveTimeout{120};
// Gradients are all-reduced in flat buckets of at most this many bytes.
inline constexpr int64_t kGradientBucketBytes = 25 << 20;

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  // Sums `t` (contiguous) across ranks in place and waits.
  virtual void AllReduceSum(torch::Tensor& t) = 0;
  // Takes the maximum of `t` across ranks in place and waits.
  virtual void AllReduceMax(torch::Tensor& t) = 0;
  virtual const char* backend() const = 0;
};

// Joins the group of `world` ranks as `rank`, through the file `store_path` (the same for
// every rank, on one host). NCCL for a CUDA device, Gloo on 127.0.0.1 for the CPU.
// Unavailable when this build has no backend for `device`.
StatusOr<std::unique_ptr<ProcessGroup>> JoinProcessGroup(int rank, int world,
                                                         const std::string& store_path,
                                                         torch::Device device);

// Averages the gradients of `params` across ranks: each bucket of gradients is flattened,
// summed, divided by the world size and copied back. Returns the seconds spent.
double AverageGradients(ProcessGroup& group, int world, const std::vector<torch::Tensor>& params);

// Launches and watches ranks 1..world-1 of this attempt (rank 0 calls it).
class RankLauncher {
 public:
  // Spawns `exe exec --rank R manifest` for R = 1..world-1 with stdout to /dev/null and
  // stderr inherited (their progress lines reach the worker's log tail). Each peer dies
  // with rank 0 (PR_SET_PDEATHSIG).
  static StatusOr<std::unique_ptr<RankLauncher>> Start(const std::string& exe,
                                                       const std::string& manifest, int world);
  // Kills the peers that still run and reaps them.
  ~RankLauncher();
  // Waits for every peer to exit (a failing peer ends this process with exit 1 instead).
  void Wait();

 private:
  RankLauncher() = default;
  void Watch();
  void KillUnreaped();

  std::vector<pid_t> pids_;
  std::unique_ptr<std::atomic<bool>[]> reaped_;  // by index of pids_, set by Watch
  std::thread watcher_;
  std::atomic<bool> done_{false};     // rank 0 is ending: no _exit from the watcher
  std::atomic<bool> killing_{false};  // the destructor's own SIGKILLs: not failures to report
};

// Returns the path of the running executable (/proc/self/exe).
std::string SelfExecutable();

}  // namespace headlab
