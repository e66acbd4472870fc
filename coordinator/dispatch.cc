// Dispatch: queued runs (FIFO, run_queue.h) to workers with free slots, round-robin.
// Each assignment is written (attempt row, run status) before its ASSIGN is queued for
// sending, and the router sends only after the batch commits (core.h).
#include <algorithm>

#include "common/log.h"
#include "common/wire.h"
#include "coordinator/core.h"
#include "coordinator/messages.h"

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
      AttemptRef ref{r->id, r->attempts + 1};
      std::vector<int> devices = w->PickDevices();
      Json resume = store_->LatestCheckpoint(r->id);
      Status st = store_->StartAttempt(ref, w->id, devices, resume, r->experiment_id);
      if (!st.ok()) {
        LogError("cannot start " + RefString(ref) + ": " + st.message());
        queue_.Push(*run);
        return;
      }
      leases_.Grant(ref, w->id, devices, now);
      w->running[ref] = devices;
      auto config = ParseJson(r->config_json, "runs.config_json");
      Send(w->id, wire::kAssign,
           {{"run", ref.run}, {"attempt", ref.attempt}, {"experiment", r->experiment_id},
            {"config", config.ok() ? *config : Json::object()}, {"resume", resume},
            {"devices", devices}});
      progress = true;
    }
  }
}

}  // namespace headlab::coord
