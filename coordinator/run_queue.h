// The queued runs, in dispatch order: FIFO by experiment, then grid index. Run ids are
// assigned in exactly that order at submit (one transaction per experiment), so the queue
// is an ordered set of ids: a requeued run goes back to its original place, and taking
// the next run costs O(log n) instead of a scan of the runs table. Loop thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <set>

namespace headlab::coord {

class RunQueue {
 public:
  void Push(int64_t run) { ids_.insert(run); }
  void Remove(int64_t run) { ids_.erase(run); }
  // Removes and returns the first run, or nullopt if the queue is empty.
  std::optional<int64_t> Pop() {
    if (ids_.empty()) return std::nullopt;
    int64_t id = *ids_.begin();
    ids_.erase(ids_.begin());
    return id;
  }
  bool empty() const { return ids_.empty(); }
  size_t size() const { return ids_.size(); }
  void Clear() { ids_.clear(); }

 private:
  std::set<int64_t> ids_;
};

}  // namespace headlab::coord
