// CounterSession over the CUPTI Range Profiler API (cupti_range_profiler.h, CUDA 12.6+):
// host object (config image from metric names) + range profiler object on the context.
#include "payload/measure/counter_session.h"

#include <chrono>
#include <mutex>

#include "payload/measure/gpu_presence.h"

#if HEADLAB_MEASURE_HAVE_CUPTI
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>

#include "common/gpu_check.h"
#endif

namespace headlab::measure {

#if HEADLAB_MEASURE_HAVE_CUPTI
namespace {

// The current context through the driver entry point (the measure library links only the
// runtime, which also serves LibTorch's CUDA build in the same process).
StatusOr<CUcontext> CurrentContext() {
  HEADLAB_CUDA_CHECK(cudaFree(nullptr));  // makes the primary context current
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  HEADLAB_CUDA_CHECK(
      cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &q));
  if (fn == nullptr)
    return Status::Unavailable("CUDA driver entry point cuCtxGetCurrent is missing");
  CUcontext ctx = nullptr;
  if (reinterpret_cast<CUresult (*)(CUcontext*)>(fn)(&ctx) != CUDA_SUCCESS || ctx == nullptr)
    return Status::Unavailable("no current CUDA context");
  return ctx;
}

}  // namespace

struct CounterSession::Impl {
  CounterOptions options;
  CUcontext ctx = nullptr;
  std::vector<const char*> metric_ptrs;  // into options.metrics
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* profiler = nullptr;
  std::vector<uint8_t> config_image, counter_image;
  bool profiler_initialized = false;
  std::mutex mu;         // orders Push/Pop from several threads
  Status marker_status;  // first error of Push/Pop; Guarded by mu

  Status Init();
  void Teardown();
};

Status CounterSession::Impl::Init() {
  for (const std::string& m : options.metrics) metric_ptrs.push_back(m.c_str());
  StatusOr<CUcontext> c = CurrentContext();
  if (!c.ok()) return c.status();
  ctx = *c;
  CUpti_Profiler_Initialize_Params init{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  HEADLAB_CUPTI_CHECK(cuptiProfilerInitialize(&init));
  profiler_initialized = true;

  int device = 0;
  HEADLAB_CUDA_CHECK(cudaGetDevice(&device));
  CUpti_Device_GetChipName_Params chip{CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  chip.deviceIndex = size_t(device);
  HEADLAB_CUPTI_CHECK(cuptiDeviceGetChipName(&chip));

  CUpti_Profiler_GetCounterAvailability_Params avail{
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
  avail.ctx = ctx;
  HEADLAB_CUPTI_CHECK(cuptiProfilerGetCounterAvailability(&avail));
  std::vector<uint8_t> avail_image(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = avail_image.data();
  HEADLAB_CUPTI_CHECK(cuptiProfilerGetCounterAvailability(&avail));

  CUpti_Profiler_Host_Initialize_Params hi{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  hi.pChipName = chip.pChipName;
  hi.pCounterAvailabilityImage = avail_image.data();
  HEADLAB_CUPTI_CHECK(cuptiProfilerHostInitialize(&hi));
  host = hi.pHostObject;

  CUpti_Profiler_Host_ConfigAddMetrics_Params add{
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  add.pHostObject = host;
  add.ppMetricNames = metric_ptrs.data();
  add.numMetrics = metric_ptrs.size();
  HEADLAB_CUPTI_CHECK(cuptiProfilerHostConfigAddMetrics(&add));
  CUpti_Profiler_Host_GetConfigImageSize_Params size{
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  size.pHostObject = host;
  HEADLAB_CUPTI_CHECK(cuptiProfilerHostGetConfigImageSize(&size));
  config_image.resize(size.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params img{
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  img.pHostObject = host;
  img.configImageSize = config_image.size();
  img.pConfigImage = config_image.data();
  HEADLAB_CUPTI_CHECK(cuptiProfilerHostGetConfigImage(&img));

  CUpti_RangeProfiler_Enable_Params en{CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
  en.ctx = ctx;
  HEADLAB_CUPTI_CHECK(cuptiRangeProfilerEnable(&en));
  profiler = en.pRangeProfilerObject;

  CUpti_RangeProfiler_GetCounterDataSize_Params cds{
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
  cds.pRangeProfilerObject = profiler;
  cds.pMetricNames = metric_ptrs.data();
  cds.numMetrics = metric_ptrs.size();
  cds.maxNumOfRanges = options.max_ranges;
  cds.maxNumRangeTreeNodes = uint32_t(options.max_ranges);
  HEADLAB_CUPTI_CHECK(cuptiRangeProfilerGetCounterDataSize(&cds));
  counter_image.assign(cds.counterDataSize, 0);
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params ci{
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
  ci.pRangeProfilerObject = profiler;
  ci.counterDataSize = counter_image.size();
  ci.pCounterData = counter_image.data();
  HEADLAB_CUPTI_CHECK(cuptiRangeProfilerCounterDataImageInitialize(&ci));

  CUpti_RangeProfiler_SetConfig_Params sc{CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
  sc.pRangeProfilerObject = profiler;
  sc.configSize = config_image.size();
  sc.pConfig = config_image.data();
  sc.counterDataImageSize = counter_image.size();
  sc.pCounterDataImage = counter_image.data();
  sc.range = CUPTI_UserRange;
  sc.replayMode = CUPTI_UserReplay;  // kernel replay cannot see user ranges
  sc.maxRangesPerPass = options.max_ranges;
  sc.numNestingLevels = options.nesting_levels;
  sc.minNestingLevel = 1;
  sc.passIndex = 0;
  sc.targetNestingLevel = 1;
  HEADLAB_CUPTI_CHECK(cuptiRangeProfilerSetConfig(&sc));
  return Status::Ok();
}

void CounterSession::Impl::Teardown() {
  if (profiler) {
    CUpti_RangeProfiler_Disable_Params d{CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    d.pRangeProfilerObject = profiler;
    cuptiRangeProfilerDisable(&d);
    profiler = nullptr;
  }
  if (host) {
    CUpti_Profiler_Host_Deinitialize_Params d{CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    d.pHostObject = host;
    cuptiProfilerHostDeinitialize(&d);
    host = nullptr;
  }
  if (profiler_initialized) {
    CUpti_Profiler_DeInitialize_Params d{CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
    cuptiProfilerDeInitialize(&d);
    profiler_initialized = false;
  }
}

StatusOr<std::unique_ptr<CounterSession>> CounterSession::Open(const CounterOptions& options) {
  if (options.metrics.empty()) return Status::InvalidArgument("counter session without metrics");
  std::string no_gpu = NoGpuReason();
  if (!no_gpu.empty()) return Status::Unavailable(no_gpu);
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  Status s = impl->Init();
  if (!s.ok()) {
    impl->Teardown();
    return s;
  }
  return std::unique_ptr<CounterSession>(new CounterSession(std::move(impl)));
}

void CounterSession::Push(const std::string& name) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  CUpti_RangeProfiler_PushRange_Params p{CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
  p.pRangeProfilerObject = impl_->profiler;
  p.pRangeName = name.c_str();
  Status s = HEADLAB_CUPTI_STATUS(cuptiRangeProfilerPushRange(&p));
  if (impl_->marker_status.ok() && !s.ok()) impl_->marker_status = s;
}

void CounterSession::Pop() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  CUpti_RangeProfiler_PopRange_Params p{CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
  p.pRangeProfilerObject = impl_->profiler;
  Status s = HEADLAB_CUPTI_STATUS(cuptiRangeProfilerPopRange(&p));
  if (impl_->marker_status.ok() && !s.ok()) impl_->marker_status = s;
}

StatusOr<CounterRun> CounterSession::Run(const std::function<Status()>& body,
                                         const std::function<Status()>& reset) {
  Impl& im = *impl_;
  CounterRun run;
  const auto t0 = std::chrono::steady_clock::now();
  bool all_submitted = false;
  while (!all_submitted) {
    if (run.passes >= im.options.max_passes)
      return Status::Unavailable("CUPTI needs more than " + std::to_string(im.options.max_passes) +
                                 " replay passes for these metrics");
    if (run.passes > 0 && reset) HEADLAB_RETURN_IF_ERROR(reset());
    CUpti_RangeProfiler_Start_Params st{CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    st.pRangeProfilerObject = im.profiler;
    HEADLAB_CUPTI_CHECK(cuptiRangeProfilerStart(&st));
    SetActiveMarker(this);
    Status body_status = body ? body() : Status::Ok();
    SetActiveMarker(nullptr);
    const Status sync = HEADLAB_CUDA_STATUS(cudaDeviceSynchronize());
    CUpti_RangeProfiler_Stop_Params sp{CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    sp.pRangeProfilerObject = im.profiler;
    const Status stop = HEADLAB_CUPTI_STATUS(cuptiRangeProfilerStop(&sp));
    HEADLAB_RETURN_IF_ERROR(body_status);
    if (!sync.ok()) return Status::Internal("in the profiled body: " + sync.message());
    HEADLAB_RETURN_IF_ERROR(stop);
    {
      std::lock_guard<std::mutex> lock(im.mu);
      HEADLAB_RETURN_IF_ERROR(im.marker_status);
    }
    run.passes++;
    all_submitted = sp.isAllPassSubmitted != 0;
  }
  CUpti_RangeProfiler_DecodeData_Params dd{CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
  dd.pRangeProfilerObject = im.profiler;
  HEADLAB_CUPTI_CHECK(cuptiRangeProfilerDecodeData(&dd));
  run.dropped_ranges = dd.numOfRangeDropped;
  run.profiled_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  CUpti_RangeProfiler_GetCounterDataInfo_Params info{
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
  info.pCounterDataImage = im.counter_image.data();
  info.counterDataImageSize = im.counter_image.size();
  HEADLAB_CUPTI_CHECK(cuptiRangeProfilerGetCounterDataInfo(&info));
  for (size_t i = 0; i < info.numTotalRanges; ++i) {
    CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri{
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
    ri.pCounterDataImage = im.counter_image.data();
    ri.counterDataImageSize = im.counter_image.size();
    ri.rangeIndex = i;
    ri.rangeDelimiter = "/";
    HEADLAB_CUPTI_CHECK(cuptiRangeProfilerCounterDataGetRangeInfo(&ri));
    std::vector<double> values(im.metric_ptrs.size());
    CUpti_Profiler_Host_EvaluateToGpuValues_Params ev{
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    ev.pHostObject = im.host;
    ev.pCounterDataImage = im.counter_image.data();
    ev.counterDataImageSize = im.counter_image.size();
    ev.rangeIndex = i;
    ev.ppMetricNames = im.metric_ptrs.data();
    ev.numMetrics = im.metric_ptrs.size();
    ev.pMetricValues = values.data();
    HEADLAB_CUPTI_CHECK(cuptiProfilerHostEvaluateToGpuValues(&ev));
    RangeCounters rc;
    rc.path = ri.rangeName ? ri.rangeName : "";
    for (size_t m = 0; m < values.size(); ++m) rc.values[im.options.metrics[m]] = values[m];
    run.ranges.push_back(std::move(rc));
  }
  return run;
}

#else  // !HEADLAB_MEASURE_HAVE_CUPTI

struct CounterSession::Impl {};

StatusOr<std::unique_ptr<CounterSession>> CounterSession::Open(const CounterOptions& options) {
  if (options.metrics.empty()) return Status::InvalidArgument("counter session without metrics");
  std::string no_gpu = NoGpuReason();
  if (!no_gpu.empty()) return Status::Unavailable(no_gpu);
  return Status::Unavailable("built without CUPTI");
}

void CounterSession::Push(const std::string&) {}
void CounterSession::Pop() {}

StatusOr<CounterRun> CounterSession::Run(const std::function<Status()>&,
                                         const std::function<Status()>&) {
  return Status::Unavailable("built without CUPTI");
}

#endif  // HEADLAB_MEASURE_HAVE_CUPTI

CounterSession::CounterSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CounterSession::~CounterSession() {
#if HEADLAB_MEASURE_HAVE_CUPTI
  if (impl_) impl_->Teardown();
#endif
}

}  // namespace headlab::measure
