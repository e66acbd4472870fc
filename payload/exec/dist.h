// Data-parallel runs across ranks (docs/DESIGN.md, "Runs the worker executes"): one process per GPU
// (or per CPU rank in tests), a c10d process group — NCCL on CUDA, Gloo on CPU — rendezvoused
// through a FileStore in the attempt's directory; gradients are averaged by grad_reducer.h. Rank 0
// is the process the worker spawned: it launches ranks 1..N-1 (`headlab exec
// --rank R MANIFEST`) in its own process group, so the worker's cancel reaches every rank,
// and watches them: a rank that dies kills the others and fails the attempt (exit 1), so
// no communicator is left hanging; collectives also time out. Only rank 0 reports events
// and writes checkpoints. Run kinds train and bench-update take train.ranks > 1.
// LibTorch translation units only.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
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
// Gradients are all-reduced in flat buckets of at most this many bytes (grad_reducer.h).
inline constexpr int64_t kGradientBucketBytes = 25 << 20;

// A collective that has been started. Wait completes it: Gloo blocks the host until the
// result is in place; NCCL makes the caller's current CUDA stream wait for it (the host
// goes on), so work queued after Wait on that stream sees the result.
class CollectiveWork {
 public:
  virtual ~CollectiveWork() = default;
  virtual void Wait() = 0;
};

// One rank's handle on the group. Every rank must start the same collectives in the same
// order. Start* may be called from an autograd thread (gradient hooks) while the thread
// that owns the group waits in backward; never from two threads at once.
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Starts summing `t` (contiguous, on the group's device) across ranks in place.
  virtual std::unique_ptr<CollectiveWork> StartAllReduceSum(torch::Tensor& t) = 0;
  // Sums `t` across ranks in place and waits.
  void AllReduceSum(torch::Tensor& t) { StartAllReduceSum(t)->Wait(); }
  // Takes the maximum of `t` across ranks in place and waits.
  virtual void AllReduceMax(torch::Tensor& t) = 0;
  // Copies rank `root`'s `t` (contiguous) into `t` on every rank and waits.
  virtual void Broadcast(torch::Tensor& t, int root) = 0;
  virtual const char* backend() const = 0;
};

// Joins the group of `world` ranks as `rank`, through the file `store_path` (the same for
// every rank, on one host). NCCL for a CUDA device, Gloo on 127.0.0.1 for the CPU.
// Unavailable when this build has no backend for `device`.
StatusOr<std::unique_ptr<ProcessGroup>> JoinProcessGroup(int rank, int world,
                                                         const std::string& store_path,
                                                         torch::Device device);

class RankLauncher;

// The data-parallel side of one attempt: its process group and, on rank 0, its peers.
// Declared in this order so that the peers are stopped before the group is torn down (a
// communicator's teardown must not wait on live peers).
struct DataParallel {
  std::unique_ptr<ProcessGroup> group;  // null for one rank
  std::unique_ptr<RankLauncher> peers;  // rank 0 of several only
  DataParallel();
  DataParallel(DataParallel&&) noexcept;
  DataParallel& operator=(DataParallel&&) noexcept;
  ~DataParallel();
};

// For world > 1: rank 0 launches ranks 1..world-1 (`exec --rank R manifest`), and every
// rank joins the group through the file dist-store in `dir` (created if missing; the
// attempt's directory, the same for every rank). For world 1: an empty DataParallel.
StatusOr<DataParallel> StartDataParallel(int rank, int world, const std::string& dir,
                                         const std::string& manifest, torch::Device device);

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
