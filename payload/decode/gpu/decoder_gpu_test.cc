// The decoder's fused decode path on CUDA (ctest label gpu, headlab_decode_gpu_test):
// decode steps through the split-K kernel (kernels/decode_attention.h) against the
// reference decoder (DecodePath::kReference) on small random RoPE/GQA models
// with every head state a decoder takes (ordinary, streaming and local, bounded and full
// segments, a group mixing states, a KV head read only by pruned heads), head_dim 64 and
// 128, RoPE and learned positions, each step fused (launched op by op) and replayed from a
// captured CUDA graph. bf16: the fused decoder's logit error against an fp32 reference
// decoder stays within 2x (+ 1e-3 of the logits' scale) of the bf16 reference decoder's own
// (flash-attention's rule); fp32: the paths agree to 1e-3. KV bytes and entries agree after
// every step. Prefill chunks (the fused hybrid kernel, PyTorch's fused attention) against the
// model's forward.
#include <torch/torch.h>

#include "payload/decode/decoder.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::decode {
namespace {

HeadState Streaming(int64_t sink, int64_t recent) {
  HeadState s;
  s.mode = HeadMode::kStreaming;
  s.sink = sink;
  s.recent = recent;
  return s;
}
HeadState Local(int64_t window) {
  HeadState s;
  s.mode = HeadMode::kLocal;
  s.window = window;
  return s;
}
HeadState Mode(HeadMode m) {
  HeadState s;
  s.mode = m;
  return s;
}

// 3 layers, 8 query heads over 2 KV heads (groups of 4):
//   layer 0: group 0 all streaming(8, 40) (a bounded segment); group 1 ordinary, local(30),
//            pruned, streaming(8, 40) (kept in full, each head masks its own keys)
//   layer 1: group 0 ordinary (full); group 1 all local(24) (bounded(0, 24))
//   layer 2: group 0 streaming(0, 16); group 1 all pruned (not cached: outputs zero)
Gpt SmallModel(int64_t head_dim, torch::Device dev, const char* pos) {
  ModelConfig c;
  c.layers = 3;
  c.heads = 8;
  c.kv_heads = 2;
  c.width = 8 * head_dim;
  c.context = 2048;
  c.mlp_ratio = 2;
  c.vocab = 256;
  c.pos = pos;
  c.rope_base = 10000;
  c.norm = "rmsnorm";
  Gpt model(c);
  const std::vector<std::vector<HeadState>> states = {
      {Streaming(8, 40), Streaming(8, 40), Streaming(8, 40), Streaming(8, 40),
       Mode(HeadMode::kOrdinary), Local(30), Mode(HeadMode::kPruned), Streaming(8, 40)},
      {Mode(HeadMode::kOrdinary), Mode(HeadMode::kOrdinary), Mode(HeadMode::kOrdinary),
       Mode(HeadMode::kOrdinary), Local(24), Local(24), Local(24), Local(24)},
      {Streaming(0, 16), Streaming(0, 16), Streaming(0, 16), Streaming(0, 16),
       Mode(HeadMode::kPruned), Mode(HeadMode::kPruned), Mode(HeadMode::kPruned),
       Mode(HeadMode::kPruned)}};
  for (int64_t l = 0; l < c.layers; ++l)
    for (int64_t h = 0; h < c.heads; ++h)
      model->attention(l)->SetHeadState(h, states[size_t(l)][size_t(h)]);
  model->to(dev);
  model->eval();
  return model;
}

struct Decoded {
  torch::Tensor logits;           // [B, steps, vocab], every decode step's
  std::vector<int64_t> kv_bytes;  // after each step
  int64_t captures = 0, replays = 0;
};

// Runs one sequence through a decoder on `path`: prefill tokens[:, :prompt], decode 20
// tokens one step at a time (teacher forcing, so every decoder sees the same inputs), prefill
// the next 20 as a chunk (after steps: rings back to the linear layout), decode the rest.
// `runs` > 1 repeats it after Reset (graph steps: the captured step is reused).
Decoded Decode(Gpt& model, DecodePath path, const torch::Tensor& tokens, int64_t prompt,
               int runs = 1) {
  DecoderOptions o;
  o.prefill_chunk = 61;  // not a divisor: evictions fall inside the windows
  o.path = path;
  auto dec = KvDecoder::Create(model.get(), o);
  REQUIRE(dec.ok());
  KvDecoder& d = *dec.value();
  Decoded out;
  std::vector<torch::Tensor> steps;
  for (int run = 0; run < runs; ++run) {
    d.Reset();
    steps.clear();
    out.kv_bytes.clear();
    d.Prefill(tokens.narrow(1, 0, prompt));
    for (int64_t t = prompt; t < tokens.size(1); ++t) {
      if (t == prompt + 20) {
        d.Prefill(tokens.narrow(1, t, 20));
        t += 20;
      }
      steps.push_back(d.Step(tokens.select(1, t)));
      out.kv_bytes.push_back(d.KvBytes());
    }
    // Bounded segments keep sink + recent - 1 entries between steps (AoH §5).
    CHECK(d.KvEntries(0, 0) == 8 + 40 - 1);
    CHECK(d.KvEntries(1, 1) == 24 - 1);
    CHECK(d.KvEntries(2, 1) == 0);
    CHECK(d.position() == tokens.size(1));
  }
  out.logits = torch::stack(steps, 1);
  out.captures = d.graph_captures();
  out.replays = d.graph_replays();
  return out;
}

double MaxAbs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

TEST_CASE("decode gpu: fused and graph decode steps equal the reference decoder") {
  REQUIRE(torch::cuda::is_available());
  torch::Device dev(torch::kCUDA);
  torch::NoGradGuard no_grad;
  for (const char* pos : {"rope", "learned"})
    for (int64_t head_dim : {64, 128}) {
      if (std::string(pos) == "learned" && head_dim == 128) continue;
      torch::manual_seed(3 + head_dim);
      Gpt model = SmallModel(head_dim, dev, pos);
      DecoderOptions graph, fused, reference;
      fused.path = DecodePath::kFused;
      reference.path = DecodePath::kReference;
      REQUIRE(std::string(DecoderPathLabel(*model, dev, graph)) == kDecoderGraphLabel);
      CHECK(std::string(DecoderPathLabel(*model, dev, fused)) == kDecoderFusedLabel);
      CHECK(std::string(DecoderPathLabel(*model, dev, reference)) == kDecoderReferenceLabel);
      CHECK(std::string(DecoderPathLabel(*model, torch::kCPU, graph)) == kDecoderReferenceLabel);
      torch::Tensor tokens = torch::randint(0, 256, {2, 333}, torch::kLong).to(dev);
      const int64_t prompt = 290, steps = 333 - 290 - 20;

      model->SetPrecision(Precision::kFp32);
      Decoded exact = Decode(model, DecodePath::kReference, tokens, prompt);
      const double scale = MaxAbs(exact.logits);
      for (DecodePath path : {DecodePath::kFused, DecodePath::kGraph}) {
        Decoded got = Decode(model, path, tokens, prompt);
        const double diff = MaxAbs(got.logits - exact.logits);
        INFO(pos << " d " << head_dim << " path " << int(path)
                 << ": fp32 max |fused - reference| = " << diff << " (logits up to " << scale
                 << ")");
        CHECK(diff < 1e-3);
        CHECK(got.kv_bytes == exact.kv_bytes);
      }

      model->SetPrecision(Precision::kBf16);
      Decoded ref16 = Decode(model, DecodePath::kReference, tokens, prompt);
      const double err_ref = MaxAbs(ref16.logits - exact.logits);
      for (DecodePath path : {DecodePath::kFused, DecodePath::kGraph}) {
        Decoded got = Decode(model, path, tokens, prompt);
        const double err = MaxAbs(got.logits - exact.logits);
        INFO(pos << " d " << head_dim << " path " << int(path)
                 << ": bf16 max error vs fp32: reference " << err_ref << ", fused " << err);
        CHECK(err <= 2 * err_ref + 1e-3 * scale);
        CHECK(got.kv_bytes == ref16.kv_bytes);
      }
      CHECK(ref16.kv_bytes.back() * 2 ==
            exact.kv_bytes.back());  // the bf16 cache: half the fp32 bytes

      // Graph steps: every step replayed; one capture serves both runs (the caches keep
      // their buffers across Reset and never outgrow them here), and a replayed sequence
      // gives the same logits bit for bit.
      Decoded once = Decode(model, DecodePath::kGraph, tokens, prompt);
      Decoded twice = Decode(model, DecodePath::kGraph, tokens, prompt, /*runs=*/2);
      CHECK(once.replays == steps);
      CHECK(twice.replays == 2 * steps);
      CHECK(twice.captures == 1);
      CHECK(torch::equal(once.logits, twice.logits));
    }
}

// Prefill chunks on CUDA against the model's own forward over the whole sequence: fp32 to
// 1e-3 of the logits' scale; bf16 within 2x (+ 1e-3 of the scale) of the bf16 forward's own
// error against the fp32 forward. Chunks of 61: the bounded local and streaming groups
// through the fused hybrid kernel in ChunkFormOf's fused frame (layer 0's with a sink,
// layer 2's sink 0, their first chunks included), ordinary heads over a full segment through
// the flash kernel's lower-right causal mask, the mixed group through the memory-efficient
// kernel with a boolean mask. Chunks of 7: the bounded groups' frames exceed 4 T, so they
// take the flash kernel's causal window (and a sink call merged in; their first chunks,
// whose windows reach the sink, masked). A mask aligned to the wrong corner (the upper
// left, as plain SDPA is_causal does when T < L) would cost every chunk after the first its
// earlier keys.
TEST_CASE("decode gpu: prefill chunks equal the model's forward") {
  REQUIRE(torch::cuda::is_available());
  torch::Device dev(torch::kCUDA);
  torch::NoGradGuard no_grad;
  for (int64_t head_dim : {64, 128}) {
    for (int64_t chunk : {61, 7}) {  // not divisors of 290: the last chunk is short
      torch::manual_seed(11 + head_dim);
      Gpt model = SmallModel(head_dim, dev, "rope");
      torch::Tensor tokens = torch::randint(0, 256, {2, 290}, torch::kLong).to(dev);
      DecoderOptions o;
      o.prefill_chunk = chunk;
      model->SetPrecision(Precision::kFp32);
      const torch::Tensor exact = model->forward(tokens).to(torch::kFloat);
      const double scale = MaxAbs(exact);
      auto dec = KvDecoder::Create(model.get(), o);
      REQUIRE(dec.ok());
      const double diff32 = MaxAbs(dec.value()->Prefill(tokens).to(torch::kFloat) - exact);
      model->SetPrecision(Precision::kBf16);
      const double err_forward = MaxAbs(model->forward(tokens).to(torch::kFloat) - exact);
      auto dec16 = KvDecoder::Create(model.get(), o);
      REQUIRE(dec16.ok());
      const double err_prefill = MaxAbs(dec16.value()->Prefill(tokens).to(torch::kFloat) - exact);
      INFO("d " << head_dim << ", chunks of " << chunk << ": logits up to " << scale
                << "; fp32 max |prefill - forward| = " << diff32
                << "; bf16 max error vs fp32: forward " << err_forward << ", prefill "
                << err_prefill);
      CHECK(diff32 < 1e-3 * scale);
      CHECK(err_prefill <= 2 * err_forward + 1e-3 * scale);
    }
  }
}

}  // namespace
}  // namespace headlab::decode
