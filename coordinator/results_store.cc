// Stored results: computed from one snapshot, stored by the loop, served while current.
#include "coordinator/results_store.h"

#include "common/log.h"
#include "coordinator/results.h"

namespace headlab::coord {
namespace {

// results_inputs.changes of `experiment`, or -1 when it has no row (then nothing computed
// for it is ever stored).
int64_t InputChanges(Db* db, int64_t experiment) {
  Stmt s = db->MustPrepare("SELECT changes FROM results_inputs WHERE experiment_id=?");
  s.Bind(1, experiment);
  return s.Step() ? s.Int(0) : -1;
}

// The part of the stored-results query that makes a stored answer current.
constexpr const char* kCurrent =
    " FROM results r JOIN results_inputs i ON i.experiment_id = r.experiment_id "
    "WHERE r.experiment_id=?1 AND r.inputs = i.changes AND r.format = ?2";

Json Answer(ComputedResults&& r, bool stored) {
  Json out = std::move(r.results);
  out["computed_at"] = r.computed_at;
  out["stored"] = stored;
  return out;
}

}  // namespace

StatusOr<ComputedResults> ComputeResultsAt(Db* db, int64_t experiment,
                                           const ResultsOptions& options) {
  ComputedResults r;
  r.experiment = experiment;
  r.computed_at = NowIso();
  r.inputs = InputChanges(db, experiment);
  Stmt u = db->MustPrepare(
      "SELECT count(*) FROM runs WHERE experiment_id=? AND status IN ('queued','running')");
  u.Bind(1, experiment);
  r.finished = u.Step() && u.Int(0) == 0;
  StatusOr<Json> res = ComputeResults(db, experiment, options);
  if (!res.ok()) return res.status();
  r.results = std::move(*res);
  return r;
}

std::optional<ComputedResults> CurrentStoredResults(Db* db, int64_t experiment) {
  Stmt s =
      db->MustPrepare(std::string("SELECT r.results_json, r.computed_at, r.inputs") + kCurrent);
  s.Bind(1, experiment).Bind(2, kResultsFormat);
  if (!s.Step()) return std::nullopt;
  auto j = ParseJson(s.Text(0), "results.results_json");
  if (!j.ok() || !j->is_object()) {
    LogWarn("stored results of experiment " + std::to_string(experiment) + " are unreadable (" +
            (j.ok() ? "not an object" : j.status().message()) + "): computing them again");
    return std::nullopt;
  }
  ComputedResults r;
  r.experiment = experiment;
  r.inputs = s.Int(2);
  r.finished = true;  // only finished experiments' results are stored
  r.results = std::move(*j);
  r.computed_at = s.Text(1);
  return r;
}

bool HasCurrentResults(Db* db, int64_t experiment) {
  return CurrentStoredStamp(db, experiment).has_value();
}

std::optional<StoredStamp> CurrentStoredStamp(Db* db, int64_t experiment) {
  Stmt s = db->MustPrepare(std::string("SELECT r.inputs, r.computed_at") + kCurrent);
  s.Bind(1, experiment).Bind(2, kResultsFormat);
  if (!s.Step()) return std::nullopt;
  return StoredStamp{s.Int(0), s.Text(1)};
}

StatusOr<bool> StoreResults(Db* db, const ComputedResults& r) {
  if (!r.finished || r.inputs < 0 || InputChanges(db, r.experiment) != r.inputs) return false;
  HEADLAB_RETURN_IF_ERROR(SavePairedStats(db, r.experiment, r.results));
  Stmt s = db->MustPrepare(
      "INSERT OR REPLACE INTO results(experiment_id, inputs, format, results_json, computed_at) "
      "VALUES (?,?,?,?,?)");
  s.Bind(1, r.experiment)
      .Bind(2, r.inputs)
      .Bind(3, kResultsFormat)
      .Bind(4, r.text.empty() ? JsonText(r.results) : r.text)
      .Bind(5, r.computed_at);
  HEADLAB_RETURN_IF_ERROR(s.Exec());
  return true;
}

StatusOr<Json> AnswerResults(Db* db, int64_t experiment, bool recompute,
                             std::optional<ComputedResults>* to_store,
                             const ResultsOptions& options) {
  ReadSnapshot snapshot(db);
  if (!snapshot.status().ok()) return snapshot.status();
  const bool stock = options.IsDefault();  // only the default answer is stored
  if (!recompute && stock)
    if (auto stored = CurrentStoredResults(db, experiment)) return Answer(std::move(*stored), true);
  auto computed = ComputeResultsAt(db, experiment, options);
  if (!computed.ok()) return computed.status();
  if (to_store && stock && computed->finished && !HasCurrentResults(db, experiment)) {
    *to_store = *computed;
    (*to_store)->text = JsonText(computed->results);
  }
  return Answer(std::move(*computed), false);
}

ReadSnapshot::ReadSnapshot(Db* db) : db_(db), begin_(db->Exec("BEGIN")) {}

ReadSnapshot::~ReadSnapshot() {
  if (begin_.ok()) db_->Exec("COMMIT");
}

}  // namespace headlab::coord
