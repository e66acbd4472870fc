// Outbox: the worker's results that the coordinator has not acknowledged yet (METRICS,
// ARTIFACT, ARTIFACT_DELETED, PROVENANCE, DONE), kept for resending after a reconnect.
// Ingestion is an upsert keyed by (run, attempt, seq), so resending what did arrive is
// harmless.
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
  // At most this many unacknowledged METRICS points are kept (a few hundred MB as JSON):
  // past it the oldest batches are dropped with a warning. A coordinator gone for hours
  // must not get the worker OOM-killed, which would lose the runs themselves.
  static constexpr size_t kMaxMetricPoints = 1000000;

  explicit Outbox(size_t max_metric_points = kMaxMetricPoints)
      : max_metric_points_(max_metric_points) {}

  // Keeps a message (body has run and attempt). A PROVENANCE replaces the attempt's
  // earlier unacked one: each carries all fields known so far.
  void Add(const std::string& command, const Json& body);
  // Applies ACK {run, attempt, what, seq} (schema/protocol.md): METRICS drops batches
  // whose points all have seq <= `seq`; ARTIFACT and ARTIFACT_DELETED drop that
  // artifact's message of the same command; PROVENANCE drops the
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
  // Returns the number of METRICS points dropped so far because of the cap.
  size_t dropped_points() const { return dropped_points_; }

 private:
  struct Entry {
    std::string command;
    Json body;
    int64_t seq;  // METRICS: highest point seq; ARTIFACT(_DELETED): its seq; else -1
  };
  static std::string Key(const Json& run, int64_t attempt);
  // Drops the oldest METRICS batches until at most max_metric_points_ are kept.
  void EnforceCap();
  // Adjusts metric_points_ for an entry that leaves the outbox.
  void Forget(const Entry& e);

  const size_t max_metric_points_;
  std::map<std::string, std::deque<Entry>> by_attempt_;
  size_t metric_points_ = 0;
  size_t dropped_points_ = 0;
};

}  // namespace headlab
