// Run kind "flops" (flops.h): warm-up, event-timed repeats, one traced pair, one counted pair.
#include "worker/exec/flops.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include <torch/torch.h>

#if HEADLAB_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "common/files.h"
#include "common/log.h"
#include "common/metric_names.h"
#include "common/sha256.h"
#include "worker/exec/data.h"
#include "worker/exec/flops_ranges.h"
#include "worker/exec/model.h"
#include "worker/exec/optimizer.h"
#include "worker/exec/run_setup.h"
#include "worker/exec/train_hooks.h"
#include "worker/exec/update_step.h"
#include "worker/measure/flop_counter.h"
#include "worker/measure/gpu_presence.h"
#include "worker/measure/kernel_trace.h"
#include "worker/measure/region_timer.h"

namespace headlab {
namespace {

using measure::ScopedRange;
using Clock = std::chrono::steady_clock;

struct FlopsOptions {
  int64_t warmup = 0, repeats = 0;
  bool per_layer = false;
  measure::TensorMetricSet tensor;
};

StatusOr<FlopsOptions> ParseOptions(const Json& config) {
  FlopsOptions o;
  const Json& f = config.at("flops");
  o.warmup = f.at("warmup").get<int64_t>();
  o.repeats = f.at("repeats").get<int64_t>();
  o.per_layer = f.at("per_layer").get<int64_t>() != 0;
  StatusOr<measure::TensorMetricSet> t = measure::FindTensorMetricSet(f.at("tensor_metrics").get<std::string>());
  if (!t.ok()) return Status::InvalidArgument("config: $.config.flops.tensor_metrics: " + t.status().message());
  o.tensor = *t;
  return o;
}

double Median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void Sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

// The model and optimiser state a counter replay pass must start from again.
class StateSnapshot {
 public:
  StateSnapshot(Gpt& model, torch::optim::Optimizer& opt) : model_(model), opt_(opt) {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& p : model_->parameters()) params_.push_back(p.detach().clone());
    torch::serialize::OutputArchive archive;
    opt_.save(archive);
    archive.save_to(opt_bytes_);
  }
  Status Restore() {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> now = model_->parameters();
    if (now.size() != params_.size()) return Status::Internal("flops: the parameter list changed during the step");
    for (size_t i = 0; i < now.size(); ++i) now[i].copy_(params_[i]);
    torch::serialize::InputArchive archive;
    std::istringstream in(opt_bytes_.str());
    archive.load_from(in);
    opt_.load(archive);
    return Status::Ok();
  }

 private:
  Gpt& model_;
  torch::optim::Optimizer& opt_;
  std::vector<torch::Tensor> params_;
  std::ostringstream opt_bytes_;
};

// True iff `path` is an "attention" range (the innermost named one, not a per-layer
// child) of the model's own work under the top-level range `prefix` ("step" or "forward").
// A method hook's extra forward (e.g. AAH's controller observation, range "step/method")
// counts in the step's total and in flops.method, not in its attention.
bool IsAttentionUnder(const std::string& path, const std::string& prefix) {
  const std::string tail = "/attention";
  return path.compare(0, prefix.size() + 1, prefix + "/") == 0 && path.size() >= tail.size() &&
         path.compare(path.size() - tail.size(), tail.size(), tail) == 0 &&
         path.find("/method/") == std::string::npos;
}

}  // namespace

Status RunFlops(const FlopsRequest& req, EventSink* events) {
  const ExecConfig& c = req.config;
  const TrainConfig& t = c.train;
  StatusOr<FlopsOptions> options = ParseOptions(req.config_json);
  if (!options.ok()) return options.status();
  const FlopsOptions& o = *options;
  torch::Device device(torch::kCPU);
  HEADLAB_RETURN_IF_ERROR(PickDevice(t, /*rank=*/0, &device));
  StatusOr<Dataset> data = LoadRunData(c);  // as run kind "train" (a method may calibrate)
  if (!data.ok()) return data.status();
  HEADLAB_RETURN_IF_ERROR(MakeDirs(req.out_dir));

  StatusOr<Gpt> seeded = SeededModel(c, nullptr);
  if (!seeded.ok()) return seeded.status();
  Gpt model = *seeded;
  HEADLAB_RETURN_IF_ERROR(PlaceModel(model, t, device));
  std::unique_ptr<torch::optim::AdamW> opt = MakeOptimizer(model, t);  // as run kind "train"
  Updater updater(model, *opt, t, model->precision(), device);

  // One fixed batch: every repeat and replay pass does the same work.
  BatchSampler sampler(uint64_t(c.seed), c.model.context);
  std::vector<int64_t> tokens;
  sampler.Next(data->train, t.batch_size, &tokens);
  torch::Tensor batch = torch::from_blob(tokens.data(), {t.batch_size, c.model.context + 1}, torch::kLong)
                            .to(device, false, true);
  torch::Tensor x = batch.narrow(1, 0, c.model.context), y = batch.narrow(1, 1, c.model.context);

  Json prov = RunProvenance(model, device);
  prov["dataset_sha256"] = data->sha256;
  TrainContext ctx{c, req.config_json, req.out_dir, model, opt, data.value(), device, events, 0,
                   [](int64_t) { return std::nan(""); }};
  for (const std::shared_ptr<TrainHooks>& h : req.hooks)
    HEADLAB_RETURN_IF_ERROR(h->OnStart(ctx, std::nullopt, &prov));
  SetPerLayerAttentionRanges(o.per_layer);

  auto forward = [&]() -> Status {
    ResetAttentionLayers();
    ScopedRange r("forward");
    torch::NoGradGuard no_grad;
    (void)model->Loss(x, y);
    return Status::Ok();
  };
  // `advance`: also run AfterUpdate and count the update, as the training loop does. Warm-up
  // steps advance (a method's controller moves on as in training); measured steps do not,
  // so every repeat and replay pass sees the same method state.
  auto step = [&](bool advance) -> Status {
    ResetAttentionLayers();
    ScopedRange s("step");
    updater.Begin();
    {
      ScopedRange m("method");
      for (const std::shared_ptr<TrainHooks>& h : req.hooks) HEADLAB_RETURN_IF_ERROR(h->BeforeUpdate(ctx, x));
    }
    torch::Tensor loss;
    {
      ScopedRange f("forward");
      loss = model->Loss(x, y);
    }
    {
      ScopedRange b("backward");
      updater.Backward(loss);
    }
    {
      ScopedRange m("method");
      for (const std::shared_ptr<TrainHooks>& h : req.hooks) HEADLAB_RETURN_IF_ERROR(h->AfterBackward(ctx));
    }
    {
      ScopedRange u("optimizer");
      updater.Apply();
    }
    if (!advance) return Status::Ok();
    ++ctx.step;
    const double update_loss = loss.item<double>();
    for (const std::shared_ptr<TrainHooks>& h : req.hooks) HEADLAB_RETURN_IF_ERROR(h->AfterUpdate(ctx, update_loss));
    return Status::Ok();
  };
  auto pair = [&]() -> Status {
    HEADLAB_RETURN_IF_ERROR(forward());
    return step(/*advance=*/false);
  };

  for (int64_t w = 0; w < o.warmup; ++w) {
    HEADLAB_RETURN_IF_ERROR(forward());
    HEADLAB_RETURN_IF_ERROR(step(/*advance=*/true));
  }
  Sync(device);

  // Timed repeats: CUDA events per range (GPU), host wall time of each pair (anywhere).
#if HEADLAB_TORCH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
  std::map<std::string, std::vector<double>> event_ms;
  std::vector<double> wall_ms;
  std::string timing_unmeasured;
  measure::RegionTimer timer;
  for (int64_t r = 0; r < o.repeats; ++r) {
    timer.Clear();
    const Clock::time_point t0 = Clock::now();
    if (device.is_cuda()) measure::SetActiveMarker(&timer);
    Status s = pair();
    measure::SetActiveMarker(nullptr);
    HEADLAB_RETURN_IF_ERROR(s);
    Sync(device);
    wall_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (!device.is_cuda()) continue;
    StatusOr<std::map<std::string, double>> ms = timer.Elapsed();
    if (!ms.ok()) {
      timing_unmeasured = ms.status().message();
      continue;
    }
    for (const auto& [path, v] : *ms) event_ms[path].push_back(v);
  }
  if (!device.is_cuda()) timing_unmeasured = "no GPU: run on " + device.str();
  double peak_allocated = std::nan("");
#if HEADLAB_TORCH_CUDA
  if (device.is_cuda())
    peak_allocated = double(c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
                                .allocated_bytes[size_t(c10::CachingAllocator::StatType::AGGREGATE)]
                                .peak);
#endif

  // One traced pair: kernel records joined to the ranges.
  Json kernels = Json::object();
  std::string trace_unmeasured;
  measure::JoinResult join;
  if (device.is_cuda()) {
    StatusOr<std::unique_ptr<measure::KernelTrace>> trace = measure::KernelTrace::Start();
    if (trace.ok()) {
      measure::SetActiveMarker(trace->get());
      Status s = pair();
      measure::SetActiveMarker(nullptr);
      HEADLAB_RETURN_IF_ERROR(s);
      StatusOr<measure::KernelTraceResult> tr = (*trace)->Finish();
      if (tr.ok()) {
        join = tr->join;
        for (const auto& [path, st] : join.ranges)
          kernels[path] = {{"kernels", st.kernels}, {"kernel_ms", double(st.kernel_ns) / 1e6},
                           {"busy_ms", double(st.busy_ns) / 1e6}, {"occurrences", st.occurrences}};
      } else {
        trace_unmeasured = tr.status().message();
      }
    } else {
      trace_unmeasured = trace.status().message();
    }
  } else {
    trace_unmeasured = measure::NoGpuReason().empty() ? "no GPU: run on " + device.str()
                                                      : measure::NoGpuReason();
  }

  // One counted pair under replay, the state restored before every pass.
  StatusOr<measure::FlopReport> flops = [&]() -> StatusOr<measure::FlopReport> {
    if (!device.is_cuda()) {
      measure::FlopReport r;
      std::string why = measure::NoGpuReason();
      r.unmeasured = why.empty() ? "no GPU: run on " + device.str() : why;
      return r;
    }
    StateSnapshot snapshot(model, *opt);
    measure::CounterOptions co;
    co.nesting_levels = o.per_layer ? 5 : 4;  // step/backward/attention/L<k>
    co.max_passes = 512;  // 20 passes for the FLOP counters on H200 (docs/BENCHMARKS.md)
    co.max_ranges = size_t(16 + 4 * c.model.layers * (o.per_layer ? 2 : 1) * 2);
    measure::FlopReport r;
    StatusOr<measure::FlopReport> m = measure::MeasureFlops(pair, [&] { return snapshot.Restore(); }, o.tensor, co);
    Status restored = snapshot.Restore();
    if (!m.ok()) return m.status();
    HEADLAB_RETURN_IF_ERROR(restored);
    return m;
  }();
  if (!flops.ok()) return flops.status();
  const measure::FlopReport& fr = *flops;

  // Report.
  auto median_of = [&](const std::string& path) {
    auto it = event_ms.find(path);
    return it == event_ms.end() ? std::nan("") : Median(it->second);
  };
  Json values = Json::object();
  values[metric::kTimeWallPairMs] = Median(wall_ms);
  if (timing_unmeasured.empty()) {
    values[metric::kTimeStepMs] = median_of("step");
    values[metric::kTimeForwardMs] = median_of("forward");
    double attention = 0;
    for (const auto& [path, v] : event_ms)
      if (IsAttentionUnder(path, "step")) attention += Median(v);
    values[metric::kTimeAttentionMs] = attention;
  }
  if (trace_unmeasured.empty()) {
    values[metric::kKernelStepMs] = double(join.ranges["step"].kernel_ns) / 1e6;
    double attention = 0;
    for (const auto& [path, st] : join.ranges)
      if (IsAttentionUnder(path, "step")) attention += double(st.kernel_ns) / 1e6;
    values[metric::kKernelAttentionMs] = attention;
  }
  values[metric::kBenchPeakMemBytes] = peak_allocated;
  if (fr.measured()) {
    const measure::FlopCounts st = fr.ranges.count("step") ? fr.ranges.at("step") : measure::FlopCounts{};
    const measure::FlopCounts fw = fr.ranges.count("forward") ? fr.ranges.at("forward") : measure::FlopCounts{};
    values[metric::kFlopsFp32] = st.fp32;
    values[metric::kFlopsHalf] = st.half;
    values[metric::kFlopsTensor] = st.tensor;
    values[metric::kFlopsTotal] = st.total;
    measure::FlopCounts step_attention, forward_attention;
    for (const auto& [path, f] : fr.ranges) {
      if (IsAttentionUnder(path, "step")) step_attention += f;
      if (IsAttentionUnder(path, "forward")) forward_attention += f;
    }
    values[metric::kFlopsAttention] = step_attention.total;
    values[metric::kFlopsForwardTotal] = fw.total;
    values[metric::kFlopsMethod] = fr.ranges.count("step/method") ? fr.ranges.at("step/method").total : 0.0;
    values[metric::kFlopsForwardAttention] = forward_attention.total;
    values[metric::kFlopsPasses] = fr.passes;
    values[metric::kFlopsOverheadX] = fr.profiled_s / (Median(wall_ms) / 1e3);
  }
  for (const auto& [key, v] : values.items())
    if (v.is_number()) events->Metric(0, key, v.get<double>());

  prov[metric::kFlopsStatus] = fr.measured() ? "measured" : "unmeasured";
  if (!fr.measured()) prov[metric::kFlopsReason] = fr.unmeasured;
  prov["flops_tensor_metrics"] = o.tensor.name;
  if (!timing_unmeasured.empty()) prov["timing_unmeasured_reason"] = timing_unmeasured;
  if (!trace_unmeasured.empty()) prov["kernel_trace_unmeasured_reason"] = trace_unmeasured;
  prov["attention_paths"] = AttentionPaths(model);  // what the measured steps ran
  events->Provenance(prov);

  // The methods' own figures beside the counts (AAH's ACR next to its measured FLOPs: the
  // ratio AAH §5.10 says must never stand in for them).
  for (const std::shared_ptr<TrainHooks>& h : req.hooks) HEADLAB_RETURN_IF_ERROR(h->Summarize(ctx, &values));
  Json report = {{"flops", measure::FlopReportJson(fr)},
                 {"event_ms_median", Json::object()},
                 {"kernels", kernels},
                 {"wall_ms_median", Median(wall_ms)},
                 {"repeats", o.repeats},
                 {"warmup", o.warmup},
                 {"device", device.str()},
                 {"summary", values}};
  for (const auto& [path, v] : event_ms) report["event_ms_median"][path] = Median(v);
  if (!timing_unmeasured.empty()) report["timing_unmeasured"] = timing_unmeasured;
  if (!trace_unmeasured.empty()) report["kernel_trace_unmeasured"] = trace_unmeasured;
  const std::string bytes = report.dump(2) + "\n";
  const std::string path = req.out_dir + "/flops.json";
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
  events->Artifact("flops", path, Sha256Hex(bytes), bytes.size(), 0);
  events->Summary(values);
  LogInfo("flops: " + std::string(fr.measured() ? "measured, " + std::to_string(fr.passes) + " passes"
                                                : "unmeasured (" + fr.unmeasured + ")") +
          "; pair " + std::to_string(Median(wall_ms)) + " ms wall on " + device.str());
  return Status::Ok();
}

}  // namespace headlab
