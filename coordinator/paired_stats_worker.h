// Recomputes finished experiments' paired statistics off the loop thread. ComputeResults
// reads every run of an experiment (about a second per 100,000 runs on the development
// machine): on the loop it would stall heartbeats and leases. The loop hands over ids
// after its commit (Core::SetFinishedSink); this thread computes on its own read-only
// connection and gives the answer back for the loop to write (a few rows).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "common/json.h"

namespace headlab::coord {

class PairedStatsWorker {
 public:
  // `save(experiment, results)` is called on this worker's thread; it must hand the write
  // to the loop (Router::Post).
  PairedStatsWorker(std::string db_path, std::function<void(int64_t, Json)> save);
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
  const std::function<void(int64_t, Json)> save_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::set<int64_t> pending_;  // guarded by mu_
  bool stop_ = false;          // guarded by mu_
  std::thread thread_;
};

}  // namespace headlab::coord
