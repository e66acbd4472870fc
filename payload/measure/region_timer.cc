// RegionTimer over cudaEventRecord / cudaEventElapsedTime.
#include "payload/measure/region_timer.h"

#include "payload/measure/gpu_presence.h"

#if HEADLAB_MEASURE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "common/gpu_check.h"
#endif

namespace headlab::measure {

void RegionTimer::Note(Status s) {
  if (error_.ok()) error_ = std::move(s);
}

#if HEADLAB_MEASURE_HAVE_CUDA

void* RegionTimer::NewEvent() {
  if (pool_used_ < pool_.size()) return pool_[pool_used_++];
  cudaEvent_t e = nullptr;
  Status created = HEADLAB_CUDA_STATUS(cudaEventCreate(&e));
  if (!created.ok()) {
    Note(std::move(created));
    return nullptr;
  }
  pool_.push_back(e);
  pool_used_++;
  return e;
}

void RegionTimer::Push(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  stack_.push_back(name);
  Occurrence o;
  o.path = RangePath(stack_);
  o.begin = NewEvent();
  if (o.begin)
    Note(HEADLAB_CUDA_STATUS(cudaEventRecord(static_cast<cudaEvent_t>(o.begin), cudaStreamLegacy)));
  open_.push_back(done_.size());
  done_.push_back(o);
}

void RegionTimer::Pop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_.empty()) return;
  Occurrence& o = done_[open_.back()];
  o.end = NewEvent();
  if (o.end)
    Note(HEADLAB_CUDA_STATUS(cudaEventRecord(static_cast<cudaEvent_t>(o.end), cudaStreamLegacy)));
  open_.pop_back();
  stack_.pop_back();
}

StatusOr<std::map<std::string, double>> RegionTimer::Elapsed() {
  std::lock_guard<std::mutex> lock(mu_);
  HEADLAB_RETURN_IF_ERROR(error_);
  if (!open_.empty())
    return Status::InvalidArgument("region timer read with open range " + RangePath(stack_));
  std::map<std::string, double> ms;
  for (const Occurrence& o : done_) {
    if (!o.begin || !o.end) return Status::Unavailable("region " + o.path + " has no CUDA event");
    const auto begin = static_cast<cudaEvent_t>(o.begin), end = static_cast<cudaEvent_t>(o.end);
    float t = 0;
    Status st = HEADLAB_CUDA_STATUS(cudaEventSynchronize(end));
    if (st.ok()) st = HEADLAB_CUDA_STATUS(cudaEventElapsedTime(&t, begin, end));
    if (!st.ok()) return Status::Unavailable("timing region " + o.path + ": " + st.message());
    ms[o.path] += double(t);
  }
  return ms;
}

void RegionTimer::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  done_.clear();
  open_.clear();
  stack_.clear();
  pool_used_ = 0;
}

RegionTimer::~RegionTimer() {
  for (void* e : pool_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}

#else  // !HEADLAB_MEASURE_HAVE_CUDA

void* RegionTimer::NewEvent() { return nullptr; }
void RegionTimer::Push(const std::string&) {}
void RegionTimer::Pop() {}
StatusOr<std::map<std::string, double>> RegionTimer::Elapsed() {
  return Status::Unavailable(NoGpuReason());
}
void RegionTimer::Clear() {}
RegionTimer::~RegionTimer() = default;

#endif

}  // namespace headlab::measure
