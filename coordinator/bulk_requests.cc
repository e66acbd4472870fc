// Steps of the large user requests.
#include "coordinator/bulk_requests.h"

namespace headlab::coord {

std::optional<StatusOr<Json>> SubmitRequest::Step(Core& core, Clock::time_point deadline) {
  auto done = core.SubmitStep(&state_, deadline);
  if (!done) return std::nullopt;
  if (!done->ok()) return StatusOr<Json>(done->status());
  const SubmitResult& r = **done;
  return StatusOr<Json>(
      Json{{"experiment", r.experiment_id}, {"runs", r.runs}, {"reused", r.reused}});
}

}  // namespace headlab::coord
