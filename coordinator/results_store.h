// Stored results (schema/004_results.sql). An experiment's results are computed from one
// snapshot of the database together with the count of changes to their inputs at that
// snapshot (results_inputs.changes, kept by triggers); a stored answer is served while
// that count and the code's answer format (kResultsFormat) still match, and computed
// again only when they do not.
//
// Who computes: when an experiment finishes, the PairedStatsWorker thread on its own
// read-only connection; on GET .../results, the HTTP thread on its own, only when no
// current answer is stored. Who writes: the loop (StoreResults through Router::Post),
// which stores an answer only if nothing it was computed from has changed since.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/db.h"
#include "coordinator/results.h"

namespace headlab::coord {

// An experiment's results as computed from one snapshot.
struct ComputedResults {
  int64_t experiment = 0;
  int64_t inputs = 0;       // results_inputs.changes in that snapshot
  bool finished = false;    // no queued or running run in that snapshot
  Json results;             // ComputeResults' answer {experiment, arms, comparisons}
  std::string computed_at;  // ISO-8601 UTC
  // `results` as stored (JSON text; "": StoreResults serialises it): serialised by the
  // computing thread when handed to the loop, so that the loop only writes it (tens of MB
  // for a 100,000-run experiment).
  std::string text;
};

// Computes `experiment`'s results and what they were computed from. `db` must be inside
// one transaction (a ReadSnapshot, or the loop's batch) so that both come from the same
// state. NotFound for an unknown experiment.
StatusOr<ComputedResults> ComputeResultsAt(Db* db, int64_t experiment,
                                           const ResultsOptions& options = {});

// Returns the experiment's stored results if they are current (computed at its present
// results_inputs.changes by code of format kResultsFormat), else nullopt.
std::optional<ComputedResults> CurrentStoredResults(Db* db, int64_t experiment);

// Returns true iff a current answer is stored for `experiment` (without reading it).
bool HasCurrentResults(Db* db, int64_t experiment);

// What names one stored answer: the inputs count it was computed at and its computed_at.
struct StoredStamp {
  int64_t inputs = 0;
  std::string computed_at;
};

// The stamp of the answer stored for `experiment` if it is current (without reading it),
// else nullopt.
std::optional<StoredStamp> CurrentStoredStamp(Db* db, int64_t experiment);

// Writes `r` (its results row and the paired_stats rows) iff the experiment was finished
// when it was computed and no input has changed since; returns whether it wrote. For the
// loop's connection, inside its batch.
StatusOr<bool> StoreResults(Db* db, const ComputedResults& r);

// The answer of GET /api/v1/experiments/ID/results (schema/http_api.md): ComputeResults'
// answer with `computed_at` and `stored` (true: served from the store). The stored answer
// when it is current, `recompute` is false and `options` are the default; else computed
// from one snapshot of the read-only connection `db`, and then *to_store is set when the
// loop should store it (default options, finished, and no current answer stored).
StatusOr<Json> AnswerResults(Db* db, int64_t experiment, bool recompute,
                             std::optional<ComputedResults>* to_store,
                             const ResultsOptions& options = {});

// A read snapshot of a read-only connection: BEGIN on construction, COMMIT on destruction
// (whatever happened in between: a connection left in a transaction would read the same
// old snapshot forever).
class ReadSnapshot {
 public:
  explicit ReadSnapshot(Db* db);
  ~ReadSnapshot();
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;
  const Status& status() const { return begin_; }

 private:
  Db* db_;
  Status begin_;
};

}  // namespace headlab::coord
