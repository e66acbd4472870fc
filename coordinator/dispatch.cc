// Dispatch: queued runs to workers with free capacity, in the scheduler's order and
// placement (scheduler.h: priorities, fair share across experiments, resources, gangs).
// Each assignment is written (attempt row, run status) before its ASSIGN is queued for
// sending, and the router sends only after the batch commits (core.h). A run continuing
// from a shared parent (parent.h), or whose time budget is another run's measured time
// (time_match.h), waits in the queue until that run has finished; a
// paired timing leg (pair_legs.h) waits for its predecessors and runs where they ran.
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
    auto r = store_->LoadRunForAssign(p->run);
    if (!r.ok() || r->status != "queued") {  // cancelled since it was queued
      queue_.Undo(*p);
      continue;
    }
    auto config = ParseJson(r->config_json, "runs.config_json");
    ParentResolution parent = ResolveParent(store_->db(), config.ok() ? *config : Json::object());
    if (parent.state == ParentResolution::State::kWait) {
      // Parked, not requeued: re-examining every waiting child on every batch would cost
      // a scan per batch; they return to the queue when some run finishes (core.cc).
      queue_.Undo(*p);
      parked_.push_back(p->run);
      continue;
    }
    if (parent.state == ParentResolution::State::kFail) {
      queue_.Undo(*p);
      Status st = FailQueuedRun(store_->db(), r->id, parent.error);
      if (st.ok())
        st = store_->AddEvent("parent_failed", r->experiment_id, r->id, 0, "",
                              {{"error", parent.error}});
      if (!st.ok()) LogError("cannot fail run " + std::to_string(r->id) + ": " + st.message());
      finished_experiments_.insert(r->experiment_id);
      UnparkAll();  // its own children can now fail too
      continue;
    }
    // Matched time (time_match.h): the allowance is a reference run's measured time.
    TimeMatchResolution budget = ResolveTimeMatch(store_->db(), config.ok() ? *config : Json::object(),
                                                  r->experiment_id);
    if (budget.state == TimeMatchResolution::State::kWait) {
      queue_.Undo(*p);
      parked_.push_back(p->run);
      continue;
    }
    if (budget.state == TimeMatchResolution::State::kFail) {
      queue_.Undo(*p);
      Status st = FailQueuedRun(store_->db(), r->id, budget.error);
      if (!st.ok()) LogError("cannot fail run " + std::to_string(r->id) + ": " + st.message());
      finished_experiments_.insert(r->experiment_id);
      continue;
    }
    if (budget.state == TimeMatchResolution::State::kReady) {
      (*config)["train"]["time_budget_s"] = budget.budget_s;  // what the worker runs under
      Status st = store_->AddEvent("time_match", r->experiment_id, r->id, 0, "",
                                   {{"budget_s", budget.budget_s}, {"reference_run", budget.reference}});
      if (!st.ok())
        LogError("cannot record the time budget of run " + std::to_string(r->id) + ": " + st.message());
    }
    // Paired timing legs (pair_legs.h): one at a time in ABBA order, on the worker and
    // devices that took their group's first leg (pinned when it was placed; re-pinned once
    // here after a coordinator restart forgot the pins).
    PairLegDecision leg = ResolvePairLeg(store_->db(), r->experiment_id, r->id,
                                         config.ok() ? *config : Json::object());
    using Leg = PairLegDecision::State;
    if (leg.state == Leg::kPinned && !workers_.Find(leg.worker_id)) {
      queue_.Undo(*p);
      Status st = FailQueuedRun(store_->db(), r->id, "pair group \"" + leg.group + "\": worker " +
                                leg.worker_id + " that ran its first leg is gone");
      if (!st.ok()) LogError("cannot fail run " + std::to_string(r->id) + ": " + st.message());
      finished_experiments_.insert(r->experiment_id);
      UnparkAll();  // the group's later legs fail the same way
      continue;
    }
    if (leg.state == Leg::kWait || (leg.state == Leg::kPinned &&
                                    (p->worker->id != leg.worker_id || p->devices != leg.devices))) {
      queue_.Undo(*p);
      if (leg.state == Leg::kPinned && repinned.insert(p->run).second) {
        queue_.Pin(p->run, leg.worker_id, leg.devices);
        queue_.Push(p->run);
      } else {
        parked_.push_back(p->run);  // back when some run finishes (its predecessor)
      }
      continue;
    }
    if (leg.state == Leg::kAny)
      for (const PairLeg& l : PairLegSequence(store_->db(), r->experiment_id, leg.group))
        if (l.run != r->id && l.status == "queued")
          queue_.Pin(l.run, p->worker->id, p->devices);
    WorkerInfo* w = p->worker;
    AttemptRef ref{r->id, r->attempts + 1};
    // A requeued run resumes its own latest checkpoint; older ones are the fallbacks for a
    // worker that finds the latest missing or damaged (it reports its choice in ACCEPT).
    Json offered = store_->Checkpoints(r->id, kResumeCandidates);
    Json resume = offered.empty() ? Json(nullptr) : offered[0];
    Json fallbacks = offered.empty() ? Json::array()
                                     : Json(std::vector<Json>(offered.begin() + 1, offered.end()));
    Status st = store_->StartAttempt(ref, w->id, p->devices, offered, r->experiment_id);
    if (!st.ok()) {
      LogError("cannot start " + RefString(ref) + ": " + st.message());
      queue_.Undo(*p);
      queue_.Push(p->run);
      return;
    }
    leases_.Grant(ref, w->id, p->devices, now);
    w->running[ref] = p->devices;
    Json assign = {{"run", ref.run}, {"attempt", ref.attempt}, {"experiment", r->experiment_id},
                   {"config", config.ok() ? *config : Json::object()}, {"resume", resume},
                   {"resume_fallbacks", fallbacks}, {"devices", p->devices}};
    if (parent.state == ParentResolution::State::kReady) assign["parent"] = parent.checkpoint;
    // Checkpoint retention keeps the steps that stored continuations start from.
    Json pinned = PinnedSteps(store_->db(), r->id);
    if (!pinned.empty()) assign["keep_steps"] = std::move(pinned);
    SendTo(*w, wire::kAssign, assign);
  }
}

void Core::UnparkAll() {
  for (int64_t id : parked_) queue_.Push(id);
  parked_.clear();
}

}  // namespace headlab::coord
