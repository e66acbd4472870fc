// Connection cap with eviction of the longest-idle connection.
#include "coordinator/connection_table.h"

namespace headlab::coord {

ConnectionTable::ConnectionTable(size_t max_connections, size_t max_streams)
    : max_connections_(max_connections), max_streams_(max_streams) {}

uint64_t ConnectionTable::Admit(std::function<void()> close) {
  std::function<void()> evict;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (entries_.size() >= max_connections_) {
      if (idle_.empty()) return 0;
      auto victim = entries_.find(idle_.begin()->second);
      idle_.erase(idle_.begin());
      evict = std::move(victim->second.close);
      entries_.erase(victim);
      ++evicted_;
    }
    id = next_id_++;
    entries_[id].close = std::move(close);
  }
  if (evict) evict();
  return id;
}

void ConnectionTable::ClearIdle(Entry& e) {
  if (e.state == State::kIdle) idle_.erase(e.idle_key);
  e.state = State::kBusy;
}

void ConnectionTable::SetIdle(uint64_t id, bool idle) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.state == State::kStream) return;
  ClearIdle(it->second);
  if (!idle) return;
  it->second.state = State::kIdle;
  it->second.idle_key = next_idle_key_++;
  idle_[it->second.idle_key] = id;
}

bool ConnectionTable::SetStream(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || streams_ >= max_streams_) return false;
  if (it->second.state == State::kStream) return true;
  ClearIdle(it->second);
  it->second.state = State::kStream;
  ++streams_;
  return true;
}

void ConnectionTable::Remove(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (it->second.state == State::kStream) --streams_;
  ClearIdle(it->second);
  entries_.erase(it);
}

size_t ConnectionTable::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return entries_.size();
}

size_t ConnectionTable::streams() const {
  std::lock_guard<std::mutex> l(mu_);
  return streams_;
}

uint64_t ConnectionTable::evicted() const {
  std::lock_guard<std::mutex> l(mu_);
  return evicted_;
}

}  // namespace headlab::coord
