// Dispatch: queued runs to workers with free capacity, in the scheduler's order and
// placement (scheduler.h: priorities, fair share across experiments, resources, gangs).
// Each assignment is written (attempt row, run status) before its ASSIGN is queued for
// sending, and the router sends only after the batch commits (core.h). A run continuing
// from a shared parent (parent.h), or whose time budget is another run's measured time
// (time_match.h), waits in the queue until that run has finished; a
// paired timing leg (pair_legs.h) waits for its predecessors and runs where they ran.
// Dispatch is a list of named checks over each placement (StillQueued, ParentReady,
// TimeBudgetReady, PairLegReady), then StartAttempt.
#include <set>

#include "common/log.h"
#include "common/wire.h"
#include "coordinator/core.h"
#include "coordinator/messages.h"
#include "coordinator/pair_legs.h"
#include "coordinator/parent.h"
#include "coordinator/scheduler_lookup.h"
#include "coordinator/time_match.h"

namespace headlab::coord {
namespace {

// Checkpoints an ASSIGN offers: the latest as `resume`, the others as fallbacks.
constexpr int kResumeCandidates = 4;
// Placements one pass starts at most for so long (each is a few statements and an
// ASSIGN): a thousand idle workers fill over several batches, not in one long one.
constexpr std::chrono::milliseconds kDispatchBudget{25};

}  // namespace

// One placement on its way through Dispatch's checks: the scheduler's choice, the run as
// stored, its config and what its parent resolved to.
struct Core::Candidate {
  explicit Candidate(const Placement& placement) : p(placement) {}

  Placement p;
  RunForAssign r;
  StatusOr<Json> config = Json::object();
  ParentResolution parent;
  // The config to send and resolve against: an unparseable one reads as {} (the worker
  // then refuses it with the parse error of its own).
  Json ConfigOrEmpty() const { return config.ok() ? config.value() : Json::object(); }
};

void Core::Dispatch(Clock::time_point now) {
  if (queue_.empty()) return;
  bool any_free = false;
  for (auto& [id, w] : workers_.all()) any_free = any_free || w.FreeSlots() > 0;
  if (!any_free) return;
  // Which run goes where (priority, fair share, resources, gangs, exclusivity):
  // scheduler.h. Each placement is either started here or handed back with Undo.
  queue_.BeginPass(workers_.all(), DbDemandLookup(store_->db()));
  std::set<int64_t> repinned;  // paired legs re-pinned in this pass
  const Clock::time_point deadline = Clock::now() + kDispatchBudget;
  while (Clock::now() < deadline) {
    auto p = queue_.Next();
    if (!p) break;
    Candidate c(*p);
    // The checks in order; each returns false when it has dealt with the placement itself
    // (handed it back, parked the run, failed it or re-pinned it).
    if (!StillQueued(&c) || !ParentReady(&c) || !TimeBudgetReady(&c) ||
        !PairLegReady(&c, &repinned))
      continue;
    if (!StartAttempt(c, now)) return;  // the store refused: retry in the next pass
  }
}

bool Core::StillQueued(Candidate* c) {
  auto r = store_->LoadRunForAssign(c->p.run);
  if (!r.ok() || r->status != "queued") {  // cancelled since it was queued
    queue_.Undo(c->p);
    return false;
  }
  c->r = std::move(*r);
  c->config = ParseJson(c->r.config_json, "runs.config_json");
  return true;
}

bool Core::ParentReady(Candidate* c) {
  c->parent = ResolveParent(store_->db(), c->ConfigOrEmpty());
  if (c->parent.state == ParentResolution::State::kWait) {
    // Parked, not requeued: re-examining every waiting child on every batch would cost
    // a scan per batch; they return to the queue when some run finishes (core.cc).
    queue_.Undo(c->p);
    parked_.push_back(c->p.run);
    return false;
  }
  if (c->parent.state == ParentResolution::State::kFail) {
    queue_.Undo(c->p);
    Status st = FailQueuedRun(store_->db(), c->r.id, c->parent.error);
    if (st.ok())
      st = store_->AddEvent("parent_failed", c->r.experiment_id, c->r.id, 0, "",
                            {{"error", c->parent.error}});
    if (!st.ok()) LogError("cannot fail run " + std::to_string(c->r.id) + ": " + st.message());
    finished_experiments_.insert(c->r.experiment_id);
    UnparkAll();  // its own children can now fail too
    return false;
  }
  return true;
}

bool Core::TimeBudgetReady(Candidate* c) {
  // Matched time (time_match.h): the allowance is a reference run's measured time.
  TimeMatchResolution budget =
      ResolveTimeMatch(store_->db(), c->ConfigOrEmpty(), c->r.experiment_id);
  if (budget.state == TimeMatchResolution::State::kWait) {
    queue_.Undo(c->p);
    parked_.push_back(c->p.run);
    return false;
  }
  if (budget.state == TimeMatchResolution::State::kFail) {
    queue_.Undo(c->p);
    Status st = FailQueuedRun(store_->db(), c->r.id, budget.error);
    if (!st.ok()) LogError("cannot fail run " + std::to_string(c->r.id) + ": " + st.message());
    finished_experiments_.insert(c->r.experiment_id);
    return false;
  }
  if (budget.state == TimeMatchResolution::State::kReady) {
    (*c->config)["train"]["time_budget_s"] = budget.budget_s;  // what the worker runs under
    Status st =
        store_->AddEvent("time_match", c->r.experiment_id, c->r.id, 0, "",
                         {{"budget_s", budget.budget_s}, {"reference_run", budget.reference}});
    if (!st.ok())
      LogError("cannot record the time budget of run " + std::to_string(c->r.id) + ": " +
               st.message());
  }
  return true;
}

bool Core::PairLegReady(Candidate* c, std::set<int64_t>* repinned) {
  // Paired timing legs (pair_legs.h): one at a time in ABBA order, on the worker and
  // devices that took their group's first leg (pinned when it was placed; re-pinned once
  // here after a coordinator restart forgot the pins).
  const Placement& p = c->p;
  PairLegDecision leg =
      ResolvePairLeg(store_->db(), c->r.experiment_id, c->r.id, c->ConfigOrEmpty());
  using Leg = PairLegDecision::State;
  if (leg.state == Leg::kPinned && !workers_.Find(leg.worker_id)) {
    queue_.Undo(p);
    Status st = FailQueuedRun(store_->db(), c->r.id,
                              "pair group \"" + leg.group + "\": worker " + leg.worker_id +
                                  " that ran its first leg is gone");
    if (!st.ok()) LogError("cannot fail run " + std::to_string(c->r.id) + ": " + st.message());
    finished_experiments_.insert(c->r.experiment_id);
    UnparkAll();  // the group's later legs fail the same way
    return false;
  }
  if (leg.state == Leg::kWait ||
      (leg.state == Leg::kPinned && (p.worker->id != leg.worker_id || p.devices != leg.devices))) {
    queue_.Undo(p);
    if (leg.state == Leg::kPinned && repinned->insert(p.run).second) {
      queue_.Pin(p.run, leg.worker_id, leg.devices);
      queue_.Push(p.run);
    } else {
      parked_.push_back(p.run);  // back when some run finishes (its predecessor)
    }
    return false;
  }
  if (leg.state == Leg::kAny)
    for (const PairLeg& l : PairLegSequence(store_->db(), c->r.experiment_id, leg.group))
      if (l.run != c->r.id && l.status == "queued") queue_.Pin(l.run, p.worker->id, p.devices);
  return true;
}

bool Core::StartAttempt(const Candidate& c, Clock::time_point now) {
  const Placement& p = c.p;
  WorkerInfo* w = p.worker;
  AttemptRef ref{c.r.id, c.r.attempts + 1};
  // A requeued run resumes its own latest checkpoint; older ones are the fallbacks for a
  // worker that finds the latest missing or damaged (it reports its choice in ACCEPT).
  Json offered = store_->Checkpoints(c.r.id, kResumeCandidates);
  Json resume = offered.empty() ? Json(nullptr) : offered[0];
  Json fallbacks =
      offered.empty() ? Json::array() : Json(std::vector<Json>(offered.begin() + 1, offered.end()));
  Status st = store_->StartAttempt(ref, w->id, p.devices, offered, c.r.experiment_id);
  if (!st.ok()) {
    LogError("cannot start " + RefString(ref) + ": " + st.message());
    queue_.Undo(p);
    queue_.Push(p.run);
    return false;
  }
  leases_.Grant(ref, w->id, p.devices, now);
  w->running[ref] = p.devices;
  Json assign = {{"run", ref.run},
                 {"attempt", ref.attempt},
                 {"experiment", c.r.experiment_id},
                 {"config", c.ConfigOrEmpty()},
                 {"resume", resume},
                 {"resume_fallbacks", fallbacks},
                 {"devices", p.devices}};
  if (c.parent.state == ParentResolution::State::kReady) assign["parent"] = c.parent.checkpoint;
  // Checkpoint retention keeps the steps that stored continuations start from.
  Json pinned = PinnedSteps(store_->db(), c.r.id);
  if (!pinned.empty()) assign["keep_steps"] = std::move(pinned);
  SendTo(*w, wire::kAssign, assign);
  return true;
}

void Core::UnparkAll() {
  for (int64_t id : parked_) queue_.Push(id);
  parked_.clear();
}

}  // namespace headlab::coord
