// Timing and peak memory for the bench-* run kinds on one device: CUDA events on the
// current stream for a CUDA device, the steady clock for the CPU; peak allocated bytes of
// LibTorch's CUDA caching allocator, or the process's peak RSS on the CPU. Every figure
// says which (method(), memory_kind(), DeviceLabel). Included only by LibTorch translation
// units.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/status.h"

namespace headlab {

// Returns "cuda:I <GPU name>" or "cpu (N threads)".
std::string DeviceLabel(const torch::Device& device);

// Peak bytes LibTorch's CUDA caching allocator held allocated on `device` since the last
// reset (0 for the CPU), and its reset.
int64_t DevicePeakMemoryBytes(const torch::Device& device);
void ResetDevicePeakMemory(const torch::Device& device);

// Waits until `device` has finished all queued work (nothing for the CPU).
void SynchronizeDevice(const torch::Device& device);

// Times regions on one device. Single-threaded.
class BenchClock {
 public:
  explicit BenchClock(torch::Device device);
  ~BenchClock();

  // Marks the start of a timed region (records a CUDA event / reads the clock).
  void Start();
  // Marks its end and returns the region's milliseconds (waits for the device).
  double StopMs();
  // "cuda_events" or "steady_clock".
  const char* method() const;

  // Forgets the peak so far (CUDA: resets the allocator's peak statistics; the CPU's peak
  // RSS cannot be reset and only grows).
  void ResetPeakMemory();
  // Peak allocated bytes since ResetPeakMemory (CUDA) or the process's peak RSS (CPU).
  int64_t PeakMemoryBytes() const;
  // "cuda_peak_allocated" or "peak_rss".
  const char* memory_kind() const;

 private:
  struct CudaEvents;  // defined only in CUDA builds
  torch::Device device_;
  std::unique_ptr<CudaEvents> events_;
  std::chrono::steady_clock::time_point t0_;
};

// Sums the device time of several regions without waiting inside them: a CUDA event pair
// per region on the current stream (the steady clock on the CPU, whose work is done when
// Stop returns). TotalMs waits for the last region. Single-threaded.
class DeviceStopwatch {
 public:
  explicit DeviceStopwatch(torch::Device device);
  ~DeviceStopwatch();
  DeviceStopwatch(const DeviceStopwatch&) = delete;
  DeviceStopwatch& operator=(const DeviceStopwatch&) = delete;

  void Start();
  void Stop();
  // Milliseconds of every Start/Stop region so far (waits for the device).
  double TotalMs();

 private:
  struct CudaEvents;  // defined only in CUDA builds
  torch::Device device_;
  std::vector<std::unique_ptr<CudaEvents>> regions_;
  std::chrono::steady_clock::time_point t0_;
  double host_ms_ = 0;
};

}  // namespace headlab
