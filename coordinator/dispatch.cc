// Dispatch: queued runs (FIFO, run_queue.h) to workers with free slots, round-robin.
// Each assignment is written (attempt row, run status) before its ASSIGN is queued for
// sending, and the router sends only after the batch commits (core.h). A run continuing
// from a shared parent (parent.h) waits in the queue until the parent has finished.
#include <algorithm>

#include "common/log.h"
#include "common/wire.h"
#include "coordinator/core.h"
#include "coordinator/messages.h"
#include "coordinator/parent.h"

namespace headlab::coord {

void Core::Dispatch(Clock::time_point now) {
  if (queue_.empty()) return;
  std::vector<WorkerInfo*> free;
  for (auto& [id, w] : workers_.all())
    if (w.FreeSlots() > 0) free.push_back(&w);
  if (free.empty()) return;
  // Round-robin: each pass gives every worker with a free slot one run.
  std::rotate(free.begin(), free.begin() + (dispatch_cursor_++ % free.size()), free.end());
  bool progress = true;
  while (progress && !queue_.empty()) {
    progress = false;
    for (WorkerInfo* w : free) {
      if (w->FreeSlots() <= 0) continue;
      auto run = queue_.Pop();
      if (!run) break;
      auto r = store_->LoadRunForAssign(*run);
      if (!r.ok() || r->status != "queued") continue;  // cancelled since it was queued
      auto config = ParseJson(r->config_json, "runs.config_json");
      ParentResolution parent = ResolveParent(store_->db(), config.ok() ? *config : Json::object());
      if (parent.state == ParentResolution::State::kWait) {
        // Parked, not requeued: re-examining every waiting child on every batch would cost
        // a scan per batch; they return to the queue when some run finishes (core.cc).
        parked_.push_back(*run);
        progress = true;  // the queue shrank; this worker's slot is offered again
        continue;
      }
      if (parent.state == ParentResolution::State::kFail) {
        Status st = FailQueuedRun(store_->db(), r->id, parent.error);
        if (st.ok())
          st = store_->AddEvent("parent_failed", r->experiment_id, r->id, 0, "",
                                {{"error", parent.error}});
        if (!st.ok()) LogError("cannot fail run " + std::to_string(r->id) + ": " + st.message());
        finished_experiments_.insert(r->experiment_id);
        UnparkAll();  // its own children can now fail too
        progress = true;
        continue;
      }
      AttemptRef ref{r->id, r->attempts + 1};
      std::vector<int> devices = w->PickDevices();
      Json resume = store_->LatestCheckpoint(r->id);  // a requeued child resumes its own
      Status st = store_->StartAttempt(ref, w->id, devices, resume, r->experiment_id);
      if (!st.ok()) {
        LogError("cannot start " + RefString(ref) + ": " + st.message());
        queue_.Push(*run);
        return;
      }
      leases_.Grant(ref, w->id, devices, now);
      w->running[ref] = devices;
      Json assign = {{"run", ref.run}, {"attempt", ref.attempt}, {"experiment", r->experiment_id},
                     {"config", config.ok() ? *config : Json::object()}, {"resume", resume},
                     {"devices", devices}};
      if (parent.state == ParentResolution::State::kReady) assign["parent"] = parent.checkpoint;
      Send(w->id, wire::kAssign, assign);
      progress = true;
    }
  }
}

void Core::UnparkAll() {
  for (int64_t id : parked_) queue_.Push(id);
  parked_.clear();
}

}  // namespace headlab::coord
