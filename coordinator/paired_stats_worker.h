// Recomputes finished experiments' results and paired statistics off the loop thread.
// ComputeResults reads every run of an experiment and its logprobs artifacts (SHA-256,
// 2,000 bootstrap resamples per eval comparison; about a second per 100,000 runs on the
// development machine): on the loop it would stall heartbeats and leases. The loop hands
// over ids after its commit (Core::SetFinishedSink); this thread computes from one
// snapshot of its own read-only connection (results_store.h) and gives the answer back
// for the loop to store (Core::StoreResultsOf: one results row and the paired_stats rows,
// only if nothing changed since the snapshot).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "common/json.h"
#include "coordinator/results_store.h"

namespace headlab::coord {

class PairedStatsWorker {
 public:
  // `save(results)` is called on this worker's thread; it must hand the write to the
  // loop (Router::Post).
  PairedStatsWorker(std::string db_path, std::function<void(ComputedResults)> save);
  // Stops and joins the thread (pending experiments are dropped: the next finish of any
  // of their runs recomputes them).
  ~PairedStatsWorker();
  PairedStatsWorker(const PairedStatsWorker&) = delete;
  PairedStatsWorker& operator=(const PairedStatsWorker&) = delete;

  // Queues `experiment` (once, however often it is queued before its turn). Any thread.
  void Enqueue(int64_t experiment);

 private:
  void Loop();

  // Constant after construction.
  const std::string db_path_;
  const std::function<void(ComputedResults)> save_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::set<int64_t> pending_;  // guarded by mu_
  bool stop_ = false;          // guarded by mu_
  std::thread thread_;
};

}  // namespace headlab::coord
