// The user requests whose size has no small bound, served in steps (router.h,
// SteppedRequest): a submit of up to 100,000 runs and a cancel of a whole experiment. Each
// step does what fits in the router's slice; the HTTP thread that asked waits for the
// answer, while workers' heartbeats and leases keep being served between steps.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/grid.h"
#include "coordinator/core.h"
#include "coordinator/router.h"

namespace headlab::coord {

// POST /api/v1/experiments: answers {experiment, runs, reused}.
class SubmitRequest : public SteppedRequest {
 public:
  // Plans the submission on the calling thread (serialises every run's config and frees
  // its tree), so the loop only inserts rows.
  SubmitRequest(Grid grid, std::vector<std::string> sets, bool rerun)
      : state_(Core::PlanSubmission(std::move(grid), std::move(sets), rerun)) {}
  std::optional<StatusOr<Json>> Step(Core& core, Clock::time_point deadline) override;

 private:
  SubmitState state_;
};

// POST /api/v1/experiments/ID/cancel: answers {experiment, cancelled: [{run, was}], count}.
class CancelExperimentRequest : public SteppedRequest {
 public:
  explicit CancelExperimentRequest(int64_t experiment) { state_.experiment = experiment; }
  std::optional<StatusOr<Json>> Step(Core& core, Clock::time_point deadline) override {
    return core.CancelExperimentStep(&state_, deadline);
  }

 private:
  CancelState state_;
};

}  // namespace headlab::coord
