// Panel answers of finished experiments, keyed by the state they were read at.
#include "coordinator/panel_cache.h"

namespace headlab::coord {

std::optional<int64_t> PanelCache::FinishedStamp(Db* db, int64_t experiment) {
  // Two index probes: (experiment_id, status) and results_inputs' key.
  Stmt s = db->Cached(
      "SELECT EXISTS (SELECT 1 FROM runs WHERE experiment_id = ?1 AND status IN ('queued', "
      "'running')), (SELECT changes FROM results_inputs WHERE experiment_id = ?1)");
  s.Bind(1, experiment);
  if (!s.Step() || s.Int(0) != 0 || s.IsNull(1)) return std::nullopt;
  return s.Int(1);
}

StatusOr<std::string> PanelCache::Answer(Db* db, int64_t experiment, const std::string& key,
                                         const std::function<StatusOr<std::string>()>& compute) {
  const std::optional<int64_t> before = FinishedStamp(db, experiment);
  const auto id = std::make_pair(experiment, key);
  if (before) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(id);
    if (it != entries_.end() && it->second.inputs == *before) {
      it->second.used = ++clock_;
      ++hits_;
      return it->second.text;
    }
  }
  StatusOr<std::string> text = compute();
  // Kept only when the state did not move while it was computed: the answer is then the
  // one of that state (compute() reads outside a transaction).
  if (!text.ok() || !before || FinishedStamp(db, experiment) != before ||
      text->size() > kMaxBytes / 4)
    return text;
  std::lock_guard<std::mutex> l(mu_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    bytes_ -= it->second.text.size();
    entries_.erase(it);
  }
  entries_[id] = {*before, *text, ++clock_};
  bytes_ += text->size();
  EvictLocked();
  return text;
}

void PanelCache::EvictLocked() {
  while (!entries_.empty() && (entries_.size() > kMaxEntries || bytes_ > kMaxBytes)) {
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->second.used < oldest->second.used) oldest = it;
    bytes_ -= oldest->second.text.size();
    entries_.erase(oldest);
  }
}

uint64_t PanelCache::hits() const {
  std::lock_guard<std::mutex> l(mu_);
  return hits_;
}

}  // namespace headlab::coord
