#include "payload/decode/decoder.h"

#include "payload/decode/decode_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::decode {
namespace {

TEST_CASE("decode: ordinary heads, step-by-step logits equal the full forward") {
  for (const char* pos : {"learned", "rope"}) {
    for (int64_t kv : {4, 2}) {
      torch::manual_seed(21);
      Gpt model(TinyDecoderConfig(pos, 4, kv));
      torch::NoGradGuard no_grad;
      torch::Tensor idx = torch::randint(0, 32, {2, 24}, torch::kLong);
      torch::Tensor full = model->forward(idx);
      auto d = MakeDecoder(model);
      CHECK(torch::allclose(DecodeAll(*d, idx), full, 1e-4, 1e-5));
      CHECK(d->position() == 24);
      CHECK(d->KvBytes() == 2 /*layers*/ * 2 /*K,V*/ * 2 * kv * 24 * 8 * 4);
      // Chunked prefill (chunks of 5, the last one short) gives the same logits.
      DecoderOptions o;
      o.prefill_chunk = 5;
      auto p = MakeDecoder(model, o);
      CHECK(torch::allclose(p->Prefill(idx), full, 1e-4, 1e-5));
    }
  }
}

// A head sees key position k from query position q (the head states' definitions, restated
// here: AAH §5.8 local, AoH §5 streaming).
bool SeesKey(const HeadState& s, int64_t q, int64_t k) {
  if (k > q) return false;
  if (s.mode == HeadMode::kLocal) return q - k < s.window;
  if (s.mode == HeadMode::kStreaming) return k < s.sink || q - k < s.recent;
  return s.mode == HeadMode::kOrdinary;
}

// Segments for the chunk-form tests: a full one of `entries` positions; a bounded one
// holding `positions`; runs of positions [a, b) and their concatenation.
KvSegment FullSegment(int64_t entries) {
  KvSegment s;
  s.entries = entries;
  return s;
}
KvSegment BoundedSegment(std::vector<int64_t> positions) {
  KvSegment s;
  s.bounded = true;
  s.positions = std::move(positions);
  s.entries = int64_t(s.positions.size());
  return s;
}
std::vector<int64_t> Run(int64_t a, int64_t b) {
  std::vector<int64_t> p;
  for (int64_t x = a; x < b; ++x) p.push_back(x);
  return p;
}
std::vector<int64_t> Join(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Head states of the chunk-form tests, and a case: a chunk of T queries at positions
// [P, P + T) over `seg`, and whether the form holds.
const HeadState ordinary{}, local5{HeadMode::kLocal, 5}, stream{HeadMode::kStreaming, 0, 2, 4},
    stream0{HeadMode::kStreaming, 0, 0, 4}, pruned{HeadMode::kPruned};
struct FormCase {
  const char* name;
  HeadState state;
  KvSegment seg;
  int64_t P, T;
  bool ok;
};

TEST_CASE("decode: a prefill chunk's flash form sees exactly the keys the heads' masks allow") {
  const std::vector<FormCase> cases = {
      {"ordinary, first chunk", ordinary, FullSegment(8), 0, 8, true},
      {"ordinary, third chunk", ordinary, FullSegment(24), 16, 8, true},
      {"local over a full segment", local5, FullSegment(24), 16, 8, true},
      {"local, bounded, oldest needed key kept", local5, BoundedSegment(Run(12, 24)), 16, 8, true},
      {"local, bounded, oldest needed key missing", local5, BoundedSegment(Run(13, 24)), 16, 8,
       false},
      {"streaming, first chunk (windows reach the sink)", stream, FullSegment(8), 0, 8, false},
      {"streaming, after eviction", stream, BoundedSegment(Join(Run(0, 2), Run(5, 16))), 8, 8,
       true},
      {"streaming, evicted keys awaiting compaction", stream,
       BoundedSegment(Join(Run(0, 2), Run(3, 16))), 8, 8, true},
      {"streaming, lead past the sink", stream, BoundedSegment(Join(Run(0, 3), Run(5, 16))), 8, 8,
       true},
      {"streaming, nothing evicted yet", stream, BoundedSegment(Run(0, 16)), 8, 8, true},
      {"streaming, sink 0", stream0, BoundedSegment(Run(5, 16)), 8, 8, true},
      {"streaming, a window key missing", stream, BoundedSegment(Join(Run(0, 2), Run(6, 16))), 8, 8,
       false},
      {"streaming, sink not held", stream, BoundedSegment(Join(Run(0, 1), Run(5, 16))), 8, 8,
       false},
      {"chunk's keys not last", ordinary, FullSegment(25), 16, 8, false},
      {"pruned", pruned, FullSegment(24), 16, 8, false},
  };
  for (const FormCase& c : cases) {
    INFO(c.name);
    const ChunkForm f = ChunkFormOf(c.state, c.seg, c.P, c.T);
    REQUIRE(f.flash == c.ok);
    if (!f.flash) continue;
    for (int64_t i = 0; i < c.T; ++i)
      for (int64_t slot = 0; slot < c.seg.entries; ++slot) {
        const int64_t pos = c.seg.bounded ? c.seg.positions[size_t(slot)] : slot;
        // The window call: lower-right causal over slots [w0, w1), window_size_left recent - 1.
        const int64_t idx = slot - f.w0, own = i + (f.w1 - f.w0) - c.T;
        const bool window =
            slot >= f.w0 && slot < f.w1 && idx <= own && (f.recent == 0 || idx > own - f.recent);
        const bool sink = slot < f.sink;  // the sink call: every query sees slots [0, sink)
        INFO("query " << c.P + i << ", slot " << slot << " (position " << pos << ")");
        CHECK(!(window && sink));  // the merge counts a key once
        CHECK((window || sink) == SeesKey(c.state, c.P + i, pos));
      }
  }
}

// The fused kernels apply a head's own rule at virtual positions (slot s at s, the chunk's
// queries at the last T of `length`); that must see, slot by slot, exactly what the head
// sees at the real positions.
TEST_CASE("decode: a prefill chunk's fused form sees exactly the keys the heads' masks allow") {
  const std::vector<FormCase> cases = {
      {"ordinary, first chunk", ordinary, FullSegment(8), 0, 8, true},
      {"ordinary, third chunk (padding rows: every earlier key)", ordinary, FullSegment(24), 16, 8,
       true},
      {"local over a full segment", local5, FullSegment(24), 16, 8, true},
      {"local, bounded, oldest needed key kept", local5, BoundedSegment(Run(12, 24)), 16, 8, true},
      {"local, bounded, oldest needed key missing", local5, BoundedSegment(Run(13, 24)), 16, 8,
       false},
      {"streaming, first chunk (windows reach the sink)", stream, BoundedSegment(Run(0, 8)), 0, 8,
       true},
      {"streaming, after eviction", stream, BoundedSegment(Join(Run(0, 2), Run(5, 16))), 8, 8,
       true},
      {"streaming, evicted keys awaiting compaction", stream,
       BoundedSegment(Join(Run(0, 2), Run(3, 16))), 8, 8, true},
      {"streaming, lead past the sink", stream, BoundedSegment(Join(Run(0, 3), Run(5, 16))), 8, 8,
       true},
      {"streaming, nothing evicted yet", stream, BoundedSegment(Run(0, 16)), 8, 8, true},
      {"streaming, sink 0", stream0, BoundedSegment(Run(5, 16)), 8, 8, true},
      {"streaming, a window key missing", stream, BoundedSegment(Join(Run(0, 2), Run(6, 16))), 8, 8,
       false},
      {"streaming, sink not held", stream, BoundedSegment(Join(Run(0, 1), Run(5, 16))), 8, 8,
       false},
      {"ordinary over a run not from 0", ordinary, BoundedSegment(Join(Run(0, 2), Run(5, 16))), 8,
       8, false},
      {"chunk's keys not last", ordinary, FullSegment(25), 16, 8, false},
      {"pruned", pruned, FullSegment(24), 16, 8, false},
  };
  for (const FormCase& c : cases) {
    INFO(c.name);
    const ChunkForm f = ChunkFormOf(c.state, c.seg, c.P, c.T);
    REQUIRE(f.fused == c.ok);
    if (!f.fused) continue;
    REQUIRE(f.w1 == c.seg.entries);
    for (int64_t i = 0; i < c.T; ++i)
      for (int64_t slot = 0; slot < c.seg.entries; ++slot) {
        const int64_t pos = c.seg.bounded ? c.seg.positions[size_t(slot)] : slot;
        INFO("query " << c.P + i << ", slot " << slot << " (position " << pos << ")");
        CHECK(SeesKey(c.state, f.w1 - c.T + i, slot) == SeesKey(c.state, c.P + i, pos));
      }
  }
}

TEST_CASE("decode: the captured step's compute-dtype weights give the casts' numbers") {
  ModelConfig c = TinyDecoderConfig("learned");
  c.attn_bias = c.out_bias = c.mlp_bias = true;
  torch::manual_seed(23);
  Gpt model(c);
  torch::NoGradGuard no_grad;
  // fp32: the model computes in its parameters' dtype; nothing to copy.
  ComputeWeights none = ComputeWeights::Make(*model);
  CHECK(none.params.empty());
  CHECK_FALSE(none.head.defined());
  CHECK(none.Current(*model));

  model->SetPrecision(Precision::kBf16);  // CPU autocast
  torch::Tensor idx = torch::randint(0, 32, {2, 24}, torch::kLong);
  torch::Tensor cast = model->forward(idx);  // autocast casts every weight itself
  ComputeWeights w = ComputeWeights::Make(*model);
  // 2 layers x (q, k, v, o, fc, proj) x (weight, bias); the tied head apart.
  REQUIRE(w.params.size() == 24);
  CHECK(w.head.scalar_type() == torch::kBFloat16);
  CHECK(torch::equal(w.head, model->wte->weight.to(torch::kBFloat16)));
  const void* q_weight = model->attention(0)->q_proj->weight.data_ptr();
  {
    ComputeWeightsIn in(w);
    CHECK(model->attention(0)->q_proj->weight.scalar_type() == torch::kBFloat16);
    CHECK(model->attention(1)->o_proj->bias.scalar_type() == torch::kBFloat16);
    CHECK(model->wte->weight.scalar_type() == torch::kFloat);  // the embedding keeps fp32
    CHECK(torch::equal(model->forward(idx), cast));
  }
  {  // the output head's copy gives the logits autocast's cast of the tied head gives
    AutocastScope autocast(Precision::kBf16, idx.device());
    const torch::Tensor x = torch::randn({2, 3, c.width});
    const torch::Tensor with_copy = model->Logits(x, w.head);
    CHECK(with_copy.scalar_type() == torch::kFloat);
    CHECK(torch::equal(with_copy, model->Logits(x)));
  }
  // One GEMM for a layer's q, k and v: HybridAttention's Queries, Keys and Values side by side.
  {
    AutocastScope autocast(Precision::kBf16, idx.device());
    const torch::Tensor x = torch::randn({2, 5, c.width}).to(torch::kBFloat16);
    HybridAttention& a = model->attention(1);
    const torch::Tensor qkv = w.Qkv(1, x);
    REQUIRE(qkv.sizes() == torch::IntArrayRef({2, 4 + 4 + 4, 5, 8}));
    CHECK(torch::allclose(qkv.narrow(1, 0, 4).to(torch::kFloat), a->Queries(x).to(torch::kFloat),
                          1e-2, 1e-2));
    CHECK(torch::allclose(qkv.narrow(1, 4, 4).to(torch::kFloat), a->Keys(x).to(torch::kFloat), 1e-2,
                          1e-2));
    CHECK(torch::allclose(qkv.narrow(1, 8, 4).to(torch::kFloat), a->Values(x).to(torch::kFloat),
                          1e-2, 1e-2));
  }
  // Swapped back: the parameters' own data, unchanged, so the copies are current.
  CHECK(model->attention(0)->q_proj->weight.scalar_type() == torch::kFloat);
  CHECK(model->attention(0)->q_proj->weight.data_ptr() == q_weight);
  CHECK(w.Current(*model));
  CHECK(torch::equal(model->forward(idx), cast));
  // An in-place update (an optimiser step) makes them stale; so does one of the head.
  model->blocks->ptr(1)->as<Block>()->fc->bias.add_(1.0);
  CHECK_FALSE(w.Current(*model));
  ComputeWeights again = ComputeWeights::Make(*model);
  CHECK(again.Current(*model));
  model->wte->weight.mul_(2.0);
  CHECK_FALSE(again.Current(*model));

  // Per-head q/k norms (Qwen 3) are applied by Queries / Keys: no concatenated copy.
  ModelConfig normed = TinyDecoderConfig("rope", 4, 2);
  normed.qk_norm = true;
  Gpt qwen(normed);
  qwen->SetPrecision(Precision::kBf16);
  ComputeWeights nq = ComputeWeights::Make(*qwen);
  REQUIRE(nq.qkv_weight.size() == 2);
  CHECK_FALSE(nq.qkv_weight[0].defined());
  CHECK_FALSE(nq.Qkv(0, torch::zeros({1, 1, normed.width})).defined());
  // GQA without norms: [q; k; v] has H + 2 KV = 8 heads of 8 rows each.
  ModelConfig gqa = TinyDecoderConfig("rope", 4, 2);
  Gpt llama(gqa);
  llama->SetPrecision(Precision::kBf16);
  ComputeWeights g = ComputeWeights::Make(*llama);
  REQUIRE(g.qkv_weight[1].defined());
  CHECK(g.qkv_weight[1].sizes() == torch::IntArrayRef({(4 + 2 * 2) * 8, gqa.width}));
  CHECK_FALSE(g.qkv_bias[1].defined());
}

TEST_CASE("decode: learned positions stop at the model's context, before any work") {
  torch::manual_seed(20);
  Gpt model(TinyDecoderConfig("learned"));  // context 24
  torch::NoGradGuard no_grad;
  torch::Tensor idx = torch::randint(0, 32, {1, 24}, torch::kLong);
  auto d = MakeDecoder(model);
  d->Prefill(idx.narrow(1, 0, 23));
  d->Step(idx.select(1, 23));  // position 23, the last the table has
  CHECK(d->position() == 24);
  const int64_t bytes = d->KvBytes();
  CHECK_THROWS_WITH(d->Step(idx.select(1, 0)), Catch::Contains("position 25 > context 24"));
  CHECK_THROWS_WITH(d->Prefill(idx.narrow(1, 0, 2)), Catch::Contains("position 26 > context 24"));
  CHECK(d->position() == 24);  // nothing appended by the refused calls
  CHECK(d->KvBytes() == bytes);
}

TEST_CASE("decode: local and pruned heads, mixed GQA groups, fixed heads rejected") {
  torch::manual_seed(23);
  Gpt model(TinyDecoderConfig("learned", 4, 2));
  torch::NoGradGuard no_grad;
  HeadState local{HeadMode::kLocal};
  local.window = 4;
  HeadState streaming{HeadMode::kStreaming};
  streaming.sink = 1;
  streaming.recent = 4;
  model->attention(0)->SetHeadState(0, local);
  model->attention(0)->SetHeadState(1, local);      // group 0: bounded(0, 4)
  model->attention(0)->SetHeadState(2, streaming);  // group 1: mixed -> kept in full
  model->attention(1)->SetHeadState(0, HeadState{HeadMode::kPruned});
  model->attention(1)->SetHeadState(1, HeadState{HeadMode::kPruned});  // group 0 not cached
  torch::Tensor idx = torch::randint(0, 32, {1, 24}, torch::kLong);
  torch::Tensor masked = model->forward(idx);
  auto d = MakeDecoder(model);
  CHECK(torch::allclose(DecodeAll(*d, idx), masked, 1e-4, 1e-5));
  CHECK(d->KvEntries(0, 0) == 3);
  CHECK(d->KvEntries(0, 1) == 24);
  CHECK(d->KvEntries(1, 0) == 0);
  CHECK(d->KvEntries(1, 1) == 24);

  model->attention(1)->SetFixedCompact(3, torch::zeros({24}), torch::zeros({24}),
                                       torch::zeros({24}));
  CHECK_FALSE(KvDecoder::Create(model.get(), DecoderOptions{}).ok());
}

TEST_CASE("decode: segments of non-adjacent heads write each head to its place") {
  // Heads 0 and 2 streaming, 1 and 3 ordinary (one KV head each): each layer's two segments
  // hold heads {0, 2} and {1, 3}, two runs apiece, and o_proj must see every head's output
  // in its own slot, step by step and in prefill chunks.
  torch::manual_seed(29);
  Gpt model(TinyDecoderConfig("rope", 4, 4));
  torch::NoGradGuard no_grad;
  HeadState streaming{HeadMode::kStreaming};
  streaming.sink = 1;
  streaming.recent = 3;
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h : {0, 2}) model->attention(l)->SetHeadState(h, streaming);
  torch::Tensor idx = torch::randint(0, 32, {2, 16}, torch::kLong);
  torch::Tensor masked = model->forward(idx);
  auto d = MakeDecoder(model);
  REQUIRE(d->segments(0).size() == 2);
  CHECK(torch::allclose(DecodeAll(*d, idx), masked, 1e-4, 1e-5));
  DecoderOptions c;
  c.prefill_chunk = 5;
  auto p = MakeDecoder(model, c);
  CHECK(torch::allclose(p->Prefill(idx), masked, 1e-4, 1e-5));
}

}  // namespace
}  // namespace headlab::decode
