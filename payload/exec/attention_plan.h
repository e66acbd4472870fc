// How one hybrid-head layer runs on the fast path (attention_cuda.h): which heads go to
// which backend, which projection rows are computed, and in what order the head outputs
// meet the output projection. Torch-free, so the planning is unit-tested on its own.
//
// A layer's heads are split into segments, in output order:
//   kSdpa        ordinary heads through PyTorch's scaled_dot_product_attention (its best
//                backend: FlashAttention or cuDNN), when the build has it and
//                train.attention = auto;
//   kFlashWindow local heads of one window W (AAH §5.8: keys q - W < k <= q) through
//                PyTorch's FlashAttention-2 with a left window, one segment per window,
//                when the build and device have it (PlanOptions::flash_window);
//   kKernel      local and streaming heads (and ordinary heads when SDPA is not used)
//                through the fused hybrid-head kernels (kernels/);
//   kFixedGemm   fixed heads (SAF eq. 3 compact or dense patterns) as a GEMM with the
//                layer's cached causal pattern P: O = P V, dV = P^T dO (SAF §3.3's
//                "dV = P^T dZ"), when the pattern cache fits (PlanOptions::fixed_gemm);
//   kFixedConv   compact fixed heads as a causal FFT convolution (fixed_conv.h: SAF eq. 3
//                factorises, O(T log T) instead of the GEMM's O(T^2)), when their patterns
//                are well enough conditioned (PlanOptions::fixed_conv);
//   kFixedKernel compact fixed heads through the fused kernels (the paper's in-register
//                reconstruction), with train.attention = fused or when the cache does not fit.
//
// PlanAttention applies the static rules (train.attention = fused forces the kernels;
// otherwise SDPA for ordinary heads, FlashAttention-2 for local heads, the GEMM for fixed
// heads, and one launch of the kernels for every head with scores where the split would
// make more than kMaxAttentionCalls attention calls). CandidatePlans lists every
// exact plan a layer could take, the static rule's first; train.attention = auto times them
// on the device and ChoosePlan keeps the static plan unless another is faster beyond the
// noise of the timings (attention_cuda.h, docs/DESIGN.md "Backend choice by measurement").
// Pruned heads have no segment: no Q, K, V rows and no output-projection columns.
//
// Projection rows (SAF §3.3: "our multi-head pretraining path omits replaced query and key
// projections"): Q and K rows only for heads that compute scores (kSdpa, kFlashWindow,
// kKernel), V rows for every head with an output. The packed projection is one matmul whose output
// columns are
//   [Q blocks (q_blocks) | K blocks (k_blocks) | V blocks (v_blocks)]
// each block head_dim wide; a segment reads its heads' blocks at qk_offset / v_offset.
//
// Grouped-query layers (kv_heads < heads) take one kKernel segment over all heads in their
// original order (the kernels map query head h to key/value group h / (heads / kv_heads)):
// Q rows of every head, K and V rows of every group (`grouped`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "payload/exec/head_state.h"

namespace headlab {

enum class SegmentKind { kSdpa, kFlashWindow, kKernel, kFixedGemm, kFixedConv, kFixedKernel };

// Returns "sdpa", "flash_window", "fused", "fixed_gemm", "fixed_conv" or "fixed_fused".
const char* SegmentKindName(SegmentKind k);

struct PlanSegment {
  SegmentKind kind = SegmentKind::kKernel;
  std::vector<int64_t> heads;  // original query-head numbers, in output order
  int64_t qk_offset = 0;       // first Q (and K) block of these heads; scoring segments only
  int64_t v_offset = 0;        // first V block
  int64_t window = 0;          // kFlashWindow: the heads' common window W
};

// What the planner may use; the caller knows the build, device and config.
struct PlanOptions {
  bool sdpa = false;          // scaled_dot_product_attention exists (LibTorch >= 2) and may be used
  bool kernel = false;        // the fused kernels are linked and may be used
  bool flash_window = false;  // FlashAttention-2 with a left window exists for these inputs
  bool fused_only = false;    // train.attention = fused: every head through the fused kernels
  bool fixed_gemm = false;    // the layer's fixed patterns fit the pattern cache
  bool fixed_conv = false;  // compact fixed heads as the convolution (their conditioning allows it)
  bool trainable_fixed = false;  // a fixed head has trainable alpha/rho (SAF App. C.3.2)
};

struct AttentionPlan {
  // Non-empty: the layer cannot take the fast path and runs the dense reference; why.
  std::string dense_reason;
  bool grouped = false;
  std::vector<PlanSegment> segments;
  // Row blocks (slots) of q_proj, k_proj, v_proj in packed order; o_proj column blocks
  // (slots) of output_heads.
  std::vector<int64_t> q_blocks, k_blocks, v_blocks, o_blocks;
  std::vector<int64_t> output_heads;  // original numbers, in output order

  // Returns true iff the packed Q, K, V blocks are every row of the three projections in
  // order (no row selection needed).
  bool AllRows(int64_t q_rows, int64_t kv_rows) const;
  // Returns true iff o_blocks is 0, 1, ..., n-1 for n o_proj column blocks.
  bool AllColumns(int64_t o_columns) const;
  // A one-line summary for logs and provenance, e.g. "sdpa[9] fixed_gemm[3]".
  std::string Label() const;
};

// The most attention calls (kSdpa, kFlashWindow and kKernel segments) a layer's static plan
// makes; beyond it, the heads with scores take one kKernel segment. Each call over a few
// heads fills a fraction of the device at batch 1, and the calls run one after another: on
// an H100 (the 1b preset's layer, B=1 H=16 d=96 T=4096 bf16, forward + backward,
// scripts/gpu/aah_layer_bench.py, docs/BENCHMARKS.md), four calls of 4 heads each
// (FlashAttention-2 at windows 512, 1024, 2048 and SDPA) ran at 0.42x one cuDNN call over
// all 16 heads, and the same heads in one launch of the kernels (d = 96 padded to 128) at
// 0.85x. Two calls are timed by the same bench.
constexpr size_t kMaxAttentionCalls = 2;

// Plans a layer of `states.size()` query heads and `kv_heads` groups whose projections hold
// the query heads `kept` and the groups `kept_kv` (original numbers, in slot order; fewer
// than all after physical pruning).
AttentionPlan PlanAttention(const std::vector<HeadState>& states, int64_t kv_heads,
                            const std::vector<int64_t>& kept, const std::vector<int64_t>& kept_kv,
                            const PlanOptions& options);

// Every distinct plan the layer may take with what `available` allows, for the measured
// choice. The first is the static rule's (SDPA for ordinary heads when available, the
// kernels for windowed ones, the GEMM for fixed heads when the cache fits): the incumbent
// that ChoosePlan keeps unless beaten. Then all heads through the fused kernels (when
// linked), and the fixed heads as the convolution or the fused kernels, as allowed. Plans
// with a dense_reason are left out; when none is left, the one element is PlanAttention's
// (with its reason). Trainable fixed heads, grouped-query layers and layers without fixed
// heads have one plan: the static one, which already sends windowed heads to the kernels
// and ordinary heads to SDPA (when available), whose FlashAttention/cuDNN backends the
// kernels do not beat on ordinary heads; a noisy timing must not pick them, and a method
// that moves windows every few updates (AAH) must not be re-timed for each new set.
std::vector<AttentionPlan> CandidatePlans(const std::vector<HeadState>& states, int64_t kv_heads,
                                          const std::vector<int64_t>& kept,
                                          const std::vector<int64_t>& kept_kv,
                                          const PlanOptions& available);

// One candidate's measured time (ms per forward, or forward + backward when training).
struct PlanTiming {
  std::string label;               // AttentionPlan::Label()
  double ms = 0;                   // the median of samples_ms
  std::vector<double> samples_ms;  // one per timed repetition
};

// Returns the median of `samples` (the mean of the middle two for an even count); 0 for none.
double MedianMs(std::vector<double> samples);

// The relative margin by which a challenger's median must beat the incumbent's.
constexpr double kPlanMargin = 0.03;

// A layer's measured choice for one shape, for logs and provenance.
struct PlanChoice {
  std::string shape;  // e.g. "B=8 T=4096 bf16 fwd+bwd"
  std::vector<PlanTiming> candidates;
  size_t chosen = 0;  // index into candidates
};

// Returns the index of the plan to run: 0 (the incumbent, CandidatePlans' static plan)
// unless a challenger is faster beyond the timings' noise: its median at least kPlanMargin
// below the incumbent's and its slowest sample below the incumbent's median. Of several
// such challengers, the lowest median (the first of equals: deterministic).
size_t ChoosePlan(const std::vector<PlanTiming>& timings);

// A one-line summary, e.g. "B=8 T=4096 bf16 fwd+bwd: sdpa[9] fixed_conv[3] 1.20 ms (chosen),
// sdpa[9] fixed_gemm[3] 1.41 ms, fused[9] fixed_fused[3] 1.80 ms".
std::string PlanChoiceSummary(const PlanChoice& choice);

}  // namespace headlab
