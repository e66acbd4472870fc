// `headlab bench coordinator`: the coordinator's throughput and liveness figures against
// its targets (docs/BENCHMARKS.md, "Service"), measured on a real coordinator child
// process.
#pragma once

#include <string>
#include <vector>

#include "bench/figures.h"
#include "common/status.h"

namespace headlab::bench {

struct CoordinatorBenchOptions {
  std::string binary = "/proc/self/exe";  // the headlab binary to run `coordinator` from
  int runs = 10000;                       // no-op runs in the dispatch grid
  int workers = 64;                       // simulated worker connections
  int batches = 16;                       // ingestion: METRICS messages per worker
  int batch_points = 1000;                // ingestion: points per METRICS message
  int window = 4;                         // ingestion: METRICS messages in flight per worker
  int results_runs = 500;                 // runs of the results grid (two arms, paired by seed)
  double results_window_s = 6;            // each window of the results phase
  double phase_timeout_s = 300;
  bool keep = false;  // keep the temp data dir (coordinator.log, headlab.db)
};

// Everything a run of the benchmark measured.
struct CoordinatorBenchResult {
  std::vector<Figure> figures;
  std::vector<std::string> notes;  // checks and observations, one line each
  std::string data_dir;
};

// Runs the phases (grid accept, dispatch, ingestion, heartbeat lateness, heartbeats
// while results are computed, dead-worker requeue). Returns an error only when the benchmark could
// not run at all (e.g. the coordinator did not start); a phase that fails leaves its figure
// unmeasured with a note.
StatusOr<CoordinatorBenchResult> RunCoordinatorBench(const CoordinatorBenchOptions& options);

}  // namespace headlab::bench
