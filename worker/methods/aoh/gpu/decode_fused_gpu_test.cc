// The decoder's fused decode path on CUDA (ctest label gpu, in headlab_aoh_gpu_test):
// decode steps through the split-K kernel (kernels/decode_attention.h) against the
// reference decoder (DecoderOptions::fused_decode = false) on small random RoPE/GQA models
// with every head state a decoder takes (ordinary, streaming and local, bounded and full
// segments, a group mixing states, a KV head read only by pruned heads), head_dim 64 and
// 128. bf16: the fused decoder's logit error against an fp32 reference decoder stays within
// 2x (+ 1e-3 of the logits' scale) of the bf16 reference decoder's own (flash-attention's
// rule); fp32: the two paths agree to 1e-3. KV bytes and entries agree after every step.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "worker/methods/aoh/streaming_decode.h"

namespace headlab::aoh {
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
Gpt SmallModel(int64_t head_dim, torch::Device dev) {
  ModelConfig c;
  c.layers = 3;
  c.heads = 8;
  c.kv_heads = 2;
  c.width = 8 * head_dim;
  c.context = 2048;
  c.mlp_ratio = 2;
  c.vocab = 256;
  c.pos = "rope";
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
    for (int64_t h = 0; h < c.heads; ++h) model->attention(l)->SetHeadState(h, states[size_t(l)][size_t(h)]);
  model->to(dev);
  model->eval();
  return model;
}

// Prefills `prompt` [B, P] and decodes the next `steps` tokens of `tokens` (teacher forcing,
// so every decoder sees the same inputs); returns the decode logits [B, steps, vocab] and
// the KV bytes after each step.
torch::Tensor Decode(Gpt& model, bool fused, const torch::Tensor& tokens, int64_t prompt,
                     std::vector<int64_t>* kv_bytes) {
  DecoderOptions o;
  o.prefill_chunk = 61;  // not a divisor: evictions fall inside the windows
  o.fused_decode = fused;
  auto dec = AohDecoder::Create(model.get(), o);
  REQUIRE(dec.ok());
  dec.value()->Prefill(tokens.narrow(1, 0, prompt));
  std::vector<torch::Tensor> steps;
  for (int64_t t = prompt; t < tokens.size(1); ++t) {
    steps.push_back(dec.value()->Step(tokens.select(1, t)));
    kv_bytes->push_back(dec.value()->KvBytes());
  }
  // Bounded segments keep sink + recent - 1 entries between steps (AoH §5).
  CHECK(dec.value()->KvEntries(0, 0) == 8 + 40 - 1);
  CHECK(dec.value()->KvEntries(1, 1) == 24 - 1);
  CHECK(dec.value()->KvEntries(2, 1) == 0);
  return torch::stack(steps, 1);
}

double MaxAbs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

TEST_CASE("aoh gpu: fused decode steps equal the reference decoder") {
  REQUIRE(torch::cuda::is_available());
  torch::Device dev(torch::kCUDA);
  torch::NoGradGuard no_grad;
  for (int64_t head_dim : {64, 128}) {
    torch::manual_seed(3 + head_dim);
    Gpt model = SmallModel(head_dim, dev);
    REQUIRE(std::string(DecoderPathLabel(*model, dev, DecoderOptions{})) == kDecoderFusedLabel);
    DecoderOptions reference;
    reference.fused_decode = false;
    CHECK(std::string(DecoderPathLabel(*model, dev, reference)) == kDecoderReferenceLabel);
    CHECK(std::string(DecoderPathLabel(*model, torch::kCPU, DecoderOptions{})) == kDecoderReferenceLabel);
    torch::Tensor tokens = torch::randint(0, 256, {2, 333}, torch::kLong).to(dev);
    const int64_t prompt = 290;

    model->SetPrecision(Precision::kFp32);
    std::vector<int64_t> kv_exact, kv_fused32, kv_ref16, kv_fused16;
    torch::Tensor exact = Decode(model, /*fused=*/false, tokens, prompt, &kv_exact);
    torch::Tensor fused32 = Decode(model, /*fused=*/true, tokens, prompt, &kv_fused32);
    const double diff32 = MaxAbs(fused32 - exact), scale = MaxAbs(exact);
    INFO("d " << head_dim << ": fp32 max |fused - reference| = " << diff32 << " (logits up to " << scale << ")");
    CHECK(diff32 < 1e-3);
    CHECK(kv_fused32 == kv_exact);

    model->SetPrecision(Precision::kBf16);
    torch::Tensor ref16 = Decode(model, /*fused=*/false, tokens, prompt, &kv_ref16);
    torch::Tensor fused16 = Decode(model, /*fused=*/true, tokens, prompt, &kv_fused16);
    const double err_ref = MaxAbs(ref16 - exact), err_fused = MaxAbs(fused16 - exact);
    INFO("d " << head_dim << ": bf16 max error vs fp32: reference " << err_ref << ", fused " << err_fused);
    CHECK(err_fused <= 2 * err_ref + 1e-3 * scale);
    CHECK(kv_fused16 == kv_ref16);
    CHECK(kv_ref16.back() * 2 == kv_exact.back());  // the bf16 cache: half the fp32 bytes
  }
}

}  // namespace
}  // namespace headlab::aoh
