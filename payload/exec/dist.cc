// Process groups (c10d), device choice per rank, and the rank launcher.
#include "payload/exec/dist.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
// HEADLAB_WITH_GLOO / _NCCL come from CMakeLists.txt when the headers are there (LibTorch's
// own USE_C10D_* definitions say what it was built with, not what this machine can include).
#if HEADLAB_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if HEADLAB_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "common/child_process.h"
#include "common/files.h"
#include "common/log.h"

namespace headlab {
namespace {

// A started c10d collective (c10d::ProcessGroup::Work in LibTorch 1.13, c10d::Work in 2.x).
template <typename WorkPtr>
class C10dWork : public CollectiveWork {
 public:
  explicit C10dWork(WorkPtr work) : work_(std::move(work)) {}
  void Wait() override { work_->wait(); }

 private:
  WorkPtr work_;
};

template <typename WorkPtr>
std::unique_ptr<CollectiveWork> Started(WorkPtr work) {
  return std::make_unique<C10dWork<WorkPtr>>(std::move(work));
}

// A bf16 sum carried out in fp32 (`wide`) and rounded back into `narrow` on Wait.
class WidenedWork : public CollectiveWork {
 public:
  WidenedWork(std::unique_ptr<CollectiveWork> work, torch::Tensor wide, torch::Tensor narrow)
      : work_(std::move(work)), wide_(std::move(wide)), narrow_(std::move(narrow)) {}
  void Wait() override {
    work_->Wait();
    narrow_.copy_(wide_);
  }

 private:
  std::unique_ptr<CollectiveWork> work_;
  torch::Tensor wide_, narrow_;
};

// One c10d backend object (ProcessGroupGloo or ProcessGroupNCCL: the same collective
// signatures in LibTorch 1.13 and 2.x, where their common base class differs).
// `widen_bf16`: the backend cannot sum bf16 (Gloo in LibTorch 1.13: "Invalid scalar
// type"), so bf16 tensors are summed in fp32 and rounded back; CPU runs only, where the
// bytes saved do not matter.
template <typename Backend>
class C10dGroup : public ProcessGroup {
 public:
  C10dGroup(c10::intrusive_ptr<Backend> backend, int rank, int world, const char* name,
            bool widen_bf16)
      : backend_(std::move(backend)),
        rank_(rank),
        world_(world),
        name_(name),
        widen_bf16_(widen_bf16) {}
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::unique_ptr<CollectiveWork> StartAllReduceSum(torch::Tensor& t) override {
    if (widen_bf16_ && t.scalar_type() == torch::kBFloat16) {
      torch::Tensor wide = t.to(torch::kFloat);
      return std::make_unique<WidenedWork>(Started(Reduce(wide, c10d::ReduceOp::SUM)), wide, t);
    }
    return Started(Reduce(t, c10d::ReduceOp::SUM));
  }
  void AllReduceMax(torch::Tensor& t) override { Reduce(t, c10d::ReduceOp::MAX)->wait(); }
  void Broadcast(torch::Tensor& t, int root) override {
    std::vector<at::Tensor> tensors{t};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    backend_->broadcast(tensors, opts)->wait();
  }
  const char* backend() const override { return name_; }

 private:
  auto Reduce(torch::Tensor& t, c10d::ReduceOp op) {
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions opts;
    opts.reduceOp = op;
    return backend_->allreduce(tensors, opts);
  }
  c10::intrusive_ptr<Backend> backend_;
  int rank_, world_;
  const char* name_;
  bool widen_bf16_;
};

std::string ExitText(int status) {
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended with status " + std::to_string(status);
}

}  // namespace

StatusOr<std::unique_ptr<ProcessGroup>> JoinProcessGroup(int rank, int world,
                                                         const std::string& store_path,
                                                         torch::Device device) {
  try {
    auto store = c10::make_intrusive<c10d::FileStore>(store_path, world);
    store->setTimeout(std::chrono::duration_cast<std::chrono::milliseconds>(kCollectiveTimeout));
    if (device.is_cuda()) {
#if HEADLAB_WITH_NCCL
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = kCollectiveTimeout;
      auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world, opts);
      return std::unique_ptr<ProcessGroup>(
          new C10dGroup<c10d::ProcessGroupNCCL>(std::move(pg), rank, world, "nccl", false));
#else
      return Status::Unavailable("this build has no NCCL process group (nccl.h not found)");
#endif
    }
#if HEADLAB_WITH_GLOO
    auto opts = c10d::ProcessGroupGloo::Options::create(kCollectiveTimeout);
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);
    return std::unique_ptr<ProcessGroup>(
        new C10dGroup<c10d::ProcessGroupGloo>(std::move(pg), rank, world, "gloo", true));
#else
    return Status::Unavailable("this build has no Gloo process group (gloo headers not found)");
#endif
  } catch (const c10::Error& e) {
    return Status::Unavailable("rank " + std::to_string(rank) + " of " + std::to_string(world) +
                               ": cannot join the process group: " +
                               std::string(e.what_without_backtrace()).substr(0, 300));
  }
}

DataParallel::DataParallel() = default;
DataParallel::DataParallel(DataParallel&&) noexcept = default;
DataParallel& DataParallel::operator=(DataParallel&&) noexcept = default;
DataParallel::~DataParallel() = default;

StatusOr<DataParallel> StartDataParallel(int rank, int world, const std::string& dir,
                                         const std::string& manifest, torch::Device device) {
  DataParallel dp;
  if (world <= 1) return StatusOr<DataParallel>(std::move(dp));
  HEADLAB_RETURN_IF_ERROR(MakeDirs(dir));
  const std::string store = dir + "/dist-store";
  if (rank == 0) {
    std::remove(store.c_str());  // a requeued attempt's stale rendezvous
    StatusOr<std::unique_ptr<RankLauncher>> launched =
        RankLauncher::Start(SelfExecutable(), manifest, world);
    if (!launched.ok()) return launched.status();
    dp.peers = std::move(launched.value());
  }
  StatusOr<std::unique_ptr<ProcessGroup>> joined = JoinProcessGroup(rank, world, store, device);
  if (!joined.ok()) return joined.status();
  dp.group = std::move(joined.value());
  LogInfo("rank " + std::to_string(rank) + " of " + std::to_string(world) + " joined (" +
          dp.group->backend() + ", " + device.str() + ")");
  return StatusOr<DataParallel>(std::move(dp));
}

std::string SelfExecutable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

StatusOr<std::unique_ptr<RankLauncher>> RankLauncher::Start(const std::string& exe,
                                                            const std::string& manifest,
                                                            int world) {
  std::unique_ptr<RankLauncher> l(new RankLauncher());
  // The peers die with rank 0's process (PR_SET_PDEATHSIG), stay in its process group (the
  // worker's signal to the attempt reaches them), print nothing on stdout (the event
  // stream is rank 0's) and share its stderr (the attempt's log).
  SpawnOptions opt;
  opt.own_group = false;
  opt.stdout_to = SpawnOptions::Output::kNull;
  opt.stderr_to = SpawnOptions::Output::kInherit;
  for (int rank = 1; rank < world; ++rank) {
    auto child =
        ChildProcess::Spawn({exe, "exec", "--rank", std::to_string(rank), manifest}, {}, opt);
    if (!child.ok())
      return Status::Internal("rank " + std::to_string(rank) + ": " + child.status().message());
    l->pids_.push_back((*child)->Release());
  }
  l->reaped_ = std::make_unique<std::atomic<bool>[]>(l->pids_.size());
  l->watcher_ = std::thread([raw = l.get()] { raw->Watch(); });
  return l;
}

void RankLauncher::KillUnreaped() {
  // A reaped pid may already belong to another process.
  for (size_t i = 0; i < pids_.size(); ++i)
    if (!reaped_[i]) ::kill(pids_[i], SIGKILL);
}

void RankLauncher::Watch() {
  // Reaps the peers as they end. A peer that fails while the run is going on leaves the
  // others blocked in a collective: kill them all and end the attempt now (exit 1), so the
  // coordinator retries the run as a whole instead of waiting for a timeout.
  size_t alive = pids_.size();
  while (alive > 0) {
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (reaped_[i]) continue;
      int status = 0;
      if (::waitpid(pids_[i], &status, WNOHANG) != pids_[i]) continue;
      reaped_[i] = true;
      --alive;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (ok || killing_) continue;
      LogError("rank " + std::to_string(i + 1) + " " + ExitText(status) +
               "; stopping every rank of this attempt");
      if (!done_) {
        KillUnreaped();
        std::fflush(stdout);
        ::_exit(1);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void RankLauncher::Wait() {
  // Every rank reaches the end of training together (collectives), so the peers exit
  // promptly; one that fails instead ends this process in Watch.
  if (watcher_.joinable()) watcher_.join();
}

RankLauncher::~RankLauncher() {
  // Rank 0 is leaving (an error, often a collective that lost a peer): give the watcher one
  // round to name a peer that died first, then stop the others.
  done_ = true;
  if (watcher_.joinable()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    killing_ = true;
    KillUnreaped();
    watcher_.join();
  }
}

}  // namespace headlab
