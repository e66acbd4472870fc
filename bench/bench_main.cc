// `headlab bench WHAT`: argument parsing and reporting; the benchmarks live in their own
// files (coordinator_bench.cc).
#include "bench/bench_main.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>

#include "bench/coordinator_bench.h"
#include "common/flags.h"
#include "common/json.h"

namespace headlab {
namespace {

// `headlab bench coordinator`'s options, for ParseFlags and the --help text alike.
const FlagsSpec& BenchSpec() {
  static const FlagsSpec kSpec{
      "headlab bench coordinator",
      {{"--runs", "", "N", "runs in the dispatch grid (default 10000)"},
       {"--workers", "", "N", "simulated worker connections (default 64)"},
       {"--batches", "", "N", "ingestion: METRICS messages per worker (default 16)"},
       {"--batch-points", "", "N", "ingestion: points per METRICS message (default 1000)"},
       {"--window", "", "N", "ingestion: METRICS messages in flight per worker (default 4)"},
       {"--results-runs", "", "N",
        "runs of the results grid, two arms paired by seed (default 500)"},
       {"--coordinator-binary", "", "PATH",
        "run the coordinator from another headlab binary (e.g. an\n"
        "older build, for before/after figures; default: this one)"},
       {"--json", "", "", "print the figures as JSON"},
       {"--keep", "", "", "keep the temp data dir (headlab.db, coordinator.log)"}}};
  return kSpec;
}

std::string BenchUsage() {
  return HelpText(
      BenchSpec(),
      "Starts a real coordinator (this binary, `coordinator`, temp data dir, free loopback\n"
      "ports) and measures, against its targets (docs/BENCHMARKS.md):\n"
      "  grid accept        POST of a grid of --runs no-op runs            target < 2 s\n"
      "  dispatch           --runs runs through --workers simulated worker\n"
      "                     connections (HLW1, ACCEPT+METRICS+DONE at once) target >= 500 runs/s\n"
      "  metric ingestion   --workers x --batches METRICS of --batch-points\n"
      "                     points, counted again in headlab.db              target >= 200000 "
      "points/s\n"
      "  live latency       a client of GET /api/v1/stream follows 8 runs during\n"
      "                     the ingestion; p99 of send -> arrival          target <= 1 s\n"
      "  heartbeats while   --results-runs runs with logprobs artifacts, then\n"
      "  results compute    GET .../results?recompute=1 back to back for 6 s;\n"
      "                     p99 of coordinator HEARTBEAT lateness  target <= 0.1 s\n"
      "  stored results     GET .../results back to back once finished; median target <= 0.05 s\n"
      "  requeue latency    a worker goes silent after ACCEPT; time from its\n"
      "                     last HEARTBEAT to ASSIGN of attempt 2 elsewhere  target <= 5 s\n",
      "exit: 0 every target met, 1 a target missed or the benchmark failed, 2 bad arguments\n");
}

// Returns the CPU model from /proc/cpuinfo, or "".
std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      return colon == std::string::npos ? "" : line.substr(colon + 2);
    }
  }
  return "";
}

// Returns the 1-minute load average (contention from other processes skews the figures).
double LoadAverage() {
  double l = -1;
  std::ifstream in("/proc/loadavg");
  in >> l;
  return l;
}

int CoordinatorCommand(int argc, char** argv) {
  auto args = ParseFlags(BenchSpec(), std::vector<std::string>(argv, argv + argc));
  if (!args.ok()) {
    std::fprintf(stderr, "%s\n\n%s", args.status().message().c_str(), BenchUsage().c_str());
    return 2;
  }
  if (args->help()) {
    std::fputs(BenchUsage().c_str(), stdout);
    return 0;
  }
  bench::CoordinatorBenchOptions opt;
  const bool json = args->Has("--json");
  opt.keep = args->Has("--keep");
  if (args->Has("--coordinator-binary")) {
    opt.binary = args->Get("--coordinator-binary");
    if (opt.binary.empty()) {
      std::fprintf(stderr, "headlab bench coordinator: --coordinator-binary expects a path\n");
      return 2;
    }
  }
  for (const auto& [name, dst] : {std::pair<const char*, int*>{"--runs", &opt.runs},
                                  {"--workers", &opt.workers},
                                  {"--batches", &opt.batches},
                                  {"--batch-points", &opt.batch_points},
                                  {"--window", &opt.window},
                                  {"--results-runs", &opt.results_runs}}) {
    if (!args->Has(name)) continue;
    auto n = ParseIntFlag(name, args->Get(name), 1, 10000000);
    if (!n.ok()) {
      std::fprintf(stderr, "headlab bench coordinator: %s\n", n.status().message().c_str());
      return 2;
    }
    *dst = int(*n);
  }

  auto r = bench::RunCoordinatorBench(opt);
  if (!r.ok()) {
    std::fprintf(stderr, "headlab bench coordinator: %s\n", r.status().ToString().c_str());
    return 1;
  }
  bool pass = true;
  for (const auto& f : r->figures) pass = pass && f.Pass();
  char date[32];
  std::time_t t = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  utsname u{};
  uname(&u);
  unsigned cores = std::thread::hardware_concurrency();
  if (json) {
    Json out = {{"benchmark", "coordinator"},
                {"date", date},
                {"host",
                 {{"nproc", cores},
                  {"cpu", CpuModel()},
                  {"kernel", u.release},
                  {"loadavg_1m_after", LoadAverage()}}},
                {"options",
                 {{"runs", opt.runs},
                  {"workers", opt.workers},
                  {"batches", opt.batches},
                  {"batch_points", opt.batch_points},
                  {"window", opt.window},
                  {"results_runs", opt.results_runs},
                  {"coordinator_binary", opt.binary}}},
                {"figures", bench::FiguresJson(r->figures)},
                {"notes", r->notes},
                {"pass", pass}};
    if (opt.keep) out["data_dir"] = r->data_dir;
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("headlab bench coordinator  %s  %u cores, %s\n", date, cores, CpuModel().c_str());
    std::printf(
        "%d no-op runs, %d simulated workers, ingestion %d x %d x %d points, "
        "%d-run results grid; load average %.2f (1 min, after the run)\n\n",
        opt.runs, opt.workers, opt.workers, opt.batches, opt.batch_points, opt.results_runs,
        LoadAverage());
    std::fputs(bench::FormatTable(r->figures).c_str(), stdout);
    std::printf("\n");
    for (const auto& n : r->notes) std::printf("  %s\n", n.c_str());
    if (opt.keep) std::printf("  data dir kept: %s\n", r->data_dir.c_str());
  }
  return pass ? 0 : 1;
}

}  // namespace

int BenchMain(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "";
  if (what == "coordinator") return CoordinatorCommand(argc - 1, argv + 1);
  if (what == "--help" || what == "-h" || what == "help") {
    std::printf(
        "usage: headlab bench WHAT [ARGS]\n\nbenchmarks:\n"
        "  coordinator   grid accept, dispatch, ingestion and requeue figures\n"
        "                (headlab bench coordinator --help)\n");
    return 0;
  }
  std::fprintf(
      stderr, "usage: headlab bench coordinator [--help]%s%s\n",
      what.empty() ? "" : "   (unknown benchmark: ", what.empty() ? "" : (what + ")").c_str());
  return 2;
}

}  // namespace headlab
