// Planning of a hybrid-head layer's fast path.
#include "payload/exec/attention_plan.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace headlab {
namespace {

// Returns the position of `h` in `slots`, or -1.
int64_t SlotOf(const std::vector<int64_t>& slots, int64_t h) {
  auto it = std::find(slots.begin(), slots.end(), h);
  return it == slots.end() ? -1 : int64_t(it - slots.begin());
}

bool IsIota(const std::vector<int64_t>& v, size_t n) {
  if (v.size() != n) return false;
  for (size_t i = 0; i < n; ++i)
    if (v[i] != int64_t(i)) return false;
  return true;
}

AttentionPlan Dense(const std::string& why) {
  AttentionPlan p;
  p.dense_reason = why;
  return p;
}

// Grouped-query layers: one kernel segment over every head, in original order.
AttentionPlan PlanGrouped(const std::vector<HeadState>& states, int64_t kv_heads,
                          const std::vector<int64_t>& kept, const std::vector<int64_t>& kept_kv,
                          const PlanOptions& o) {
  const int64_t H = int64_t(states.size());
  if (!o.kernel)
    return Dense("grouped-query layer needs the fused kernels, which this build lacks");
  if (int64_t(kept.size()) != H || int64_t(kept_kv.size()) != kv_heads)
    return Dense("grouped-query layer with physically removed heads");
  for (int64_t h = 0; h < H; ++h)
    if (states[size_t(h)].mode == HeadMode::kFixed && states[size_t(h)].dense)
      return Dense("grouped-query layer with a dense fixed pattern (head " + std::to_string(h) +
                   ")");
  AttentionPlan p;
  p.grouped = true;
  PlanSegment s;
  s.kind = SegmentKind::kKernel;
  for (int64_t h = 0; h < H; ++h) {
    s.heads.push_back(h);
    p.q_blocks.push_back(h);
    p.o_blocks.push_back(h);
    p.output_heads.push_back(h);
  }
  for (int64_t g = 0; g < kv_heads; ++g) {
    p.k_blocks.push_back(g);
    p.v_blocks.push_back(g);
  }
  p.segments.push_back(s);
  return p;
}

}  // namespace

const char* SegmentKindName(SegmentKind k) {
  switch (k) {
    case SegmentKind::kSdpa:
      return "sdpa";
    case SegmentKind::kFlashWindow:
      return "flash_window";
    case SegmentKind::kKernel:
      return "fused";
    case SegmentKind::kFixedGemm:
      return "fixed_gemm";
    case SegmentKind::kFixedConv:
      return "fixed_conv";
    case SegmentKind::kFixedKernel:
      return "fixed_fused";
  }
  return "?";
}

bool AttentionPlan::AllRows(int64_t q_rows, int64_t kv_rows) const {
  return IsIota(q_blocks, size_t(q_rows)) && IsIota(k_blocks, size_t(kv_rows)) &&
         IsIota(v_blocks, size_t(kv_rows));
}

bool AttentionPlan::AllColumns(int64_t o_columns) const {
  return IsIota(o_blocks, size_t(o_columns));
}

std::string AttentionPlan::Label() const {
  if (!dense_reason.empty()) return "dense_reference (" + dense_reason + ")";
  std::string out;
  for (const PlanSegment& s : segments) {
    if (!out.empty()) out += " ";
    out += std::string(SegmentKindName(s.kind)) + "[" + std::to_string(s.heads.size()) + "]";
  }
  return out.empty() ? "none (every head pruned)" : out;
}

AttentionPlan PlanAttention(const std::vector<HeadState>& states, int64_t kv_heads,
                            const std::vector<int64_t>& kept, const std::vector<int64_t>& kept_kv,
                            const PlanOptions& o) {
  const int64_t H = int64_t(states.size());
  if (o.trainable_fixed)
    return Dense("trainable alpha/rho (SAF App. C.3.2) need gradients through eq. 3's normaliser");
  // The fused kernels know token eviction only (kernels/hybrid_attention.h).
  for (int64_t h = 0; h < H; ++h)
    if (states[size_t(h)].mode == HeadMode::kStreaming && states[size_t(h)].chunk > 0)
      return Dense("per-chunk streaming eviction (head " + std::to_string(h) +
                   ") has no fused kernel");
  if (kv_heads != H) return PlanGrouped(states, kv_heads, kept, kept_kv, o);

  // Multi-head layers: sort the heads with outputs into the segments.
  std::vector<int64_t> sdpa, kernel, fixed_gemm, fixed_conv, fixed_kernel;
  std::vector<int64_t> scoring;  // every head with scores, in original order
  std::map<int64_t, std::vector<int64_t>> flash_window;  // window -> its local heads
  for (int64_t h = 0; h < H; ++h) {
    const HeadState& s = states[size_t(h)];
    if (s.mode == HeadMode::kPruned) continue;
    if (SlotOf(kept, h) < 0) continue;  // removed physically (its state is pruned anyway)
    if (FormsScores(s.mode)) scoring.push_back(h);
    if (s.mode == HeadMode::kOrdinary && o.sdpa && !o.fused_only) {
      sdpa.push_back(h);
    } else if (s.mode == HeadMode::kLocal && o.flash_window && !o.fused_only) {
      flash_window[s.window].push_back(h);
    } else if (FormsScores(s.mode)) {
      if (!o.kernel)
        return Dense(std::string(HeadModeName(s.mode)) + " head " + std::to_string(h) +
                     " needs the fused kernels, which this build lacks");
      kernel.push_back(h);
    } else if (o.fixed_conv && !o.fused_only && !s.dense) {  // fixed from here on
      fixed_conv.push_back(h);
    } else if (o.fixed_gemm && !o.fused_only) {
      fixed_gemm.push_back(h);
    } else if (s.dense) {
      return Dense("dense fixed pattern of head " + std::to_string(h) +
                   (o.fused_only
                        ? " under train.attention = fused (the kernels take compact patterns)"
                        : " does not fit the fixed-pattern cache"));
    } else if (o.kernel) {
      fixed_kernel.push_back(h);
    } else {
      return Dense("fixed head " + std::to_string(h) +
                   " needs the fused kernels or the pattern cache");
    }
  }

  // More attention calls than kMaxAttentionCalls (AAH's mixed windows: SDPA for the full
  // heads, one FlashAttention-2 call per window, the kernels for the rest): every head with
  // scores goes to one launch of the fused kernels instead.
  const size_t calls = size_t(!sdpa.empty()) + flash_window.size() + size_t(!kernel.empty());
  if (calls > kMaxAttentionCalls && o.kernel) {
    sdpa.clear();
    flash_window.clear();
    kernel = scoring;
  }

  AttentionPlan p;
  int64_t qk = 0, v = 0;
  auto add = [&](SegmentKind kind, const std::vector<int64_t>& heads, int64_t window = 0) {
    if (heads.empty()) return;
    PlanSegment seg;
    seg.kind = kind;
    seg.heads = heads;
    seg.v_offset = v;
    seg.window = window;
    const bool scores = kind == SegmentKind::kSdpa || kind == SegmentKind::kFlashWindow ||
                        kind == SegmentKind::kKernel;
    if (scores) seg.qk_offset = qk;
    for (int64_t h : heads) {
      if (scores) {
        p.q_blocks.push_back(SlotOf(kept, h));
        p.k_blocks.push_back(SlotOf(kept_kv, h));
        ++qk;
      }
      p.v_blocks.push_back(SlotOf(kept_kv, h));
      p.o_blocks.push_back(SlotOf(kept, h));
      p.output_heads.push_back(h);
      ++v;
    }
    p.segments.push_back(seg);
  };
  add(SegmentKind::kSdpa, sdpa);
  for (const auto& [window, heads] : flash_window) add(SegmentKind::kFlashWindow, heads, window);
  add(SegmentKind::kKernel, kernel);
  add(SegmentKind::kFixedGemm, fixed_gemm);
  add(SegmentKind::kFixedConv, fixed_conv);
  add(SegmentKind::kFixedKernel, fixed_kernel);
  return p;
}

std::vector<AttentionPlan> CandidatePlans(const std::vector<HeadState>& states, int64_t kv_heads,
                                          const std::vector<int64_t>& kept,
                                          const std::vector<int64_t>& kept_kv,
                                          const PlanOptions& available) {
  PlanOptions base = available;  // the static rule of train.attention = auto
  base.fused_only = false;
  base.fixed_conv = false;
  AttentionPlan incumbent = PlanAttention(states, kv_heads, kept, kept_kv, base);
  if (available.trainable_fixed || kv_heads != int64_t(states.size())) return {incumbent};
  bool fixed = false;
  for (const PlanSegment& s : incumbent.segments)
    fixed = fixed || s.kind == SegmentKind::kFixedGemm || s.kind == SegmentKind::kFixedKernel;
  if (incumbent.dense_reason.empty() && !fixed) return {incumbent};

  std::vector<PlanOptions> variants;
  if (available.kernel) {  // the SAF paper's single-kernel form
    PlanOptions o = base;
    o.fused_only = true;
    variants.push_back(o);
  }
  if (available.fixed_conv) {
    PlanOptions o = base;
    o.fixed_conv = true;
    variants.push_back(o);
  }
  PlanOptions fused_fixed = base;
  fused_fixed.fixed_gemm = false;
  variants.push_back(fused_fixed);

  std::vector<AttentionPlan> out;
  if (incumbent.dense_reason.empty()) out.push_back(incumbent);
  for (const PlanOptions& o : variants) {
    AttentionPlan p = PlanAttention(states, kv_heads, kept, kept_kv, o);
    if (!p.dense_reason.empty()) continue;
    bool seen = false;
    for (const AttentionPlan& q : out) seen = seen || q.Label() == p.Label();
    if (!seen) out.push_back(std::move(p));
  }
  if (out.empty()) out.push_back(std::move(incumbent));
  return out;
}

double MedianMs(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

size_t ChoosePlan(const std::vector<PlanTiming>& timings) {
  size_t best = 0;
  if (timings.empty()) return best;
  const double incumbent = timings[0].ms;
  for (size_t i = 1; i < timings.size(); ++i) {
    const PlanTiming& t = timings[i];
    const double slowest =
        t.samples_ms.empty() ? t.ms : *std::max_element(t.samples_ms.begin(), t.samples_ms.end());
    const bool beats = t.ms <= incumbent * (1 - kPlanMargin) && slowest < incumbent;
    if (beats && (best == 0 || t.ms < timings[best].ms)) best = i;
  }
  return best;
}

std::string PlanChoiceSummary(const PlanChoice& choice) {
  std::string out = choice.shape + ":";
  for (size_t i = 0; i < choice.candidates.size(); ++i) {
    char ms[32];
    std::snprintf(ms, sizeof ms, " %.3f ms", choice.candidates[i].ms);
    out += (i ? ", " : " ") + choice.candidates[i].label + ms +
           (i == choice.chosen ? " (chosen)" : "");
  }
  return out;
}

}  // namespace headlab
