// headlab: one binary, one subcommand per process role (docs/DESIGN.md, Processes).
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

#include "bench/bench_main.h"
#include "cli/cli_main.h"
#include "coordinator/backup.h"
#include "coordinator/coordinator_main.h"
#include "coordinator/query_child.h"
#include "data/data_main.h"
#include "worker/command_run.h"
#include "worker/worker_main.h"

namespace {

void PrintUsage(FILE* out) {
  std::fprintf(
      out,
      "usage: headlab COMMAND [ARGS]   (headlab COMMAND --help for details)\n"
      "\n"
      "daemons:\n"
      "  coordinator   run the coordinator (SQLite, worker socket, HTTP API, dashboard)\n"
      "  worker        run a worker that executes runs on this host's devices\n"
      "  exec          execute one attempt of one run from a manifest (spawned by worker)\n"
      "  up            start an embedded coordinator + local worker and keep them running\n"
      "  down          stop what `headlab up --detach` started\n"
      "  backup        copy the database while the coordinator runs; --restore puts one back\n"
      "  slurm submit-workers   one worker per node of a Slurm allocation (sbatch)\n"
      "\n"
      "experiments (EXP: an id or a grid name; TARGET: run ID or experiment EXP):\n"
      "  submit FILE     submit a grid             status          coordinator and fleet\n"
      "  runs [EXP]      list or search runs       show RUN        one run in full\n"
      "  wait EXP        wait with a progress bar  results EXP     arms + comparisons\n"
      "  logs RUN        events and stderr         artifacts RUN   list / download files\n"
      "  cancel TARGET   cancel a run/experiment   retry RUN       requeue a failed run\n"
      "  tag TARGET T    tag a run/experiment      note TARGET X   note on a run/experiment\n"
      "  query SQL       read-only SQL             export EXP      JSON/CSV/history export\n"
      "  diff RUN RUN    config keys that differ\n"
      "\n"
      "  bench WHAT    benchmarks (bench coordinator)\n"
      "  data prepare  text files -> token shards   data inspect DIR   check shards\n");
}

// Runs `headlab exec` from libheadlab_exec.so beside this binary (the only part that
// needs LibTorch). Returns its exit code, or 1 when the plugin cannot be loaded.
int RunExecPlugin(int argc, char** argv) {
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    std::fprintf(stderr, "headlab exec: cannot resolve /proc/self/exe\n");
    return 1;
  }
  std::string dir(self, size_t(n));
  dir.resize(dir.rfind('/'));
  std::string path = dir + "/libheadlab_exec.so";
  void* plugin = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!plugin) {
    std::fprintf(stderr, "headlab exec: cannot load %s: %s\n", path.c_str(), ::dlerror());
    return 1;
  }
  using ExecEntry = int (*)(int, char**);
  auto entry = reinterpret_cast<ExecEntry>(::dlsym(plugin, "headlab_exec_main"));
  if (!entry) {
    std::fprintf(stderr, "headlab exec: %s has no headlab_exec_main\n", path.c_str());
    return 1;
  }
  return entry(argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    PrintUsage(stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  // Each entry point receives argv starting at its own command name.
  if (cmd == "coordinator") return headlab::CoordinatorMain(argc - 1, argv + 1);
  if (cmd == "worker") return headlab::WorkerMain(argc - 1, argv + 1);
  if (cmd == "backup") return headlab::BackupMain(argc - 1, argv + 1);
  if (cmd == "query-child") return headlab::coord::QueryChildMain(argc - 1, argv + 1);
  if (cmd == "exec") {
    // The command run kind needs no LibTorch: it runs without loading the plugin.
    if (auto rc = headlab::MaybeRunCommandExec(argc - 1, argv + 1)) return *rc;
    return RunExecPlugin(argc - 1, argv + 1);
  }
  if (cmd == "bench") return headlab::BenchMain(argc - 1, argv + 1);
  if (cmd == "data") return headlab::DataMain(argc - 1, argv + 1);
  if (headlab::IsCliCommand(cmd)) return headlab::CliMain(argc - 1, argv + 1);
  std::string guess = headlab::SuggestCommand(cmd);
  std::fprintf(stderr, "headlab: unknown command '%s'%s\n\n", cmd.c_str(),
               guess.empty() ? "" : ("; did you mean '" + guess + "'?").c_str());
  PrintUsage(stderr);
  return 2;
}
