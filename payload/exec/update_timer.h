// Steady-state timing of training updates on any device. A window of updates ends where
// the device has finished them (Mark and Pause wait for it), so work the host queued on a
// GPU is counted where it runs; callers pause around evaluation and checkpoints, which are
// not training time, and the first update of an attempt (allocator growth, library
// heuristics) is left out by opening the first window after it. Work the callers time
// while paused and do count (Credit) is added to the total. Included only by LibTorch
// translation units. Single-threaded.
#pragma once

#include <chrono>
#include <cstdint>

#include <torch/torch.h>

namespace headlab {

class UpdateTimer {
 public:
  explicit UpdateTimer(const torch::Device& device) : device_(device) {}

  // Waits for the device; counts the open window up to `step` updates and opens the next.
  void Mark(int64_t step);
  // Waits for the device and counts the open window; no window is open afterwards.
  void Pause(int64_t step);
  // Opens a window at `step` (the device is idle: right after Pause).
  void Resume(int64_t step);
  // Counts `seconds` of training work done while no window was open (a method's recurring
  // work, timed between a Pause and the next Resume) into the total.
  void Credit(double seconds) { seconds_ += seconds; }

  // Returns true iff a window is open (between Resume and the next Pause).
  bool open() const { return open_; }
  double seconds() const { return seconds_; }
  int64_t updates() const { return updates_; }
  // Seconds per update over the counted windows; 0 before any.
  double SecondsPerUpdate() const { return updates_ > 0 ? seconds_ / double(updates_) : 0; }

 private:
  using Clock = std::chrono::steady_clock;
  torch::Device device_;
  bool open_ = false;
  Clock::time_point t0_;
  int64_t step0_ = 0;
  double seconds_ = 0;
  int64_t updates_ = 0;
};

}  // namespace headlab
