// Checkpoint retention: the rule, and the peak count it implies for a schedule.
#include "common/checkpoint_retention.h"

#include <algorithm>

#include "common/config_key.h"

namespace headlab {

StatusOr<RetentionPolicy> RetentionOf(const Json& config, const Json& assigned) {
  RetentionPolicy p;
  const Json& train = config.at("train");
  p.keep_last = train.at("keep_checkpoints").get<int64_t>();
  StatusOr<std::vector<int64_t>> steps =
      ParsePositiveIntList(train.at("keep_steps").get<std::string>());
  if (!steps.ok())
    return Status::InvalidArgument("config: train.keep_steps: " + steps.status().message());
  p.pinned.insert(steps->begin(), steps->end());
  if (assigned.is_null()) return p;
  if (!assigned.is_array())
    return Status::InvalidArgument("ASSIGN.keep_steps: expected an array of steps");
  for (const Json& s : assigned) {
    if (!s.is_number_integer() || s.get<int64_t>() < 1)
      return Status::InvalidArgument("ASSIGN.keep_steps: expected positive integer steps, got " +
                                     s.dump());
    p.pinned.insert(s.get<int64_t>());
  }
  return p;
}

std::vector<bool> KeptCheckpoints(const std::vector<int64_t>& steps, const RetentionPolicy& p) {
  std::vector<bool> kept(steps.size(), true);
  if (p.keep_last <= 0) return kept;
  const size_t newest_from =
      steps.size() > size_t(p.keep_last) ? steps.size() - size_t(p.keep_last) : 0;
  for (size_t i = 0; i < newest_from; ++i) kept[i] = p.pinned.count(steps[i]) > 0;
  return kept;
}

int64_t CheckpointSchedule::Count() const {
  const int64_t final_step = std::max(start_step, last_step);
  int64_t between = 0;  // multiples of `every` in (start_step, final_step)
  if (every > 0) between = (final_step - 1) / every - start_step / every;
  return std::max<int64_t>(between, 0) + 1;
}

bool CheckpointSchedule::Writes(int64_t step) const {
  const int64_t final_step = std::max(start_step, last_step);
  if (step == final_step) return true;
  return every > 0 && step > start_step && step < final_step && step % every == 0;
}

CheckpointSchedule ScheduleOf(const Json& config) {
  CheckpointSchedule s;
  const Json& train = config.at("train");
  s.start_step = config.at("parent").at("step").get<int64_t>();
  s.last_step = train.at("steps").get<int64_t>();
  s.every = train.at("checkpoint_every").get<int64_t>();
  // mqar.updates > 0 trains that many updates past the start checkpoint (task_eval.h).
  if (config.at("kind") == "mqar" && config.at("mqar").at("updates").get<int64_t>() > 0)
    s.last_step = s.start_step + config["mqar"]["updates"].get<int64_t>();
  return s;
}

int64_t PeakCheckpointsOnDisk(const CheckpointSchedule& s, const RetentionPolicy& p) {
  const int64_t n = s.Count();
  if (p.keep_last <= 0 || n <= p.keep_last) return n;
  // Kept before the last write: the newest keep_last of the first n - 1, and the pinned
  // steps among the older n - 1 - keep_last (written in ascending order, so those are the
  // written steps below the (n - keep_last)-th one). Kept counts only grow as steps are
  // written, so the last write is the peak.
  const int64_t older = n - 1 - p.keep_last;
  int64_t pinned_older = 0;
  if (older > 0) {
    // The older-th written step: the older-th multiple of `every` after start_step (older
    // < n, so it is not the final one).
    const int64_t bound = (s.start_step / s.every + older) * s.every;
    for (int64_t step : p.pinned)
      if (step <= bound && s.Writes(step)) ++pinned_older;
  }
  return p.keep_last + pinned_older + 1;
}

}  // namespace headlab
