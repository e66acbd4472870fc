// Copies the write-ahead log back into the database file on its own thread. With SQLite's
// automatic checkpoints the loop's commits did it, fsync included: under a large submit
// (megabytes per batch) or a busy disk that was 200-600 ms inside a batch. Here the loop
// only appends to the log; a PASSIVE checkpoint every kPeriod takes no lock the loop needs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace headlab::coord {

class WalCheckpointer {
 public:
  static constexpr std::chrono::milliseconds kPeriod{250};

  // Starts the thread on its own connection to `db_path`. The writer connection must run
  // with PRAGMA wal_autocheckpoint=0 (Server::Start).
  explicit WalCheckpointer(std::string db_path);
  // Stops and joins the thread (closing the last connection checkpoints the rest).
  ~WalCheckpointer();
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

 private:
  void Loop();

  const std::string db_path_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace headlab::coord
