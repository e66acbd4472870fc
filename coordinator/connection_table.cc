// Connection cap with eviction of the longest-idle connection.
#include "coordinator/connection_table.h"

namespace headlab::coord {

ConnectionTable::ConnectionTable(size_t max_connections, size_t max_streams, size_t max_per_peer)
    : max_connections_(max_connections), max_streams_(max_streams), max_per_peer_(max_per_peer) {}

uint64_t ConnectionTable::Admit(std::function<void()> close, const std::string& peer) {
  std::function<void()> evict;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!peer.empty()) {
      auto it = per_peer_.find(peer);
      if (it != per_peer_.end() && it->second >= max_per_peer_) return 0;
    }
    if (entries_.size() >= max_connections_) {
      if (idle_.empty()) return 0;
      auto victim = entries_.find(idle_.begin()->second);
      evict = std::move(victim->second.close);
      Forget(victim);
      ++evicted_;
    }
    id = next_id_++;
    Entry& e = entries_[id];
    e.close = std::move(close);
    e.peer = peer;
    if (!peer.empty()) ++per_peer_[peer];
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
  if (it != entries_.end()) Forget(it);
}

void ConnectionTable::Forget(std::map<uint64_t, Entry>::iterator it) {
  if (it->second.state == State::kStream) --streams_;
  ClearIdle(it->second);
  if (!it->second.peer.empty()) {
    auto p = per_peer_.find(it->second.peer);
    if (--p->second == 0) per_peer_.erase(p);
  }
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
