// Process groups (c10d), bucketed gradient averaging, and the rank launcher.
#include "worker/exec/dist.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
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

#include "common/log.h"

namespace headlab {
namespace {

using Seconds = std::chrono::duration<double>;

// One c10d backend object (ProcessGroupGloo or ProcessGroupNCCL: the same allreduce
// signature in LibTorch 1.13 and 2.x, where their common base class differs).
template <typename Backend>
class C10dGroup : public ProcessGroup {
 public:
  C10dGroup(c10::intrusive_ptr<Backend> backend, const char* name)
      : backend_(std::move(backend)), name_(name) {}
  void AllReduceSum(torch::Tensor& t) override { Reduce(t, c10d::ReduceOp::SUM); }
  void AllReduceMax(torch::Tensor& t) override { Reduce(t, c10d::ReduceOp::MAX); }
  const char* backend() const override { return name_; }

 private:
  void Reduce(torch::Tensor& t, c10d::ReduceOp op) {
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions opts;
    opts.reduceOp = op;
    backend_->allreduce(tensors, opts)->wait();
  }
  c10::intrusive_ptr<Backend> backend_;
  const char* name_;
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
          new C10dGroup<c10d::ProcessGroupNCCL>(std::move(pg), "nccl"));
#else
      return Status::Unavailable("this build has no NCCL process group (nccl.h not found)");
#endif
    }
#if HEADLAB_WITH_GLOO
    auto opts = c10d::ProcessGroupGloo::Options::create(kCollectiveTimeout);
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);
    return std::unique_ptr<ProcessGroup>(
        new C10dGroup<c10d::ProcessGroupGloo>(std::move(pg), "gloo"));
#else
    return Status::Unavailable("this build has no Gloo process group (gloo headers not found)");
#endif
  } catch (const c10::Error& e) {
    return Status::Unavailable("rank " + std::to_string(rank) + " of " + std::to_string(world) +
                               ": cannot join the process group: " +
                               std::string(e.what_without_backtrace()).substr(0, 300));
  }
}

double AverageGradients(ProcessGroup& group, int world, const std::vector<torch::Tensor>& params) {
  const auto t0 = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> bucket;
  int64_t bytes = 0;
  auto flush = [&] {
    if (bucket.empty()) return;
    std::vector<torch::Tensor> flat_parts;
    for (const torch::Tensor& g : bucket) flat_parts.push_back(g.reshape({-1}));
    torch::Tensor flat = torch::cat(flat_parts);
    group.AllReduceSum(flat);
    flat.div_(double(world));
    int64_t offset = 0;
    for (torch::Tensor& g : bucket) {
      g.copy_(flat.narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
    }
    bucket.clear();
    bytes = 0;
  };
  for (const torch::Tensor& p : params) {
    torch::Tensor g = p.grad();
    if (!g.defined()) continue;  // e.g. fixed heads' query/key rows: no gradient anywhere
    if (bytes + g.nbytes() > kGradientBucketBytes) flush();
    bucket.push_back(g);
    bytes += int64_t(g.nbytes());
  }
  flush();
  return Seconds(std::chrono::steady_clock::now() - t0).count();
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
  const pid_t parent = ::getpid();
  for (int rank = 1; rank < world; ++rank) {
    const std::string rank_text = std::to_string(rank);
    pid_t pid = ::fork();
    if (pid < 0) return Status::Internal("fork for rank " + rank_text + " failed");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);  // rank 0 died before the line above
      int devnull = ::open("/dev/null", O_WRONLY);
      if (devnull >= 0) ::dup2(devnull, STDOUT_FILENO);
      const char* argv[] = {exe.c_str(), "exec", "--rank", rank_text.c_str(), manifest.c_str(),
                            nullptr};
      ::execv(exe.c_str(), const_cast<char* const*>(argv));
      std::fprintf(stderr, "rank %s: cannot exec %s\n", rank_text.c_str(), exe.c_str());
      ::_exit(127);
    }
    l->pids_.push_back(pid);
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
