// The interval join of kernel records to host ranges.
#include "payload/measure/range_join.h"

#include <algorithm>

namespace headlab::measure {

uint64_t UnionLength(std::vector<std::pair<uint64_t, uint64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  uint64_t total = 0, cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& [s, e] : intervals) {
    if (e <= s) continue;
    if (!open || s > cur_end) {
      if (open) total += cur_end - cur_start;
      cur_start = s;
      cur_end = e;
      open = true;
    } else {
      cur_end = std::max(cur_end, e);
    }
  }
  if (open) total += cur_end - cur_start;
  return total;
}

JoinResult JoinKernelsToRanges(const std::vector<HostRange>& ranges,
                               const std::map<uint32_t, uint64_t>& launch_ns,
                               const std::vector<KernelRecord>& kernels) {
  JoinResult out;
  for (const HostRange& r : ranges) out.ranges[r.path].occurrences++;
  // Ranges are few (tens to hundreds per step): a linear scan per kernel is cheap enough
  // and keeps overlapping occurrences of one path (e.g. per-layer) simple.
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> intervals;
  for (const KernelRecord& k : kernels) {
    auto launch = launch_ns.find(k.correlation_id);
    if (launch == launch_ns.end()) {
      out.unmatched_kernels++;
      continue;
    }
    std::vector<const std::string*> hits;
    for (const HostRange& r : ranges) {
      if (launch->second < r.begin_ns || launch->second > r.end_ns) continue;
      bool seen = false;  // one path counts a kernel once even if occurrences overlap
      for (const std::string* h : hits) seen = seen || *h == r.path;
      if (!seen) hits.push_back(&r.path);
    }
    if (hits.empty()) out.unattributed_kernels++;
    for (const std::string* path : hits) {
      RangeKernelStats& s = out.ranges[*path];
      if (s.kernels == 0 || k.start_ns < s.first_start_ns) s.first_start_ns = k.start_ns;
      s.last_end_ns = std::max(s.last_end_ns, k.end_ns);
      s.kernels++;
      s.kernel_ns += k.end_ns > k.start_ns ? k.end_ns - k.start_ns : 0;
      intervals[*path].emplace_back(k.start_ns, k.end_ns);
    }
  }
  for (auto& [path, iv] : intervals) out.ranges[path].busy_ns = UnionLength(std::move(iv));
  return out;
}

}  // namespace headlab::measure
