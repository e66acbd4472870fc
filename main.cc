// headlab: one binary, one subcommand per process role (DESIGN.md, Processes).
#include <cstdio>
#include <cstring>
#include <string>

#include "bench/bench_main.h"
#include "cli/cli_main.h"
#include "coordinator/coordinator_main.h"
#include "worker/exec/exec_main.h"
#include "worker/worker_main.h"

namespace {

void PrintUsage(FILE* out) {
  std::fprintf(out,
      "usage: headlab COMMAND [ARGS]   (headlab COMMAND --help for details)\n"
      "\n"
      "daemons:\n"
      "  coordinator   run the coordinator (SQLite, worker socket, HTTP API, dashboard)\n"
      "  worker        run a worker that executes runs on this host's devices\n"
      "  exec          execute one attempt of one run from a manifest (spawned by worker)\n"
      "  up            start an embedded coordinator + local worker and keep them running\n"
      "  down          stop what `headlab up --detach` started\n"
      "\n"
      "experiments:\n"
      "  submit FILE   submit a grid            status        coordinator and fleet\n"
      "  runs EXP      list an experiment's runs show RUN      one run in full\n"
      "  wait EXP      wait with a progress bar  results EXP   one row per arm + comparisons\n"
      "  cancel ID     cancel a run or experiment retry RUN    requeue a finished run\n"
      "  query SQL     read-only SQL             export EXP    JSON/CSV export\n"
      "\n"
      "  bench WHAT    benchmarks (bench coordinator)\n");
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
  if (cmd == "exec") return headlab::ExecMain(argc - 1, argv + 1);
  if (cmd == "bench") return headlab::BenchMain(argc - 1, argv + 1);
  if (headlab::IsCliCommand(cmd)) return headlab::CliMain(argc - 1, argv + 1);
  std::fprintf(stderr, "headlab: unknown command '%s'\n\n", cmd.c_str());
  PrintUsage(stderr);
  return 2;
}
