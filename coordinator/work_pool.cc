// Bounded thread pool.
#include "coordinator/work_pool.h"

#include <sys/resource.h>
#include <unistd.h>

namespace headlab::coord {

WorkPool::WorkPool(int threads, size_t max_queued, int nice) : max_queued_(max_queued) {
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this, nice] {
      // On Linux a nice value belongs to the thread: PRIO_PROCESS with its own id.
      if (nice != 0) ::setpriority(PRIO_PROCESS, ::gettid(), nice);
      Run();
    });
}

WorkPool::~WorkPool() { Stop(); }

bool WorkPool::TryPost(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void WorkPool::Stop() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
  // `dropped` is destroyed here, outside the lock: a job's captures may post elsewhere.
}

size_t WorkPool::queued() const {
  std::lock_guard<std::mutex> l(mu_);
  return queue_.size();
}

void WorkPool::Run() {
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

}  // namespace headlab::coord
