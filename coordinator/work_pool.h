// A fixed set of threads running posted jobs in order from a bounded queue: the HTTP
// server's pool for SQL queries, so that slow queries wait for each other instead of
// holding the threads that serve everything else. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace headlab::coord {

class WorkPool {
 public:
  // Starts `threads` threads; at most `max_queued` jobs wait for one. The threads run at
  // nice value `nice` (Linux: per thread), so that work they do for clients yields the
  // CPU to the caller's threads at nice 0 (the HTTP I/O threads answering health, the
  // loop serving workers).
  WorkPool(int threads, size_t max_queued, int nice = 0);
  // Stop().
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Queues `job`; returns false (and drops it) when `max_queued` jobs already wait or the
  // pool is stopped.
  bool TryPost(std::function<void()> job);
  // Lets running jobs finish, destroys the queued ones unrun and joins the threads.
  // Idempotent.
  void Stop();
  // Returns the number of jobs waiting for a thread.
  size_t queued() const;

 private:
  void Run();

  const size_t max_queued_;  // constant after construction
  std::vector<std::thread> threads_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_.
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
};

}  // namespace headlab::coord
