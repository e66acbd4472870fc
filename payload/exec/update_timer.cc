// Timing windows of training updates.
#include "payload/exec/update_timer.h"

#include "payload/exec/bench_clock.h"

namespace headlab {

void UpdateTimer::Mark(int64_t step) {
  Pause(step);
  Resume(step);
}

void UpdateTimer::Pause(int64_t step) {
  SynchronizeDevice(device_);
  if (open_) {
    seconds_ += std::chrono::duration<double>(Clock::now() - t0_).count();
    updates_ += step - step0_;
  }
  open_ = false;
}

void UpdateTimer::Resume(int64_t step) {
  open_ = true;
  t0_ = Clock::now();
  step0_ = step;
}

}  // namespace headlab
