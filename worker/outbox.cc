// Outbox: per-attempt queues of unacknowledged messages.
#include "worker/outbox.h"

#include <algorithm>
#include <iterator>

#include "common/log.h"
#include "common/wire.h"

namespace headlab {

std::string Outbox::Key(const Json& run, int64_t attempt) {
  return CanonicalJson(run) + "/" + std::to_string(attempt);
}

void Outbox::Add(const std::string& command, const Json& body) {
  std::deque<Entry>& q = by_attempt_[Key(body["run"], body["attempt"].get<int64_t>())];
  int64_t seq = -1;
  if (command == wire::kMetrics) {
    for (const Json& p : body["points"]) seq = std::max(seq, p[0].get<int64_t>());
  } else if (command == wire::kArtifact || command == wire::kArtifactDeleted) {
    seq = body["seq"];
  } else if (command == wire::kProvenance) {
    q.erase(std::remove_if(q.begin(), q.end(),
                           [](const Entry& e) { return e.command == wire::kProvenance; }),
            q.end());
  }
  q.push_back(Entry{command, body, seq});
  if (command == wire::kMetrics) {
    metric_points_ += body["points"].size();
    EnforceCap();
  }
}

void Outbox::Forget(const Entry& e) {
  if (e.command == wire::kMetrics) metric_points_ -= e.body["points"].size();
}

void Outbox::EnforceCap() {
  if (metric_points_ <= max_metric_points_) return;
  size_t dropped = 0;
  // Oldest first within each attempt; attempts in key order (the cap is a last resort).
  for (auto it = by_attempt_.begin();
       it != by_attempt_.end() && metric_points_ > max_metric_points_;) {
    std::deque<Entry>& q = it->second;
    for (auto e = q.begin(); e != q.end() && metric_points_ > max_metric_points_;) {
      if (e->command != wire::kMetrics) {
        ++e;
        continue;
      }
      dropped += e->body["points"].size();
      Forget(*e);
      e = q.erase(e);
    }
    it = q.empty() ? by_attempt_.erase(it) : std::next(it);
  }
  dropped_points_ += dropped;
  LogWarn("outbox full: dropped " + std::to_string(dropped) +
          " unacknowledged metric points (the coordinator is not acknowledging them)");
}

size_t Outbox::Ack(const Json& run, int64_t attempt, const std::string& what, int64_t seq) {
  auto it = by_attempt_.find(Key(run, attempt));
  if (it == by_attempt_.end()) return 0;
  std::deque<Entry>& q = it->second;
  size_t before = q.size();
  auto acked = [&](const Entry& e) {
    if (what == wire::kDone) return true;
    if (e.command != what) return false;
    if (what == wire::kMetrics) return e.seq <= seq;
    if (what == wire::kArtifact || what == wire::kArtifactDeleted) return e.seq == seq;
    return what == wire::kProvenance;
  };
  for (const Entry& e : q)
    if (acked(e)) Forget(e);
  q.erase(std::remove_if(q.begin(), q.end(), acked), q.end());
  size_t dropped = before - q.size();
  if (q.empty()) by_attempt_.erase(it);
  return dropped;
}

void Outbox::ForEach(
    const std::function<void(const std::string& command, const Json& body)>& send) const {
  for (const auto& [key, q] : by_attempt_)
    for (const Entry& e : q) send(e.command, e.body);
}

bool Outbox::HasDone(const Json& run, int64_t attempt) const {
  auto it = by_attempt_.find(Key(run, attempt));
  if (it == by_attempt_.end()) return false;
  return !it->second.empty() && it->second.back().command == wire::kDone;
}

Json Outbox::DoneRefs() const {
  Json refs = Json::array();
  for (const auto& [key, q] : by_attempt_)
    if (!q.empty() && q.back().command == wire::kDone)
      refs.push_back(Json{{"run", q.back().body["run"]}, {"attempt", q.back().body["attempt"]}});
  return refs;
}

size_t Outbox::size() const {
  size_t n = 0;
  for (const auto& [key, q] : by_attempt_) n += q.size();
  return n;
}

}  // namespace headlab
