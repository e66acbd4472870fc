// The HTTP server's open connections, counted against a cap: which ones wait for a request
// (idle) and which are live streams, so that a full table closes the connection that has
// waited longest to admit a new one. Thousands of idle connections then cost at most the
// cap, and a fresh client is still served. Thread-safe: sessions on any strand call it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace headlab::coord {

class ConnectionTable {
 public:
  // At most `max_connections` connections, `max_streams` of them streams, and at most
  // `max_per_peer` from any one named peer.
  ConnectionTable(size_t max_connections, size_t max_streams, size_t max_per_peer = SIZE_MAX);

  // Admits a connection from `peer` (its address; "" = uncounted, e.g. loopback, where
  // every local client shares one address) whose `close` asks it to close (it must only
  // post work: it is called on the admitting thread). Returns 0 and admits nothing when
  // `peer` already holds `max_per_peer` connections. When the table is full, the connection
  // idle longest is removed and its `close` called first; when none is idle, returns 0 and
  // admits nothing. Otherwise returns the new connection's id (> 0), marked busy.
  uint64_t Admit(std::function<void()> close, const std::string& peer = "");
  // Marks `id` as waiting for a request (idle = true) or handling one.
  void SetIdle(uint64_t id, bool idle);
  // Marks `id` as a live stream (never idle again); returns false and changes nothing
  // when `max_streams` streams are open.
  bool SetStream(uint64_t id);
  // Forgets `id` (its connection closed); a no-op for an id already evicted.
  void Remove(uint64_t id);

  size_t size() const;
  size_t streams() const;
  // Connections closed by Admit to make room, since construction.
  uint64_t evicted() const;

 private:
  enum class State { kBusy, kIdle, kStream };
  struct Entry {
    std::function<void()> close;
    State state = State::kBusy;
    uint64_t idle_key = 0;  // key in idle_ while kIdle
    std::string peer;
  };
  void ClearIdle(Entry& e);                             // requires mu_ held
  void Forget(std::map<uint64_t, Entry>::iterator it);  // requires mu_ held

  // Constant after construction.
  const size_t max_connections_;
  const size_t max_streams_;
  const size_t max_per_peer_;

  mutable std::mutex mu_;
  // Guarded by mu_.
  std::map<uint64_t, Entry> entries_;
  std::map<uint64_t, uint64_t> idle_;       // idle order (increasing: idle longest first) -> id
  std::map<std::string, size_t> per_peer_;  // named peers' open connections (> 0)
  uint64_t next_id_ = 1;
  uint64_t next_idle_key_ = 1;
  size_t streams_ = 0;
  uint64_t evicted_ = 0;
};

}  // namespace headlab::coord
