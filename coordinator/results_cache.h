// The compact answers of GET /api/v1/experiments/ID/results (no per-pair lists), kept in
// memory while the stored answer they were read from is current. Reading a stored answer
// parses its JSON text whole: at 10^5 runs that text is 7.5 MB, almost all of it per-pair
// lists, and the parse took 0.2-0.5 s for an answer of 4 KB that a dashboard asks for on
// every visit. Here the check that the stored answer is still the same one (its inputs
// count and computed_at, one indexed row) replaces that parse. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/db.h"

namespace headlab::coord {

class ResultsCache {
 public:
  // At most this many experiments' answers are kept (the least recently read goes first).
  static constexpr size_t kMaxEntries = 64;

  // Returns `experiment`'s results without per-pair lists: from memory when the answer
  // stored for it in `db` (a read-only connection outside a transaction) is the one they
  // were kept from; else compute() (AnswerResults with the default options) passed through
  // `trim` (drops the per-pair lists), kept when it was that stored answer.
  StatusOr<Json> Answer(Db* db, int64_t experiment, const std::function<StatusOr<Json>()>& compute,
                        const std::function<void(Json*)>& trim);

  // How many answers were served from memory (for tests).
  uint64_t hits() const;

 private:
  struct Entry {
    int64_t inputs = 0;
    std::string computed_at;
    Json answer;
    uint64_t used = 0;  // clock_ at the last read
  };
  mutable std::mutex mu_;
  // Guarded by mu_.
  std::map<int64_t, Entry> entries_;
  uint64_t clock_ = 0;
  uint64_t hits_ = 0;
};

}  // namespace headlab::coord
