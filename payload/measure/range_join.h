// Joins kernel execution records (CUPTI Activity API) to named host ranges. Torch-free.
//
// A kernel belongs to every range whose host interval contains the host time of the API
// call that launched it (matched by CUPTI correlation id), whatever thread launched it:
// autograd's backward launches from its own thread, and an interval join needs no
// per-thread range stack. Ranges nest, so a kernel launched in "step/forward/attention"
// also counts for "step/forward" and "step".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace headlab::measure {

// One closed range occurrence on the host clock (ns, CUPTI timestamps).
struct HostRange {
  std::string path;  // "step/forward/attention"
  uint64_t begin_ns = 0, end_ns = 0;
};

// One kernel execution on the device clock (ns, same timebase as HostRange).
struct KernelRecord {
  uint32_t correlation_id = 0;
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t stream_id = 0;
  std::string name;
};

// Per range path: what its kernels did.
struct RangeKernelStats {
  int64_t occurrences = 0;  // how many times the range was opened
  int64_t kernels = 0;      // kernels launched inside it
  uint64_t kernel_ns = 0;   // sum of kernel durations
  uint64_t busy_ns = 0;     // union of kernel intervals (concurrent kernels counted once)
  uint64_t first_start_ns = 0, last_end_ns = 0;  // device span of its kernels
};

struct JoinResult {
  std::map<std::string, RangeKernelStats> ranges;
  int64_t unattributed_kernels = 0;  // launched outside every range
  int64_t unmatched_kernels = 0;     // no launch record with its correlation id
};

// Joins `kernels` to `ranges` through `launch_ns` (correlation id -> host time of the
// launching runtime or driver API call). A launch exactly at a range boundary is inside.
JoinResult JoinKernelsToRanges(const std::vector<HostRange>& ranges,
                               const std::map<uint32_t, uint64_t>& launch_ns,
                               const std::vector<KernelRecord>& kernels);

// Returns the total length of the union of [start, end) intervals.
uint64_t UnionLength(std::vector<std::pair<uint64_t, uint64_t>> intervals);

}  // namespace headlab::measure
