// `headlab worker`: flags, token, devices and host provenance, signals, then Worker::Run.
#include "worker/worker_main.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "common/files.h"
#include "common/log.h"
#include "common/source_dir.h"
#include "common/token_lookup.h"
#include "worker/devices.h"
#include "worker/host_provenance.h"
#include "worker/worker.h"
#include "worker/worker_flags.h"

namespace headlab {
namespace {

int g_stop_fd = -1;  // Worker::stop_fd(), for the signal handler

void OnStopSignal(int) {
  int saved = errno;
  char b = 1;
  if (g_stop_fd >= 0) {
    ssize_t ignored = ::write(g_stop_fd, &b, 1);
    (void)ignored;
  }
  errno = saved;
}

void SetHandler(int sig, void (*handler)(int)) {
  struct sigaction sa;
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(sig, &sa, nullptr);
}

// Returns the real path of the running binary: `exec` children run exactly this file.
std::string SelfPath() {
  char buf[PATH_MAX];
  if (::realpath("/proc/self/exe", buf) == nullptr) return "/proc/self/exe";
  return buf;
}

}  // namespace

int WorkerMain(int argc, char** argv) {
  SetLogRole("worker");
  StatusOr<WorkerFlags> flags = ParseWorkerFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "%s\n\n%s", flags.status().message().c_str(), WorkerUsage().c_str());
    return 2;
  }
  if (flags->help) {
    std::fputs(WorkerUsage().c_str(), stdout);
    return 0;
  }
  StatusOr<std::string> token = ResolveToken(*flags, std::getenv(kWorkerToken.env));
  if (!token.ok()) {
    std::fprintf(stderr, "headlab worker: %s\n", token.status().message().c_str());
    return 2;
  }
  StatusOr<std::string> coordinator_key = ResolveCoordinatorKey(*flags);
  if (!coordinator_key.ok()) {
    std::fprintf(stderr, "headlab worker: %s\n", coordinator_key.status().message().c_str());
    return 2;
  }
  // A coordinator that goes away mid-write must not kill us; errors come back as EPIPE.
  ::signal(SIGPIPE, SIG_IGN);

  DeviceInventory inventory = DiscoverDevices();
  if (inventory.has_gpu) {
    LogInfo(std::to_string(inventory.devices.size()) +
            " GPU(s): " + DescribeDevices(inventory.devices) + "; driver " + inventory.cuda_driver +
            ", runtime " + inventory.cuda_runtime);
  } else {
    LogInfo("no GPU (" + inventory.note + "); running CPU-only on " + inventory.devices[0].name);
  }
  const std::string self = SelfPath();
  WorkerOptions options = MakeWorkerOptions(*flags, *token, inventory, {self, "exec"});
  options.connection.curve_server_key = *coordinator_key;
  Status made = MakeDirs(options.work_dir);
  if (!made.ok()) {
    std::fprintf(stderr, "headlab worker: --work-dir: %s\n", made.message().c_str());
    return 2;
  }
  options.host_provenance = ComputeHostProvenance(SourceDir(), self, options.inventory);
  LogInfo("source " + options.host_provenance["git_commit"].dump() +
          " dirty=" + options.host_provenance["git_dirty"].dump() + ", binary sha256 " +
          options.host_provenance["binary_sha256"].get<std::string>().substr(0, 12));

  Worker worker(std::move(options));
  g_stop_fd = worker.stop_fd();
  SetHandler(SIGTERM, OnStopSignal);
  SetHandler(SIGINT, OnStopSignal);
  int rc;
  try {
    rc = worker.Run();
  } catch (const std::exception& e) {
    // A bug, not bad input (every message is validated first): say so instead of aborting.
    LogError(std::string("internal error: ") + e.what());
    rc = 1;
  }
  SetHandler(SIGTERM, SIG_DFL);
  SetHandler(SIGINT, SIG_DFL);
  g_stop_fd = -1;
  if (rc == 1)
    std::fprintf(stderr, "headlab worker: refused by the coordinator (see the log above)\n");
  return rc;
}

}  // namespace headlab
