// KernelTrace over cupti_activity.h: buffers handed to CUPTI, records parsed on completion.
#include "payload/measure/kernel_trace.h"

#include <cstdlib>

#include "payload/measure/gpu_presence.h"

#if HEADLAB_MEASURE_HAVE_CUPTI
#include <cuda_runtime_api.h>
#include <cupti_activity.h>
#include <cupti_result.h>

#include "common/gpu_check.h"
#endif

namespace headlab::measure {

#if HEADLAB_MEASURE_HAVE_CUPTI
namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kAlign = 8;

// Records collected by the completion callback (CUPTI calls it from its own thread).
struct Collected {
  std::mutex mu;
  std::vector<KernelRecord> kernels;
  std::map<uint32_t, uint64_t> launch_ns;  // correlation id -> API call start
  size_t dropped = 0;
};
Collected& Sink() {
  static Collected c;
  return c;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t,
                              size_t valid) {
  Collected& c = Sink();
  std::lock_guard<std::mutex> lock(c.mu);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(record);
        c.kernels.push_back(
            {k->correlationId, k->start, k->end, k->streamId, k->name ? k->name : ""});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        auto* a = reinterpret_cast<CUpti_ActivityAPI*>(record);
        const uint32_t id = a->correlationId;
        const uint64_t start = a->start;
        c.launch_ns.emplace(id, start);
        break;
      }
      default:
        break;
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
    c.dropped += dropped;
  std::free(buffer);
}

const CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                     CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

}  // namespace

StatusOr<std::unique_ptr<KernelTrace>> KernelTrace::Start() {
  std::string no_gpu = NoGpuReason();
  if (!no_gpu.empty()) return Status::Unavailable(no_gpu);
  {
    Collected& c = Sink();
    std::lock_guard<std::mutex> lock(c.mu);
    c.kernels.clear();
    c.launch_ns.clear();
    c.dropped = 0;
  }
  std::unique_ptr<KernelTrace> t(new KernelTrace());
  HEADLAB_CUPTI_CHECK(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted));
  for (CUpti_ActivityKind k : kKinds) {
    Status s = HEADLAB_CUPTI_STATUS(cuptiActivityEnable(k));
    if (!s.ok()) {
      t->enabled_ = true;
      t->Disable();
      return s;
    }
  }
  t->enabled_ = true;
  return t;
}

void KernelTrace::Disable() {
  if (!enabled_) return;
  for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
  enabled_ = false;
}

KernelTrace::~KernelTrace() {
  if (enabled_) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    Disable();
  }
}

void KernelTrace::Push(const std::string& name) {
  uint64_t now = 0;
  Status clock = HEADLAB_CUPTI_STATUS(cuptiGetTimestamp(&now));
  std::lock_guard<std::mutex> lock(mu_);
  if (marker_status_.ok()) marker_status_ = clock;
  stack_.push_back(name);
  stack_begin_.push_back(now);
}

void KernelTrace::Pop() {
  uint64_t now = 0;
  Status clock = HEADLAB_CUPTI_STATUS(cuptiGetTimestamp(&now));
  std::lock_guard<std::mutex> lock(mu_);
  if (marker_status_.ok()) marker_status_ = clock;
  if (stack_.empty()) return;  // unbalanced Pop: ignored, the join reports what it has
  ranges_.push_back({RangePath(stack_), stack_begin_.back(), now});
  stack_.pop_back();
  stack_begin_.pop_back();
}

StatusOr<KernelTraceResult> KernelTrace::Finish() {
  const Status sync = HEADLAB_CUDA_STATUS(cudaDeviceSynchronize());
  HEADLAB_CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  Disable();
  KernelTraceResult r;
  Collected& c = Sink();
  std::lock_guard<std::mutex> lock(c.mu);
  std::lock_guard<std::mutex> lock2(mu_);
  HEADLAB_RETURN_IF_ERROR(sync);
  HEADLAB_RETURN_IF_ERROR(marker_status_);
  if (!stack_.empty())
    return Status::InvalidArgument("kernel trace finished with open range " + RangePath(stack_));
  r.kernels = c.kernels;
  r.dropped_records = c.dropped;
  r.join = JoinKernelsToRanges(ranges_, c.launch_ns, c.kernels);
  return r;
}

#else  // !HEADLAB_MEASURE_HAVE_CUPTI

StatusOr<std::unique_ptr<KernelTrace>> KernelTrace::Start() {
  std::string no_gpu = NoGpuReason();
  if (!no_gpu.empty()) return Status::Unavailable(no_gpu);
  return Status::Unavailable("built without CUPTI");
}
KernelTrace::~KernelTrace() = default;
void KernelTrace::Disable() {}
void KernelTrace::Push(const std::string&) {}
void KernelTrace::Pop() {}
StatusOr<KernelTraceResult> KernelTrace::Finish() {
  return Status::Unavailable("built without CUPTI");
}

#endif  // HEADLAB_MEASURE_HAVE_CUPTI

}  // namespace headlab::measure
