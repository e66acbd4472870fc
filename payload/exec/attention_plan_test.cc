#include "payload/exec/attention_plan.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

std::vector<HeadState> States(std::initializer_list<HeadMode> modes) {
  std::vector<HeadState> s;
  for (HeadMode m : modes) {
    HeadState h;
    h.mode = m;
    h.window = 4;
    h.recent = 4;
    s.push_back(h);
  }
  return s;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

PlanOptions Cuda() {
  PlanOptions o;
  o.sdpa = o.kernel = o.fixed_gemm = true;
  return o;
}

TEST_CASE("attention plan: SAF's layer computes no Q/K rows for fixed heads") {
  using M = HeadMode;
  auto states = States({M::kOrdinary, M::kFixed, M::kOrdinary, M::kFixed});
  AttentionPlan p = PlanAttention(states, 4, Iota(4), Iota(4), Cuda());
  REQUIRE(p.dense_reason.empty());
  REQUIRE(p.segments.size() == 2);
  CHECK(p.segments[0].kind == SegmentKind::kSdpa);
  CHECK(p.segments[0].heads == std::vector<int64_t>{0, 2});
  CHECK(p.segments[1].kind == SegmentKind::kFixedGemm);
  CHECK(p.segments[1].heads == std::vector<int64_t>{1, 3});
  CHECK(p.segments[1].v_offset == 2);
  CHECK(p.q_blocks == std::vector<int64_t>{0, 2});
  CHECK(p.k_blocks == std::vector<int64_t>{0, 2});
  CHECK(p.v_blocks == std::vector<int64_t>{0, 2, 1, 3});
  CHECK(p.o_blocks == std::vector<int64_t>{0, 2, 1, 3});
  CHECK_FALSE(p.AllRows(4, 4));
  CHECK_FALSE(p.AllColumns(4));
  CHECK(p.Label() == "sdpa[2] fixed_gemm[2]");
}

TEST_CASE("attention plan: an all-ordinary layer is one SDPA call over every row") {
  AttentionPlan p = PlanAttention(States({HeadMode::kOrdinary, HeadMode::kOrdinary}), 2, Iota(2),
                                  Iota(2), Cuda());
  CHECK(p.AllRows(2, 2));
  CHECK(p.AllColumns(2));
  CHECK(p.Label() == "sdpa[2]");
  PlanOptions fused = Cuda();
  fused.fused_only = true;
  CHECK(PlanAttention(States({HeadMode::kOrdinary, HeadMode::kFixed}), 2, Iota(2), Iota(2), fused)
            .Label() == "fused[1] fixed_fused[1]");
}

TEST_CASE("attention plan: AAH's local heads take FlashAttention-2, one segment per window") {
  using M = HeadMode;
  // Heads 0 and 3 at W = 512, head 2 at W = 1024, head 1 fixed: two attention calls.
  auto states = States({M::kLocal, M::kFixed, M::kLocal, M::kLocal});
  states[0].window = states[3].window = 512;
  states[2].window = 1024;
  PlanOptions o = Cuda();
  o.flash_window = true;
  AttentionPlan p = PlanAttention(states, 4, Iota(4), Iota(4), o);
  REQUIRE(p.dense_reason.empty());
  CHECK(p.Label() == "flash_window[2] flash_window[1] fixed_gemm[1]");
  REQUIRE(p.segments.size() == 3);
  CHECK(p.segments[0].heads == std::vector<int64_t>{0, 3});
  CHECK(p.segments[0].window == 512);
  CHECK(p.segments[0].qk_offset == 0);
  CHECK(p.segments[1].heads == std::vector<int64_t>{2});
  CHECK(p.segments[1].window == 1024);
  CHECK(p.segments[1].qk_offset == 2);
  CHECK(p.q_blocks == std::vector<int64_t>{0, 3, 2});  // the fixed head has no Q/K rows
  CHECK(p.v_blocks == std::vector<int64_t>{0, 3, 2, 1});
  CHECK(p.o_blocks == std::vector<int64_t>{0, 3, 2, 1});
  // train.attention = fused keeps every head on the kernels; without FlashAttention the
  // local heads take the kernels' segment.
  o.fused_only = true;
  CHECK(PlanAttention(states, 4, Iota(4), Iota(4), o).Label() == "fused[3] fixed_fused[1]");
  o.fused_only = o.flash_window = false;
  CHECK(PlanAttention(states, 4, Iota(4), Iota(4), o).Label() == "fused[3] fixed_gemm[1]");
}

TEST_CASE("attention plan: more than two attention calls become one launch of the kernels") {
  using M = HeadMode;
  // Heads 0 and 3 at W = 512, head 2 at W = 1024, head 4 streaming, head 1 ordinary: SDPA,
  // two FlashAttention-2 windows and the kernels would be four calls.
  auto states = States({M::kLocal, M::kOrdinary, M::kLocal, M::kLocal, M::kStreaming});
  states[0].window = states[3].window = 512;
  states[2].window = 1024;
  PlanOptions o = Cuda();
  o.flash_window = true;
  AttentionPlan p = PlanAttention(states, 5, Iota(5), Iota(5), o);
  REQUIRE(p.dense_reason.empty());
  CHECK(p.Label() == "fused[5]");
  REQUIRE(p.segments.size() == 1);
  CHECK(p.segments[0].heads == std::vector<int64_t>{0, 1, 2, 3, 4});  // original order
  CHECK(p.AllRows(5, 5));
  CHECK(p.AllColumns(5));
  // Three calls (SDPA and two windows) are one too many; two stay split.
  auto three = States({M::kLocal, M::kOrdinary, M::kLocal});
  three[0].window = 512;
  three[2].window = 1024;
  CHECK(PlanAttention(three, 3, Iota(3), Iota(3), o).Label() == "fused[3]");
  three[2].window = 512;
  CHECK(PlanAttention(three, 3, Iota(3), Iota(3), o).Label() == "sdpa[1] flash_window[2]");
  // Without the kernels the calls stay split: nothing else takes every head.
  three[2].window = 1024;
  o.kernel = false;
  CHECK(PlanAttention(three, 3, Iota(3), Iota(3), o).Label() ==
        "sdpa[1] flash_window[1] flash_window[1]");
}

TEST_CASE("attention plan: pruned and removed heads have no rows and no output columns") {
  using M = HeadMode;
  // Head 1 removed physically (projections hold heads 0, 2, 3), head 3 pruned in place.
  auto states = States({M::kLocal, M::kPruned, M::kOrdinary, M::kPruned});
  AttentionPlan p = PlanAttention(states, 4, {0, 2, 3}, {0, 2, 3}, Cuda());
  CHECK(p.Label() == "sdpa[1] fused[1]");
  CHECK(p.q_blocks == std::vector<int64_t>{1, 0});  // slots of heads 2 and 0
  CHECK(p.o_blocks == std::vector<int64_t>{1, 0});
  CHECK(p.output_heads == std::vector<int64_t>{2, 0});
}

TEST_CASE("attention plan: what sends a layer to the dense reference") {
  using M = HeadMode;
  PlanOptions o = Cuda();
  o.trainable_fixed = true;
  CHECK(PlanAttention(States({M::kFixed}), 1, Iota(1), Iota(1), o).dense_reason.find("trainable") ==
        0);
  PlanOptions no_kernel = Cuda();
  no_kernel.kernel = false;
  CHECK(PlanAttention(States({M::kLocal}), 1, Iota(1), Iota(1), no_kernel).dense_reason ==
        "local head 0 needs the fused kernels, which this build lacks");
  // Fixed heads beyond the pattern cache's budget take the kernels; dense patterns cannot.
  PlanOptions full_cache = Cuda();
  full_cache.fixed_gemm = false;
  CHECK(PlanAttention(States({M::kFixed}), 1, Iota(1), Iota(1), full_cache).Label() ==
        "fixed_fused[1]");
  auto dense_fixed = States({M::kFixed});
  dense_fixed[0].dense = true;
  CHECK(PlanAttention(dense_fixed, 1, Iota(1), Iota(1), full_cache).dense_reason ==
        "dense fixed pattern of head 0 does not fit the fixed-pattern cache");
  // The kernels evict per token; a chunk-evicting streaming head takes the reference.
  auto chunked = States({M::kOrdinary, M::kStreaming});
  chunked[1].recent = 4;
  chunked[1].chunk = 8;
  CHECK(PlanAttention(chunked, 2, Iota(2), Iota(2), Cuda()).dense_reason ==
        "per-chunk streaming eviction (head 1) has no fused kernel");
  chunked[1].chunk = 0;
  CHECK(PlanAttention(chunked, 2, Iota(2), Iota(2), Cuda()).dense_reason.empty());
  // Grouped-query layers run every head through the kernels, or not at all.
  AttentionPlan g = PlanAttention(States({M::kOrdinary, M::kFixed, M::kOrdinary, M::kPruned}), 2,
                                  Iota(4), Iota(2), Cuda());
  CHECK(g.grouped);
  CHECK(g.Label() == "fused[4]");
  CHECK(g.q_blocks == Iota(4));
  CHECK(g.k_blocks == Iota(2));
  CHECK(PlanAttention(States({M::kOrdinary, M::kPruned}), 1, {0}, {0}, Cuda()).dense_reason ==
        "grouped-query layer with physically removed heads");
}

TEST_CASE(
    "attention plan: the convolution form takes compact fixed heads, dense ones keep the GEMM") {
  using M = HeadMode;
  auto states = States({M::kOrdinary, M::kFixed, M::kLocal, M::kFixed});
  states[3].dense = true;
  PlanOptions o = Cuda();
  o.fixed_conv = true;
  AttentionPlan p = PlanAttention(states, 4, Iota(4), Iota(4), o);
  REQUIRE(p.dense_reason.empty());
  CHECK(p.Label() == "sdpa[1] fused[1] fixed_gemm[1] fixed_conv[1]");
  CHECK(p.segments[3].heads == std::vector<int64_t>{1});
  CHECK(p.v_blocks == std::vector<int64_t>{0, 2, 3, 1});  // output order: the segments'
  CHECK(p.q_blocks == std::vector<int64_t>{0, 2});
}

TEST_CASE("attention plan: the candidates of the measured choice") {
  using M = HeadMode;
  auto labels = [](const std::vector<AttentionPlan>& plans) {
    std::vector<std::string> out;
    for (const AttentionPlan& p : plans) out.push_back(p.Label());
    return out;
  };
  auto states = States({M::kOrdinary, M::kFixed, M::kStreaming, M::kFixed});
  PlanOptions o = Cuda();
  o.fixed_conv = true;
  // The static rule's plan first: the incumbent of the measured choice.
  CHECK(labels(CandidatePlans(states, 4, Iota(4), Iota(4), o)) ==
        std::vector<std::string>{"sdpa[1] fused[1] fixed_gemm[2]", "fused[2] fixed_fused[2]",
                                 "sdpa[1] fused[1] fixed_conv[2]",
                                 "sdpa[1] fused[1] fixed_fused[2]"});
  // Without the cache and the conditioning: the kernels' two forms only.
  o.fixed_conv = o.fixed_gemm = false;
  CHECK(labels(CandidatePlans(states, 4, Iota(4), Iota(4), o)) ==
        std::vector<std::string>{"sdpa[1] fused[1] fixed_fused[2]", "fused[2] fixed_fused[2]"});
  // No fixed heads: the static plan alone, nothing to time (ordinary heads through SDPA,
  // windowed ones through the kernels). Without SDPA, the kernels alone.
  auto plain = States({M::kOrdinary, M::kOrdinary, M::kLocal});
  CHECK(labels(CandidatePlans(plain, 3, Iota(3), Iota(3), Cuda())) ==
        std::vector<std::string>{"sdpa[2] fused[1]"});
  auto ordinary = States({M::kOrdinary, M::kPruned, M::kOrdinary});
  CHECK(labels(CandidatePlans(ordinary, 3, Iota(3), Iota(3), Cuda())) ==
        std::vector<std::string>{"sdpa[2]"});
  PlanOptions no_sdpa = Cuda();
  no_sdpa.sdpa = false;
  CHECK(labels(CandidatePlans(ordinary, 3, Iota(3), Iota(3), no_sdpa)) ==
        std::vector<std::string>{"fused[2]"});
  // A dense fixed pattern rules the all-fused form out.
  states[1].dense = true;
  CHECK(labels(CandidatePlans(states, 4, Iota(4), Iota(4), Cuda())) ==
        std::vector<std::string>{"sdpa[1] fused[1] fixed_gemm[2]"});
  // Grouped-query layers and trainable alpha/rho: the one static plan.
  CHECK(labels(CandidatePlans(plain, 1, Iota(3), Iota(1), Cuda())) ==
        std::vector<std::string>{"fused[3]"});
  PlanOptions t = Cuda();
  t.trainable_fixed = true;
  auto c = CandidatePlans(plain, 3, Iota(3), Iota(3), t);
  REQUIRE(c.size() == 1);
  CHECK_FALSE(c[0].dense_reason.empty());
}

TEST_CASE("attention plan: the median of the repetitions") {
  CHECK(MedianMs({}) == 0);
  CHECK(MedianMs({3.0}) == 3.0);
  CHECK(MedianMs({5.0, 1.0, 3.0}) == 3.0);
  CHECK(MedianMs({4.0, 1.0, 3.0, 2.0}) == 2.5);
}

TEST_CASE("attention plan: the static plan stays unless a challenger wins beyond the noise") {
  auto timing = [](const char* label, std::vector<double> samples) {
    return PlanTiming{label, MedianMs(samples), samples};
  };
  // A clear winner: median 20% below, every sample below the incumbent's median.
  CHECK(ChoosePlan({timing("static", {1.0, 1.0, 1.01}), timing("b", {0.8, 0.79, 0.81})}) == 1);
  // Within the margin (2% faster): the incumbent stays.
  CHECK(ChoosePlan({timing("static", {1.0, 1.0, 1.0}), timing("b", {0.98, 0.98, 0.98})}) == 0);
  // Faster median but a sample slower than the incumbent's median: noise, the incumbent stays.
  CHECK(ChoosePlan({timing("static", {1.0, 1.0, 1.0}), timing("b", {0.5, 0.5, 1.2})}) == 0);
  // Of two winners the lower median; the first of equals.
  CHECK(ChoosePlan({timing("static", {2.0}), timing("b", {1.5}), timing("c", {1.0}),
                    timing("d", {1.0})}) == 2);
  CHECK(ChoosePlan({timing("static", {2.0})}) == 0);
  CHECK(ChoosePlan({}) == 0);
}

TEST_CASE("attention plan: the summary lists every candidate's median and the choice") {
  PlanChoice c;
  c.shape = "B=2 T=8 fp32 fwd";
  c.candidates = {{"a", 2.0, {2.0}}, {"b", 1.0, {1.0}}, {"c", 1.0, {1.0}}};
  c.chosen = ChoosePlan(c.candidates);
  CHECK(c.chosen == 1);
  CHECK(PlanChoiceSummary(c) == "B=2 T=8 fp32 fwd: a 2.000 ms, b 1.000 ms (chosen), c 1.000 ms");
}

}  // namespace
}  // namespace headlab
