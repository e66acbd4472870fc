// SseProbe: follows GET /api/v1/stream?runs=... on its own thread (a plain socket, as a
// browser's EventSource would) and measures how long after being sent each metric point
// arrives: the arrival wall time minus the point's time_s (the simulated worker stamps
// each point with its send time). The target (docs/BENCHMARKS.md,
// "Service"): live updates within 1 s of ingestion.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace headlab::bench {

class SseProbe {
 public:
  // `port`: the coordinator's HTTP port on 127.0.0.1; `runs`: the run ids to follow.
  SseProbe(int port, std::vector<int64_t> runs);
  ~SseProbe();
  SseProbe(const SseProbe&) = delete;
  SseProbe& operator=(const SseProbe&) = delete;

  // Connects, sends the request and waits for the stream's hello (up to 10 s).
  Status Start();
  // Closes the connection and joins the thread.
  void Stop();

  // Delays (seconds) of the points received so far, in arrival order.
  std::vector<double> delays() const;
  // The first protocol error, or "".
  std::string error() const;

 private:
  void Loop();
  void Consume(const std::string& frame);

  int port_;
  std::vector<int64_t> runs_;
  int fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> hello_{false};
  mutable std::mutex mu_;
  std::vector<double> delays_;
  std::string error_;
};

}  // namespace headlab::bench
