// Kernel timing through the CUPTI Activity API: concurrent-kernel records, joined to the
// named ranges the traced code opens (range_join.h). Torch-free; an Unavailable stub where
// CUPTI is absent.
//
// While tracing, the trace is the RangeMarker: Push/Pop stamp the host clock that CUPTI
// uses for its records, and runtime/driver API records say when each kernel was launched.
// One KernelTrace at a time per process (CUPTI's activity buffers are process-wide).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "payload/measure/range_join.h"
#include "payload/measure/range_marker.h"

namespace headlab::measure {

struct KernelTraceResult {
  JoinResult join;
  std::vector<KernelRecord> kernels;  // every kernel seen, in completion-buffer order
  size_t dropped_records = 0;         // records CUPTI could not buffer
};

class KernelTrace : public RangeMarker {
 public:
  // Enables kernel, runtime, driver activity. Unavailable("no GPU: ...") without a device,
  // Unavailable("CUPTI ...") when CUPTI refuses.
  static StatusOr<std::unique_ptr<KernelTrace>> Start();
  ~KernelTrace() override;  // disables activity if Finish was not called

  // Flushes and disables activity, then joins kernels to the ranges opened meanwhile.
  // Unavailable when the device synchronisation or a range's CUPTI timestamp failed.
  StatusOr<KernelTraceResult> Finish();

  void Push(const std::string& name) override;
  void Pop() override;

 private:
  KernelTrace() = default;
  void Disable();

  bool enabled_ = false;
  std::mutex mu_;
  std::vector<std::string> stack_;     // Guarded by mu_
  std::vector<uint64_t> stack_begin_;  // Guarded by mu_
  std::vector<HostRange> ranges_;      // Guarded by mu_
  Status marker_status_;               // first error of Push/Pop; Guarded by mu_
};

}  // namespace headlab::measure
