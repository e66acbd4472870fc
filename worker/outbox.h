// Outbox: the worker's results that the coordinator has not acknowledged yet (METRICS,
// ARTIFACT, PROVENANCE, DONE), kept for resending after a reconnect. Ingestion is an
// upsert keyed by (run, attempt, seq), so resending what did arrive is harmless.
// Used by the worker's main loop thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>

#include "common/json.h"

namespace headlab {

class Outbox {
 public:
  // Keeps a message (body has run and attempt). A PROVENANCE replaces the attempt's
  // earlier unacked one: each carries all fields known so far.
  void Add(const std::string& command, const Json& body);
  // Applies ACK {run, attempt, what, seq} (schema/protocol.md): METRICS drops batches
  // whose points all have seq <= `seq`; ARTIFACT drops that artifact; PROVENANCE drops the
  // attempt's provenance; DONE drops everything of the attempt. Returns the number of
  // messages dropped.
  size_t Ack(const Json& run, int64_t attempt, const std::string& what, int64_t seq);
  // Calls `send` for every kept message, each attempt's in the order they were added.
  void ForEach(const std::function<void(const std::string& command, const Json& body)>& send) const;
  // Returns true iff DONE of (run, attempt) is kept (finished, not yet acknowledged).
  bool HasDone(const Json& run, int64_t attempt) const;
  // Returns {run, attempt} of every attempt whose DONE is kept.
  Json DoneRefs() const;
  // Returns the number of kept messages.
  size_t size() const;

 private:
  struct Entry {
    std::string command;
    Json body;
    int64_t seq;  // METRICS: highest point seq; ARTIFACT: its seq; else -1
  };
  static std::string Key(const Json& run, int64_t attempt);

  std::map<std::string, std::deque<Entry>> by_attempt_;
};

}  // namespace headlab
