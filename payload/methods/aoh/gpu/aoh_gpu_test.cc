// AoH on CUDA (ctest label gpu; run on the device machine by scripts/gpu/build-all.sh):
// the streaming decoder's logits equal GptImpl::forward for full attention and AoH labels,
// and the Table 11 columns (prefill latency, decode ms/token, KV bytes) across context
// lengths on a randomly initialised 12-layer RoPE/GQA model (latency and memory do not
// depend on the weights), printed as JSON labelled with the device. fp32; decode steps run
// the fused decode kernel (decode::DecoderPathLabel), prefill chunks PyTorch's fused attention (in
// fp32 the memory-efficient kernel with the heads' masks).
#include <torch/torch.h>
#include <torch/version.h>

#include <iostream>
#include <map>

#include "payload/methods/aoh/aoh_eval.h"
#include "payload/methods/aoh/aoh_model.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aoh {
namespace {

ModelConfig PaperShape() {
  ModelConfig c;
  c.layers = 12;
  c.heads = 12;
  c.kv_heads = 4;
  c.width = 768;
  c.context = 4096;
  c.mlp_ratio = 4;
  c.vocab = 256;
  c.pos = "rope";
  c.rope_base = 10000;
  c.norm = "rmsnorm";
  return c;
}

TEST_CASE("aoh gpu: decode equals the forward on CUDA; KV memory falls as Table 11 says") {
  REQUIRE(torch::cuda::is_available());
  torch::Device dev(torch::kCUDA);
  torch::manual_seed(1);
  Gpt model(PaperShape());
  model->to(dev);
  model->eval();
  torch::NoGradGuard no_grad;

  torch::Tensor idx = torch::randint(0, 256, {2, 300}, torch::kLong).to(dev);
  for (double s : {0.0, 0.5}) {
    AohOptions o;
    o.sparsity = s;
    o.sink = 16;
    o.recent = 64;
    ApplyPlan(*model, PlanAoh(*model, o).value());
    torch::Tensor full = model->forward(idx);
    decode::DecoderOptions d;
    d.prefill_chunk = 37;  // not a divisor: evictions fall inside the window
    auto dec = decode::KvDecoder::Create(model.get(), d);
    REQUIRE(dec.ok());
    torch::Tensor pre = dec.value()->Prefill(idx.narrow(1, 0, 250));
    std::vector<torch::Tensor> steps;
    for (int64_t t = 250; t < 300; ++t) steps.push_back(dec.value()->Step(idx.select(1, t)));
    torch::Tensor mine = torch::cat({pre, torch::stack(steps, 1)}, 1);
    const double diff = (mine - full).abs().max().item<double>();
    INFO("sparsity " << s << ": max |decode - forward| = " << diff);
    CHECK(diff < 1e-3);
  }

  BenchOptions b;
  b.contexts = {4096, 16384};
  b.decode_tokens = 32;
  b.repeats = 3;
  Json report = {{"device", DeviceLabel(dev)}, {"torch", TORCH_VERSION}};
  std::map<double, int64_t> kv;  // sparsity -> KV bytes at the longest context
  for (double s : {0.0, 0.5, 0.75}) {
    AohOptions o;  // paper defaults: sink 128, recent 256
    o.sparsity = s;
    ApplyPlan(*model, PlanAoh(*model, o).value());
    auto rows = BenchmarkLatency(*model, decode::DecoderOptions{}, b);  // prefill chunk 512
    REQUIRE(rows.ok());
    report[s == 0 ? "full" : "aoh_sparsity_" + std::to_string(s)] = BenchJson(rows.value());
    kv[s] = rows->back().kv_bytes_decode;
    CHECK(rows->back().device == DeviceLabel(dev));
  }
  std::cout << report.dump(2) << std::endl;
  // 4 KV groups: 0.5 keeps 2, 0.75 keeps 1 global; streaming ones hold 128 + 256 entries.
  CHECK(double(kv[0.0]) / double(kv[0.5]) > 1.8);
  CHECK(double(kv[0.0]) / double(kv[0.75]) > 3.3);
}

}  // namespace
}  // namespace headlab::aoh
