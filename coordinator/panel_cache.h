// A finished experiment's panel answers (experiment_panels.h) in memory: its runs, their
// statuses and summaries no longer move, so the same request gets the same answer until
// something changes it (a retry, a resubmit, a deletion), which moves the experiment's
// results_inputs.changes (schema/004_results.sql) or makes it unfinished. An unfinished
// experiment's answers are never kept. Bounded in entries and bytes. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "common/status.h"
#include "coordinator/db.h"

namespace headlab::coord {

class PanelCache {
 public:
  static constexpr size_t kMaxEntries = 256;
  static constexpr size_t kMaxBytes = size_t(64) << 20;  // of answer text, all together

  // Returns the answer text for (`experiment`, `key`): from memory when kept at the
  // experiment's present state in `db` (a read-only connection outside a transaction),
  // else compute(), kept when the experiment was finished before and after it ran.
  StatusOr<std::string> Answer(Db* db, int64_t experiment, const std::string& key,
                               const std::function<StatusOr<std::string>()>& compute);

  // How many answers were served from memory (for tests).
  uint64_t hits() const;

 private:
  struct Entry {
    int64_t inputs = 0;
    std::string text;
    uint64_t used = 0;
  };
  // results_inputs.changes when no run of the experiment is queued or running, else nullopt.
  static std::optional<int64_t> FinishedStamp(Db* db, int64_t experiment);
  void EvictLocked();

  mutable std::mutex mu_;
  // Guarded by mu_.
  std::map<std::pair<int64_t, std::string>, Entry> entries_;
  size_t bytes_ = 0;
  uint64_t clock_ = 0;
  uint64_t hits_ = 0;
};

}  // namespace headlab::coord
