// The range names of the flops run kind's attention layers and which range paths count as
// a layer's attention, its projections and its core (AAH §5.10: a window saving can only
// show in the core; the Q/K/V and output projections cost the same at any window).
// Torch-free, so the accounting is tested without a GPU.
//
// A hybrid-head layer's forward is the range "attention" (per layer "attention/L<k>" with
// flops.per_layer = 1), and inside it every projection GEMM is the range "proj": paths
// "<top>/.../attention/proj" or "<top>/.../attention/L<k>/proj". The core is the rest:
// attention - projections (scores, masks, softmax, P V; fixed heads' P V).
#pragma once

#include <map>
#include <string>

namespace headlab::measure {

inline constexpr const char* kAttentionRange = "attention";
inline constexpr const char* kProjectionRange = "proj";

// True iff `path` is a layer's whole attention range (not its per-layer child, not a
// projection) under the top-level range `prefix` ("step" or "forward"), outside a method
// hook's own work ("/method/": e.g. AAH's controller observation counts in flops.method).
bool IsAttentionPath(const std::string& path, const std::string& prefix);
// True iff `path` is the projections of an attention range under `prefix` (same rules).
bool IsProjectionPath(const std::string& path, const std::string& prefix);

// A quantity summed over a top-level range's attention ranges, split in two.
struct AttentionSplit {
  double attention = 0;   // the layers' whole attention
  double projection = 0;  // their Q/K/V and output projections
  double core() const { return attention - projection; }
};
// Sums `by_path` (e.g. FLOPs, kernel ms per range path) over the attention and projection
// paths under `prefix`.
AttentionSplit SplitAttention(const std::map<std::string, double>& by_path,
                              const std::string& prefix);

}  // namespace headlab::measure
