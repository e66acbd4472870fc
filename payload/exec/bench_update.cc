// bench-update: timed full optimiser updates.
#include "payload/exec/bench_update.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <unistd.h>

#include <c10/core/DeviceGuard.h>
#include <torch/torch.h>

#include "common/log.h"
#include "common/metric_names.h"
#include "common/paired_estimators.h"
#include "payload/exec/bench_clock.h"
#include "payload/exec/bench_model.h"
#include "payload/exec/bench_settings.h"
#include "payload/exec/dist.h"
#include "payload/exec/grad_reducer.h"
#include "payload/exec/optimizer.h"
#include "payload/exec/run_setup.h"
#include "payload/exec/stop_flag.h"
#include "payload/exec/update_step.h"

namespace headlab {

Status RunBenchUpdate(const BenchRequest& req, EventSink* events) {
  const ExecConfig& c = req.config;
  const TrainConfig& t = c.train;
  auto settings = BenchSettingsFromJson(req.config_json, c, req.file);
  if (!settings.ok()) return settings.status();
  const int world = int(t.ranks);
  torch::Device device(torch::kCPU);
  HEADLAB_RETURN_IF_ERROR(PickDevice(t, req.rank, &device));
  c10::DeviceGuard device_guard(device);
  StatusOr<ReduceDtype> reduce_dtype = ParseReduceDtype(t.allreduce_dtype);
  if (!reduce_dtype.ok()) return reduce_dtype.status();
  StatusOr<DataParallel> dp = StartDataParallel(req.rank, world, req.out_dir, req.file, device);
  if (!dp.ok()) return dp.status();

  Gpt model{nullptr};
  HEADLAB_RETURN_IF_ERROR(MakeBenchModel(c, *settings, device, &model));  // the leg's head states
  model->train();
  std::unique_ptr<torch::optim::AdamW> opt = MakeOptimizer(model, t);
  Updater updater(model, *opt, t, model->precision(), device);
  std::unique_ptr<GradientReducer> reducer;
  if (dp->group) {
    reducer = std::make_unique<GradientReducer>(*dp->group, *reduce_dtype);
    updater.ReduceGradientsWith(reducer.get());
  }
  // Random tokens, drawn before timing (the seed is the leg's batch-order seed): the cost
  // of an update does not depend on token values, and no host-side data loading is timed.
  const int64_t updates = settings->warmup + settings->repeats;
  torch::Tensor tokens =
      torch::randint(0, c.model.vocab, {updates * t.grad_accum, t.batch_size, c.model.context + 1},
                     torch::kLong)
          .to(device);
  BenchClock clock(device);
  Json prov = RunProvenance(model, device);
  prov.update({{"kind", "bench-update"},
               {"device", DeviceLabel(device)},
               {"timer", clock.method()},
               {"memory_kind", clock.memory_kind()},
               {"pid", int64_t(::getpid())},
               {"warmup", settings->warmup},
               {"repeats", settings->repeats}});
  if (dp->group) {
    prov["ranks"] = world;
    prov["dist_backend"] = dp->group->backend();
    prov["allreduce_dtype"] = ReduceDtypeName(*reduce_dtype);
  }
  events->Provenance(prov);
  LogInfo("bench-update: " + std::to_string(settings->warmup) + " warm-up + " +
          std::to_string(settings->repeats) + " timed updates of " + std::to_string(t.grad_accum) +
          " x " + std::to_string(t.batch_size) + " x " + std::to_string(c.model.context) +
          " tokens on " + DeviceLabel(device));

  std::vector<double> times;
  std::vector<double> exposed_s;  // per timed update: the communication waited for (rank 0)
  for (int64_t u = 0; u < updates; ++u) {
    if (StopRequested()) return Status::Cancelled("bench-update stopped by signal");
    if (u == settings->warmup) clock.ResetPeakMemory();
    const double exposed_before = reducer ? reducer->exposed_seconds() : 0;
    clock.Start();
    updater.Begin();
    for (int64_t micro = 0; micro < t.grad_accum; ++micro) {
      torch::Tensor batch = tokens[u * t.grad_accum + micro];
      updater.Accumulate(batch.narrow(1, 0, c.model.context), batch.narrow(1, 1, c.model.context));
    }
    updater.Apply();
    double ms = clock.StopMs();
    if (dp->group) {  // the update ends when its slowest rank's does
      torch::Tensor slowest = torch::full({1}, ms, torch::dtype(torch::kDouble).device(device));
      dp->group->AllReduceMax(slowest);
      ms = slowest.item<double>();
    }
    if (u == 0) events->Provenance({{"attention_paths", AttentionPaths(model)}});
    if (u < settings->warmup) continue;  // warm-ups discarded
    times.push_back(ms);
    if (reducer) exposed_s.push_back(reducer->exposed_seconds() - exposed_before);
    events->Metric(u - settings->warmup + 1, metric::kBenchUpdateMs, ms);
  }
  const double median = paired::Median(times);
  LogInfo("bench-update: median " + std::to_string(median) + " ms per update");
  Json summary = {
      {metric::kBenchUpdateMs, median},
      {std::string(metric::kBenchUpdateMs) + ".min", *std::min_element(times.begin(), times.end())},
      {std::string(metric::kBenchUpdateMs) + ".max", *std::max_element(times.begin(), times.end())},
      {metric::kBenchPeakMemBytes, double(clock.PeakMemoryBytes())}};
  if (reducer) {
    summary[metric::kDistRanks] = world;
    // The median, as bench.update_ms: rank 0 waits inside its own update, so each timed
    // update's exposed communication is at most that update's (slowest-rank) time.
    summary[metric::kDistAllReduceS] = paired::Median(exposed_s);
  }
  if (dp->peers) dp->peers->Wait();
  events->Summary(summary);
  return Status::Ok();
}

}  // namespace headlab
