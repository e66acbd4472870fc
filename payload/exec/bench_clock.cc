// CUDA-event / steady-clock timing and peak memory for the bench-* kinds.
#include "payload/exec/bench_clock.h"

#include <sys/resource.h>

#if HEADLAB_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace headlab {

namespace {

// CUDA builds only: a start/stop event pair with timing enabled (LibTorch's default flags
// disable timing), recorded on the current stream so they bracket exactly the work queued
// between them.
struct EventPair {
#if HEADLAB_TORCH_CUDA
  at::cuda::CUDAEvent start{cudaEventDefault};
  at::cuda::CUDAEvent stop{cudaEventDefault};
#endif
};

}  // namespace

struct BenchClock::CudaEvents : EventPair {};
struct DeviceStopwatch::CudaEvents : EventPair {};

std::string DeviceLabel(const torch::Device& device) {
#if HEADLAB_TORCH_CUDA
  if (device.is_cuda())
    return device.str() + " " + at::cuda::getDeviceProperties(device.index())->name;
#endif
  if (device.is_cuda()) return device.str();
  return "cpu (" + std::to_string(torch::get_num_threads()) + " threads)";
}

int64_t DevicePeakMemoryBytes(const torch::Device& device) {
#if HEADLAB_TORCH_CUDA
  if (device.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[0].peak;  // index 0: StatType::AGGREGATE
  }
#endif
  (void)device;
  return 0;
}

void ResetDevicePeakMemory(const torch::Device& device) {
#if HEADLAB_TORCH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
  (void)device;
}

void SynchronizeDevice(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

BenchClock::BenchClock(torch::Device device) : device_(device) {
#if HEADLAB_TORCH_CUDA
  if (device_.is_cuda()) events_ = std::make_unique<CudaEvents>();
#endif
}

BenchClock::~BenchClock() = default;

void BenchClock::Start() {
#if HEADLAB_TORCH_CUDA
  if (events_) {
    events_->start.record();
    return;
  }
#endif
  t0_ = std::chrono::steady_clock::now();
}

double BenchClock::StopMs() {
#if HEADLAB_TORCH_CUDA
  if (events_) {
    events_->stop.record();
    events_->stop.synchronize();
    return double(events_->start.elapsed_time(events_->stop));
  }
#endif
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
}

const char* BenchClock::method() const { return events_ ? "cuda_events" : "steady_clock"; }

void BenchClock::ResetPeakMemory() { ResetDevicePeakMemory(device_); }

int64_t BenchClock::PeakMemoryBytes() const {
  if (device_.is_cuda()) return DevicePeakMemoryBytes(device_);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return int64_t(ru.ru_maxrss) * 1024;
}

const char* BenchClock::memory_kind() const {
  return device_.is_cuda() ? "cuda_peak_allocated" : "peak_rss";
}

DeviceStopwatch::DeviceStopwatch(torch::Device device) : device_(device) {}

DeviceStopwatch::~DeviceStopwatch() = default;

void DeviceStopwatch::Start() {
#if HEADLAB_TORCH_CUDA
  if (device_.is_cuda()) {
    regions_.push_back(std::make_unique<CudaEvents>());
    regions_.back()->start.record();
    return;
  }
#endif
  t0_ = std::chrono::steady_clock::now();
}

void DeviceStopwatch::Stop() {
#if HEADLAB_TORCH_CUDA
  if (device_.is_cuda()) {
    regions_.back()->stop.record();
    return;
  }
#endif
  host_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
}

double DeviceStopwatch::TotalMs() {
  double ms = host_ms_;
#if HEADLAB_TORCH_CUDA
  if (!regions_.empty()) regions_.back()->stop.synchronize();
  for (const auto& r : regions_) ms += double(r->start.elapsed_time(r->stop));
#endif
  return ms;
}

}  // namespace headlab
