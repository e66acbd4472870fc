// Copies the write-ahead log back into the database file on its own thread. With SQLite's
// automatic checkpoints the loop's commits did it, fsync included: under a large submit
// (megabytes per batch) or a busy disk that was 200-600 ms inside a batch. Here the loop
// only appends to the log; a PASSIVE checkpoint every kPeriod takes no lock the loop needs.
// Readers cannot starve it: past kDrainBytes of log that a checkpoint cannot copy back, the
// long reads' gate (read_gate.h) is closed while a RESTART checkpoint starts it over.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "coordinator/read_gate.h"

namespace headlab::coord {

class WalCheckpointer {
 public:
  static constexpr std::chrono::milliseconds kPeriod{250};
  // Log size past which reads that keep a checkpoint from finishing are drained, and the
  // longest wait for them (a query's limit and kill grace, query_child.h, with margin).
  static constexpr size_t kDrainBytes = size_t(64) << 20;
  static constexpr std::chrono::milliseconds kDrainTimeout{8000};
  static constexpr std::chrono::milliseconds kRestartWait{100};

  // Starts the thread on its own connection to `db_path`. The writer connection must run
  // with PRAGMA wal_autocheckpoint=0 (Server::Start). Long reads pass through gate()
  // (HttpServer does); `drain_bytes` is kDrainBytes but in tests.
  explicit WalCheckpointer(std::string db_path, size_t drain_bytes = kDrainBytes);
  // Stops and joins the thread (closing the last connection checkpoints the rest).
  ~WalCheckpointer();
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  ReadGate* gate() { return &gate_; }
  // How many times the gate was closed so far.
  int drains() const { return drains_; }

 private:
  void Loop();

  const std::string db_path_;
  const size_t drain_bytes_;
  ReadGate gate_;
  std::atomic<int> drains_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace headlab::coord
