// Run kind "flops" (flops.h): warm-up, event-timed repeats, one traced pair, one counted pair.
#include "payload/exec/flops.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <sstream>

#include <torch/torch.h>

#if HEADLAB_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "common/files.h"
#include "common/log.h"
#include "common/metric_names.h"
#include "common/sha256.h"
#include "payload/exec/data.h"
#include "payload/exec/flops_ranges.h"
#include "payload/exec/model.h"
#include "payload/exec/optimizer.h"
#include "payload/exec/run_setup.h"
#include "payload/exec/train_hooks.h"
#include "payload/exec/update_step.h"
#include "payload/measure/flop_counter.h"
#include "payload/measure/gpu_presence.h"
#include "payload/measure/kernel_trace.h"
#include "payload/measure/range_paths.h"
#include "payload/measure/region_timer.h"

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
  StatusOr<measure::TensorMetricSet> t =
      measure::FindTensorMetricSet(f.at("tensor_metrics").get<std::string>());
  if (!t.ok())
    return Status::InvalidArgument("config: $.config.flops.tensor_metrics: " +
                                   t.status().message());
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
    if (now.size() != params_.size())
      return Status::Internal("flops: the parameter list changed during the step");
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

// Phases of a controller's period the counted FLOPs cover (TrainHooks::ControlPeriod): a
// counted pair per phase, so at most this many.
constexpr int64_t kMaxCountedPhases = 16;

// Total FLOPs per range path of a counter report.
std::map<std::string, double> TotalsByPath(const measure::FlopReport& r) {
  std::map<std::string, double> out;
  for (const auto& [path, f] : r.ranges) out[path] = f.total;
  return out;
}

double TotalOf(const measure::FlopReport& r, const std::string& path) {
  auto it = r.ranges.find(path);
  return it == r.ranges.end() ? 0.0 : it->second.total;
}

// The methods' work in a step: their hooks ("step/method") and what they run inside the
// model's forward ("step/forward/method": AAH's controller observes each layer there).
constexpr const char* kMethodPaths[] = {"step/method", "step/forward/method"};

double MethodFlops(const measure::FlopReport& r) {
  double sum = 0;
  for (const char* path : kMethodPaths) sum += TotalOf(r, path);
  return sum;
}

double MethodMs(const std::map<std::string, double>& ms) {
  double sum = 0;
  for (const char* path : kMethodPaths)
    if (auto it = ms.find(path); it != ms.end()) sum += it->second;
  return sum;
}

// One flops run as named steps: SetUp (run_setup.h and the fixed batch), Warmup,
// TimeRepeats, TracePair, CountPair, then Report.
class FlopsRun {
 public:
  FlopsRun(const FlopsRequest& req, EventSink* events)
      : req_(req), c_(req.config), t_(req.config.train), events_(events) {}

  // flops.* options, device, data, the seeded model and its optimiser as kind "train" has
  // them, one fixed batch, the provenance so far and the methods' OnStart.
  Status SetUp();
  // flops.warmup untimed pairs; they advance the methods as training does.
  Status Warmup();
  // flops.repeats timed pairs: CUDA events per range (GPU), host wall time of each pair
  // (anywhere), and the peak memory.
  Status TimeRepeats();
  // One traced pair: kernel records joined to the ranges.
  Status TracePair();
  // One counted pair under replay, the state restored before every pass.
  Status CountPair();
  // Metrics, provenance, the methods' figures, the flops.json artifact and the summary.
  Status Report();

 private:
  Status Forward();
  // `advance`: also run AfterUpdate and count the update, as the training loop does. Warm-up
  // steps advance (a method's controller moves on as in training); measured steps do not,
  // so every repeat and replay pass sees the same method state.
  Status TrainStep(bool advance);
  Status Pair();
  double MedianOf(const std::string& path) const;
  // Puts the method hooks at phase p of their controller period (the steps they see).
  void AtPhase(int64_t p) { ctx_->step = step0_ + p; }

  // Constant after construction.
  const FlopsRequest& req_;
  const ExecConfig& c_;
  const TrainConfig& t_;
  EventSink* const events_;

  // Set up by SetUp.
  FlopsOptions o_;
  torch::Device device_{torch::kCPU};
  Dataset data_;
  Gpt model_{nullptr};
  std::unique_ptr<torch::optim::AdamW> opt_;
  std::unique_ptr<Updater> updater_;
  std::vector<int64_t> tokens_;  // the fixed batch: every repeat and replay pass does the same work
  torch::Tensor x_, y_;
  Json prov_;
  std::unique_ptr<TrainContext> ctx_;
  int64_t period_ = 1;  // the hooks' largest ControlPeriod
  int64_t step0_ = 0;   // the step the measured pairs start from (after the warm-up)

  // Measured.
  std::vector<std::vector<double>> method_ms_by_phase_;  // kMethodPaths' event ms per phase
  std::vector<double> step_flops_by_phase_, method_flops_by_phase_;
  std::map<std::string, std::vector<double>> event_ms_;
  std::vector<double> wall_ms_;
  std::string timing_unmeasured_;
  double peak_allocated_ = std::nan("");
  Json kernels_ = Json::object();
  std::string trace_unmeasured_;
  measure::JoinResult join_;
  measure::FlopReport flops_;
};

Status FlopsRun::SetUp() {
  StatusOr<FlopsOptions> options = ParseOptions(req_.config_json);
  if (!options.ok()) return options.status();
  o_ = *options;
  HEADLAB_RETURN_IF_ERROR(PickDevice(t_, /*rank=*/0, &device_));
  StatusOr<Dataset> data = LoadRunData(c_);  // as run kind "train" (a method may calibrate)
  if (!data.ok()) return data.status();
  data_ = std::move(data.value());
  HEADLAB_RETURN_IF_ERROR(MakeDirs(req_.out_dir));

  StatusOr<Gpt> seeded = SeededModel(c_, nullptr);
  if (!seeded.ok()) return seeded.status();
  model_ = *seeded;
  HEADLAB_RETURN_IF_ERROR(PlaceModel(model_, t_, device_));
  opt_ = MakeOptimizer(model_, t_);  // as run kind "train"
  updater_ = std::make_unique<Updater>(model_, *opt_, t_, model_->precision(), device_);

  BatchSampler sampler(uint64_t(c_.seed), c_.model.context);
  sampler.Next(data_.train, t_.batch_size, &tokens_);
  torch::Tensor batch =
      torch::from_blob(tokens_.data(), {t_.batch_size, c_.model.context + 1}, torch::kLong)
          .to(device_, false, true);
  x_ = batch.narrow(1, 0, c_.model.context);
  y_ = batch.narrow(1, 1, c_.model.context);

  prov_ = RunProvenance(model_, device_);
  prov_["dataset_sha256"] = data_.sha256;
  ctx_.reset(new TrainContext{c_, req_.config_json, req_.out_dir, model_, opt_, data_, device_,
                              events_, 0, [](int64_t) { return std::nan(""); }});
  for (const std::shared_ptr<TrainHooks>& h : req_.hooks)
    HEADLAB_RETURN_IF_ERROR(h->OnStart(*ctx_, std::nullopt, &prov_));
  SetPerLayerAttentionRanges(o_.per_layer);
  return Status::Ok();
}

Status FlopsRun::Forward() {
  ResetAttentionLayers();
  ScopedRange r("forward");
  torch::NoGradGuard no_grad;
  (void)model_->Loss(x_, y_);
  return Status::Ok();
}

Status FlopsRun::TrainStep(bool advance) {
  ResetAttentionLayers();
  ScopedRange s("step");
  updater_->Begin();
  {
    ScopedRange m("method");
    for (const std::shared_ptr<TrainHooks>& h : req_.hooks)
      HEADLAB_RETURN_IF_ERROR(h->BeforeUpdate(*ctx_, x_));
  }
  torch::Tensor loss;
  {
    ScopedRange f("forward");
    loss = model_->Loss(x_, y_);
  }
  {
    ScopedRange b("backward");
    updater_->Backward(loss);
  }
  {
    ScopedRange m("method");
    for (const std::shared_ptr<TrainHooks>& h : req_.hooks)
      HEADLAB_RETURN_IF_ERROR(h->AfterBackward(*ctx_));
  }
  {
    ScopedRange u("optimizer");
    updater_->Apply();
  }
  if (!advance) return Status::Ok();
  ++ctx_->step;
  const double update_loss = loss.item<double>();
  for (const std::shared_ptr<TrainHooks>& h : req_.hooks)
    HEADLAB_RETURN_IF_ERROR(h->AfterUpdate(*ctx_, update_loss));
  return Status::Ok();
}

Status FlopsRun::Pair() {
  HEADLAB_RETURN_IF_ERROR(Forward());
  return TrainStep(/*advance=*/false);
}

Status FlopsRun::Warmup() {
  for (int64_t w = 0; w < o_.warmup; ++w) {
    HEADLAB_RETURN_IF_ERROR(Forward());
    HEADLAB_RETURN_IF_ERROR(TrainStep(/*advance=*/true));
  }
  Sync(device_);
  step0_ = ctx_->step;
  for (const std::shared_ptr<TrainHooks>& h : req_.hooks)
    period_ = std::max(period_, h->ControlPeriod());
  period_ = std::min(period_, kMaxCountedPhases);
  method_ms_by_phase_.assign(size_t(period_), {});
  return Status::Ok();
}

Status FlopsRun::TimeRepeats() {
#if HEADLAB_TORCH_CUDA
  if (device_.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
#endif
  measure::RegionTimer timer;
  for (int64_t r = 0; r < o_.repeats; ++r) {
    timer.Clear();
    const Clock::time_point t0 = Clock::now();
    AtPhase(r % period_);  // the repeats walk the controller's period: its steps and the others
    if (device_.is_cuda()) measure::SetActiveMarker(&timer);
    Status s = Pair();
    measure::SetActiveMarker(nullptr);
    HEADLAB_RETURN_IF_ERROR(s);
    Sync(device_);
    wall_ms_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (!device_.is_cuda()) continue;
    StatusOr<std::map<std::string, double>> ms = timer.Elapsed();
    if (!ms.ok()) {
      timing_unmeasured_ = ms.status().message();
      continue;
    }
    for (const auto& [path, v] : *ms) event_ms_[path].push_back(v);
    method_ms_by_phase_[size_t(r % period_)].push_back(MethodMs(*ms));
  }
  AtPhase(0);
  if (!device_.is_cuda()) timing_unmeasured_ = "no GPU: run on " + device_.str();
#if HEADLAB_TORCH_CUDA
  if (device_.is_cuda())
    peak_allocated_ =
        double(c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index())
                   .allocated_bytes[size_t(c10::CachingAllocator::StatType::AGGREGATE)]
                   .peak);
#endif
  return Status::Ok();
}

Status FlopsRun::TracePair() {
  if (!device_.is_cuda()) {
    trace_unmeasured_ =
        measure::NoGpuReason().empty() ? "no GPU: run on " + device_.str() : measure::NoGpuReason();
    return Status::Ok();
  }
  StatusOr<std::unique_ptr<measure::KernelTrace>> trace = measure::KernelTrace::Start();
  if (!trace.ok()) {
    trace_unmeasured_ = trace.status().message();
    return Status::Ok();
  }
  AtPhase(0);
  measure::SetActiveMarker(trace->get());
  Status s = Pair();
  measure::SetActiveMarker(nullptr);
  HEADLAB_RETURN_IF_ERROR(s);
  StatusOr<measure::KernelTraceResult> tr = (*trace)->Finish();
  if (!tr.ok()) {
    trace_unmeasured_ = tr.status().message();
    return Status::Ok();
  }
  join_ = tr->join;
  for (const auto& [path, st] : join_.ranges)
    kernels_[path] = {{"kernels", st.kernels},
                      {"kernel_ms", double(st.kernel_ns) / 1e6},
                      {"busy_ms", double(st.busy_ns) / 1e6},
                      {"occurrences", st.occurrences}};
  return Status::Ok();
}

Status FlopsRun::CountPair() {
  if (!device_.is_cuda()) {
    std::string why = measure::NoGpuReason();
    flops_.unmeasured = why.empty() ? "no GPU: run on " + device_.str() : why;
    return Status::Ok();
  }
  StateSnapshot snapshot(model_, *opt_);
  measure::CounterOptions co;
  co.nesting_levels = o_.per_layer ? 6 : 5;  // step/backward/attention/L<k>/proj
  co.max_passes = 512;  // 20 passes for the FLOP counters on H200 (docs/BENCHMARKS.md)
  co.max_ranges = size_t(16 + 4 * c_.model.layers * (o_.per_layer ? 3 : 2) * 2);
  // A counted pair per phase of the controller's period (one when the hooks have none): the
  // reported counts are phase 0's, the *_mean ones the mean over every phase.
  for (int64_t p = 0; p < period_; ++p) {
    AtPhase(p);
    StatusOr<measure::FlopReport> m = measure::MeasureFlops(
        [this] { return Pair(); }, [&] { return snapshot.Restore(); }, o_.tensor, co);
    Status restored = snapshot.Restore();
    if (!m.ok()) return m.status();
    HEADLAB_RETURN_IF_ERROR(restored);
    if (p == 0) flops_ = *m;
    if (!m->measured()) break;
    step_flops_by_phase_.push_back(TotalOf(*m, "step"));
    method_flops_by_phase_.push_back(MethodFlops(*m));
  }
  AtPhase(0);
  return Status::Ok();
}

double FlopsRun::MedianOf(const std::string& path) const {
  auto it = event_ms_.find(path);
  return it == event_ms_.end() ? std::nan("") : Median(it->second);
}

Status FlopsRun::Report() {
  const measure::FlopReport& fr = flops_;
  Json values = Json::object();
  values[metric::kTimeWallPairMs] = Median(wall_ms_);
  if (timing_unmeasured_.empty()) {
    values[metric::kTimeStepMs] = MedianOf("step");
    values[metric::kTimeForwardMs] = MedianOf("forward");
    std::map<std::string, double> medians;
    for (const auto& [path, v] : event_ms_) medians[path] = Median(v);
    const measure::AttentionSplit a = measure::SplitAttention(medians, "step");
    values[metric::kTimeAttentionMs] = a.attention;
    values[metric::kTimeAttentionCoreMs] = a.core();
    // The method hooks' time, the mean over the period of each phase's median.
    double method = 0;
    int64_t phases = 0;
    for (const std::vector<double>& v : method_ms_by_phase_)
      if (!v.empty()) {
        method += Median(v);
        ++phases;
      }
    if (phases == period_) values[metric::kTimeMethodMeanMs] = method / double(phases);
  }
  if (trace_unmeasured_.empty()) {
    values[metric::kKernelStepMs] = double(join_.ranges["step"].kernel_ns) / 1e6;
    std::map<std::string, double> kernel_ms;
    for (const auto& [path, st] : join_.ranges) kernel_ms[path] = double(st.kernel_ns) / 1e6;
    const measure::AttentionSplit a = measure::SplitAttention(kernel_ms, "step");
    values[metric::kKernelAttentionMs] = a.attention;
    values[metric::kKernelAttentionCoreMs] = a.core();
  }
  values[metric::kBenchPeakMemBytes] = peak_allocated_;
  if (fr.measured()) {
    const measure::FlopCounts st =
        fr.ranges.count("step") ? fr.ranges.at("step") : measure::FlopCounts{};
    const measure::FlopCounts fw =
        fr.ranges.count("forward") ? fr.ranges.at("forward") : measure::FlopCounts{};
    values[metric::kFlopsFp32] = st.fp32;
    values[metric::kFlopsHalf] = st.half;
    values[metric::kFlopsTensor] = st.tensor;
    values[metric::kFlopsTotal] = st.total;
    const std::map<std::string, double> totals = TotalsByPath(fr);
    const measure::AttentionSplit step_attention = measure::SplitAttention(totals, "step");
    values[metric::kFlopsAttention] = step_attention.attention;
    values[metric::kFlopsAttentionProj] = step_attention.projection;
    values[metric::kFlopsAttentionCore] = step_attention.core();
    values[metric::kFlopsForwardTotal] = fw.total;
    values[metric::kFlopsMethod] = MethodFlops(fr);
    values[metric::kFlopsForwardAttention] = measure::SplitAttention(totals, "forward").attention;
    if (int64_t(step_flops_by_phase_.size()) == period_) {  // every phase counted
      double step = 0, method = 0;
      for (int64_t p = 0; p < period_; ++p) {
        step += step_flops_by_phase_[size_t(p)];
        method += method_flops_by_phase_[size_t(p)];
      }
      values[metric::kFlopsTotalMean] = step / double(period_);
      values[metric::kFlopsMethodMean] = method / double(period_);
    }
    values[metric::kFlopsPasses] = fr.passes;
    values[metric::kFlopsOverheadX] = fr.profiled_s / (Median(wall_ms_) / 1e3);
  }
  for (const auto& [key, v] : values.items())
    if (v.is_number()) events_->Metric(0, key, v.get<double>());

  prov_[metric::kFlopsStatus] = fr.measured() ? "measured" : "unmeasured";
  if (!fr.measured()) prov_[metric::kFlopsReason] = fr.unmeasured;
  prov_["flops_tensor_metrics"] = o_.tensor.name;
  if (!timing_unmeasured_.empty()) prov_["timing_unmeasured_reason"] = timing_unmeasured_;
  if (!trace_unmeasured_.empty()) prov_["kernel_trace_unmeasured_reason"] = trace_unmeasured_;
  prov_["attention_paths"] = AttentionPaths(model_);  // what the measured steps ran
  events_->Provenance(prov_);

  // The methods' own figures beside the counts (AAH's ACR next to its measured FLOPs: the
  // ratio AAH §5.10 says must never stand in for them).
  for (const std::shared_ptr<TrainHooks>& h : req_.hooks)
    HEADLAB_RETURN_IF_ERROR(h->Summarize(*ctx_, &values));
  Json report = {{"flops", measure::FlopReportJson(fr)},
                 {"event_ms_median", Json::object()},
                 {"kernels", kernels_},
                 {"wall_ms_median", Median(wall_ms_)},
                 {"repeats", o_.repeats},
                 {"warmup", o_.warmup},
                 {"device", device_.str()},
                 {"summary", values}};
  for (const auto& [path, v] : event_ms_) report["event_ms_median"][path] = Median(v);
  if (!timing_unmeasured_.empty()) report["timing_unmeasured"] = timing_unmeasured_;
  if (!trace_unmeasured_.empty()) report["kernel_trace_unmeasured"] = trace_unmeasured_;
  const std::string bytes = report.dump(2) + "\n";
  const std::string path = req_.out_dir + "/flops.json";
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
  events_->Artifact("flops", path, Sha256Hex(bytes), bytes.size(), 0);
  events_->Summary(values);
  LogInfo("flops: " +
          std::string(fr.measured() ? "measured, " + std::to_string(fr.passes) + " passes"
                                    : "unmeasured (" + fr.unmeasured + ")") +
          "; pair " + std::to_string(Median(wall_ms_)) + " ms wall on " + device_.str());
  return Status::Ok();
}

}  // namespace

Status RunFlops(const FlopsRequest& req, EventSink* events) {
  FlopsRun run(req, events);
  HEADLAB_RETURN_IF_ERROR(run.SetUp());
  HEADLAB_RETURN_IF_ERROR(run.Warmup());
  HEADLAB_RETURN_IF_ERROR(run.TimeRepeats());
  HEADLAB_RETURN_IF_ERROR(run.TracePair());
  HEADLAB_RETURN_IF_ERROR(run.CountPair());
  return run.Report();
}

}  // namespace headlab
