// model.init_from: tiny GPT-2 and Llama-family checkpoints written here (config.json +
// safetensors), imported, and checked against a reference forward of the same weights
// written from the published architectures' equations with plain tensor algebra (no headlab
// module is called): GPT-2 (Radford et al. 2019; HF GPT2Model: Conv1D x W + b, tanh GELU,
// pre-LayerNorm, learned positions, tied head) and Llama / Qwen (RMSNorm, rotate-half RoPE
// at theta^(-2i/d), GQA, SwiGLU down(silu(gate x) * up x); Qwen 2 q/k/v biases; Qwen 3
// per-head q/k RMSNorm before RoPE).
#include "payload/exec/import_weights.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/testing/temp_dir.h"
#include "payload/exec/data_check.h"
#include "payload/exec/hf_config.h"
#include "payload/exec/safetensors.h"
#include "payload/methods/aoh/streaming_decode.h"
#include "payload/methods/saf/calibration.h"

namespace headlab {
namespace {

using torch::Tensor;

// A checkpoint under construction: named tensors and config.json.
struct Checkpoint {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::string f16_name;  // stored as F16 (its values are rounded to F16 first)
  Tensor Add(const std::string& name, std::vector<int64_t> shape, double scale = 0.2) {
    Tensor t = torch::randn(shape) * scale;
    if (name == f16_name) t = t.to(torch::kHalf).to(torch::kFloat);
    tensors.push_back({name, t});
    return t;
  }
  Tensor Ones(const std::string& name, int64_t n) {  // norm gains near 1
    Tensor t = 1 + 0.1 * torch::randn({n});
    tensors.push_back({name, t});
    return t;
  }
  // Writes config.json and the tensors: one model.safetensors, or `shards` files named by
  // model.safetensors.index.json.
  void Write(const std::string& dir, const Json& config, int shards = 1) const {
    std::vector<std::vector<SafeTensorOut>> out(static_cast<size_t>(shards));
    Json weight_map = Json::object();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& [name, t] = tensors[i];
      const bool half = name == f16_name;
      Tensor c = (half ? t.to(torch::kHalf) : t).contiguous();
      out[i % size_t(shards)].push_back(
          {name, half ? "F16" : "F32", t.sizes().vec(),
           std::string(static_cast<const char*>(c.data_ptr()), size_t(c.numel() * c.element_size()))});
      weight_map[name] = "model-0000" + std::to_string(i % size_t(shards) + 1) + ".safetensors";
    }
    if (shards == 1) {
      REQUIRE(WriteFileAtomic(dir + "/model.safetensors", EncodeSafetensors(out[0])).ok());
    } else {
      for (int k = 0; k < shards; ++k)
        REQUIRE(WriteFileAtomic(dir + "/model-0000" + std::to_string(k + 1) + ".safetensors",
                                EncodeSafetensors(out[size_t(k)])).ok());
      REQUIRE(WriteFileAtomic(dir + "/model.safetensors.index.json", Json{{"weight_map", weight_map}}.dump()).ok());
    }
    REQUIRE(WriteFileAtomic(dir + "/config.json", config.dump(2)).ok());
  }
  Tensor Get(const std::string& name) const {
    for (const auto& [n, t] : tensors)
      if (n == name) return t;
    FAIL("no tensor " << name);
    return {};
  }
};

Tensor LayerNormRef(const Tensor& x, const Tensor& g, const Tensor& b, double eps) {
  Tensor mean = x.mean(-1, true), var = (x - mean).pow(2).mean(-1, true);
  return (x - mean) / torch::sqrt(var + eps) * g + b;
}
Tensor RmsNormRef(const Tensor& x, const Tensor& g, double eps) {
  return x / torch::sqrt(x.pow(2).mean(-1, true) + eps) * g;
}
Tensor GeluTanhRef(const Tensor& x) {
  return 0.5 * x * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x.pow(3))));
}
// Causal softmax attention of q [h, T, d], k, v [h, T, d].
Tensor CausalAttentionRef(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t T = q.size(1);
  Tensor s = torch::matmul(q, k.transpose(1, 2)) / std::sqrt(double(q.size(2)));
  Tensor mask = torch::ones({T, T}).triu(1).to(torch::kBool);
  return torch::matmul(torch::softmax(s.masked_fill(mask, -1e30), -1), v);
}
// HF's rotate-half RoPE of x [h, T, d].
Tensor RopeRef(const Tensor& x, double theta) {
  const int64_t T = x.size(1), d = x.size(2);
  Tensor inv = torch::pow(theta, -torch::arange(0, d, 2).to(torch::kDouble) / double(d));
  Tensor ang = torch::outer(torch::arange(T).to(torch::kDouble), inv);
  Tensor emb = torch::cat({ang, ang}, -1).to(torch::kFloat);
  Tensor rot = torch::cat({-x.narrow(-1, d / 2, d / 2), x.narrow(-1, 0, d / 2)}, -1);
  return x * emb.cos() + rot * emb.sin();
}

// Tiny GPT-2: 2 layers, 2 heads, width 16, 40 learned positions, vocab 50.
struct Gpt2Case {
  Checkpoint ck;
  Json config = {{"model_type", "gpt2"}, {"n_layer", 2}, {"n_head", 2}, {"n_embd", 16},
                 {"n_positions", 40}, {"vocab_size", 50}, {"activation_function", "gelu_new"},
                 {"layer_norm_epsilon", 1e-5}, {"n_inner", nullptr}};
  Gpt2Case() {
    torch::manual_seed(3);
    ck.f16_name = "h.1.mlp.c_fc.weight";
    ck.Add("wte.weight", {50, 16});
    ck.Add("wpe.weight", {40, 16});
    for (int i = 0; i < 2; ++i) {
      const std::string h = "h." + std::to_string(i) + ".";
      ck.Ones(h + "ln_1.weight", 16);
      ck.Add(h + "ln_1.bias", {16}, 0.1);
      ck.Add(h + "attn.c_attn.weight", {16, 48});
      ck.Add(h + "attn.c_attn.bias", {48}, 0.1);
      ck.Add(h + "attn.c_proj.weight", {16, 16});
      ck.Add(h + "attn.c_proj.bias", {16}, 0.1);
      ck.Ones(h + "ln_2.weight", 16);
      ck.Add(h + "ln_2.bias", {16}, 0.1);
      ck.Add(h + "mlp.c_fc.weight", {16, 64});
      ck.Add(h + "mlp.c_fc.bias", {64}, 0.1);
      ck.Add(h + "mlp.c_proj.weight", {64, 16});
      ck.Add(h + "mlp.c_proj.bias", {16}, 0.1);
      ck.tensors.push_back({h + "attn.bias", torch::ones({1, 1, 40, 40}).tril()});  // HF's mask buffer
    }
    ck.Ones("ln_f.weight", 16);
    ck.Add("ln_f.bias", {16}, 0.1);
  }
  // Reference logits [T, vocab] of tokens idx [T].
  Tensor Forward(const Tensor& idx) const {
    const int64_t T = idx.size(0), H = 2, d = 8;
    Tensor x = ck.Get("wte.weight").index_select(0, idx) + ck.Get("wpe.weight").narrow(0, 0, T);
    for (int i = 0; i < 2; ++i) {
      const std::string h = "h." + std::to_string(i) + ".";
      Tensor a = LayerNormRef(x, ck.Get(h + "ln_1.weight"), ck.Get(h + "ln_1.bias"), 1e-5);
      Tensor qkv = torch::matmul(a, ck.Get(h + "attn.c_attn.weight")) + ck.Get(h + "attn.c_attn.bias");
      auto heads = [&](int64_t part) { return qkv.narrow(1, part * 16, 16).view({T, H, d}).transpose(0, 1); };
      Tensor y = CausalAttentionRef(heads(0), heads(1), heads(2)).transpose(0, 1).reshape({T, 16});
      x = x + torch::matmul(y, ck.Get(h + "attn.c_proj.weight")) + ck.Get(h + "attn.c_proj.bias");
      Tensor m = LayerNormRef(x, ck.Get(h + "ln_2.weight"), ck.Get(h + "ln_2.bias"), 1e-5);
      m = GeluTanhRef(torch::matmul(m, ck.Get(h + "mlp.c_fc.weight")) + ck.Get(h + "mlp.c_fc.bias"));
      x = x + torch::matmul(m, ck.Get(h + "mlp.c_proj.weight")) + ck.Get(h + "mlp.c_proj.bias");
    }
    return torch::matmul(LayerNormRef(x, ck.Get("ln_f.weight"), ck.Get("ln_f.bias"), 1e-5),
                         ck.Get("wte.weight").t());
  }
};

// Tiny Llama-family model: 2 layers, width 32, 4 query heads over 2 KV heads (GQA).
struct LlamaCase {
  std::string type;
  int64_t head_dim;
  bool tied;
  Checkpoint ck;
  Json config;
  LlamaCase(const std::string& model_type, int64_t hd, bool tie) : type(model_type), head_dim(hd), tied(tie) {
    torch::manual_seed(5);
    config = {{"model_type", type}, {"num_hidden_layers", 2}, {"hidden_size", 32},
              {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 40},
              {"vocab_size", 60}, {"rms_norm_eps", 1e-6}, {"rope_theta", 500000.0},
              {"hidden_act", "silu"}, {"tie_word_embeddings", tied}, {"rope_scaling", nullptr},
              {"max_position_embeddings", 4096}};
    if (hd != 8) config["head_dim"] = hd;
    ck.f16_name = "model.layers.0.mlp.up_proj.weight";
    ck.Add("model.embed_tokens.weight", {60, 32});
    for (int i = 0; i < 2; ++i) {
      const std::string h = "model.layers." + std::to_string(i) + ".";
      ck.Ones(h + "input_layernorm.weight", 32);
      ck.Add(h + "self_attn.q_proj.weight", {4 * hd, 32});
      ck.Add(h + "self_attn.k_proj.weight", {2 * hd, 32});
      ck.Add(h + "self_attn.v_proj.weight", {2 * hd, 32});
      if (type == "qwen2") {
        ck.Add(h + "self_attn.q_proj.bias", {4 * hd}, 0.1);
        ck.Add(h + "self_attn.k_proj.bias", {2 * hd}, 0.1);
        ck.Add(h + "self_attn.v_proj.bias", {2 * hd}, 0.1);
      }
      if (type == "qwen3") {
        ck.Ones(h + "self_attn.q_norm.weight", hd);
        ck.Ones(h + "self_attn.k_norm.weight", hd);
      }
      ck.Add(h + "self_attn.o_proj.weight", {32, 4 * hd});
      ck.Ones(h + "post_attention_layernorm.weight", 32);
      ck.Add(h + "mlp.gate_proj.weight", {40, 32});
      ck.Add(h + "mlp.up_proj.weight", {40, 32});
      ck.Add(h + "mlp.down_proj.weight", {32, 40});
    }
    ck.Ones("model.norm.weight", 32);
    if (!tied) ck.Add("lm_head.weight", {60, 32});
  }
  Tensor Forward(const Tensor& idx) const {
    const int64_t T = idx.size(0), d = head_dim;
    Tensor x = ck.Get("model.embed_tokens.weight").index_select(0, idx);
    for (int i = 0; i < 2; ++i) {
      const std::string h = "model.layers." + std::to_string(i) + ".";
      Tensor a = RmsNormRef(x, ck.Get(h + "input_layernorm.weight"), 1e-6);
      auto proj = [&](const char* p, int64_t n) {
        Tensor y = torch::matmul(a, ck.Get(h + "self_attn." + p + "_proj.weight").t());
        if (type == "qwen2") y = y + ck.Get(h + "self_attn." + p + "_proj.bias");
        return y.view({T, n, d}).transpose(0, 1);  // [n, T, d]
      };
      Tensor q = proj("q", 4), k = proj("k", 2), v = proj("v", 2);
      if (type == "qwen3") {
        q = RmsNormRef(q, ck.Get(h + "self_attn.q_norm.weight"), 1e-6);
        k = RmsNormRef(k, ck.Get(h + "self_attn.k_norm.weight"), 1e-6);
      }
      q = RopeRef(q, 500000.0);
      k = RopeRef(k, 500000.0);
      // GQA: query heads 0, 1 read KV head 0; 2, 3 read KV head 1.
      k = k.repeat_interleave(2, 0);
      v = v.repeat_interleave(2, 0);
      Tensor y = CausalAttentionRef(q, k, v).transpose(0, 1).reshape({T, 4 * d});
      x = x + torch::matmul(y, ck.Get(h + "self_attn.o_proj.weight").t());
      Tensor m = RmsNormRef(x, ck.Get(h + "post_attention_layernorm.weight"), 1e-6);
      Tensor gate = torch::matmul(m, ck.Get(h + "mlp.gate_proj.weight").t());
      Tensor up = torch::matmul(m, ck.Get(h + "mlp.up_proj.weight").t());
      x = x + torch::matmul(gate * torch::sigmoid(gate) * up, ck.Get(h + "mlp.down_proj.weight").t());
    }
    Tensor out = RmsNormRef(x, ck.Get("model.norm.weight"), 1e-6);
    return torch::matmul(out, ck.Get(tied ? "model.embed_tokens.weight" : "lm_head.weight").t());
  }
};

// Builds the model of `dir` as exec does: config.json -> ModelConfig -> weights.
StatusOr<Gpt> Import(const std::string& dir, int64_t context) {
  ModelConfig c;
  c.context = context;
  c.init_from = dir;
  c.pos = "learned";
  c.norm = "layernorm";
  HEADLAB_RETURN_IF_ERROR(ReadHfModelConfig(dir, &c));
  torch::manual_seed(1);
  Gpt model(c);
  Json prov = Json::object();
  HEADLAB_RETURN_IF_ERROR(InitFromCheckpoint(*model, c, &prov));
  if (prov["init_from_sha256"].get<std::string>().size() != 64) return Status::Internal("no checkpoint hash");
  return model;
}

double MaxDiff(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item<double>(); }

// SAF's calibration view (ComputeLayerAttention with the checkpoint's biases and q/k norms)
// rebuilds each block's output and the logits.
void CheckSafView(GptImpl& model, const Tensor& idx, const Tensor& logits) {
  saf::ModelView view = saf::ViewOfGpt(model);
  const int64_t T = idx.size(0);
  Tensor r = view.embed(idx.unsqueeze(0));
  for (int64_t l = 0; l < int64_t(view.layers.size()); ++l) {
    const saf::LayerView& lv = view.layers[size_t(l)];
    saf::LayerAttention a = saf::ComputeLayerAttention(view, l, lv.attention_input(r));
    Tensor z = torch::matmul(a.att, a.values).transpose(1, 2).reshape({1, T, -1});
    Tensor mine = lv.mlp(r + torch::nn::functional::linear(z, lv.o_weight, lv.o_bias));
    Tensor real = lv.block(r);
    CHECK(MaxDiff(mine, real) < 1e-4);
    r = real;
  }
  CHECK(MaxDiff(view.logits(r).squeeze(0), logits) < 1e-4);
}

TEST_CASE("a tiny GPT-2 checkpoint imports and matches the reference logits") {
  testing::TempDir dir("headlab-import");
  Gpt2Case g;
  g.ck.Write(dir.path(), g.config);
  StatusOr<Gpt> m = Import(dir.path(), 24);
  INFO(m.status().ToString());
  REQUIRE(m.ok());
  CHECK(m.value()->config().family == "gpt2");
  CHECK(m.value()->config().mlp_act == "gelu_tanh");
  Tensor idx = torch::randint(0, 50, {24}, torch::kLong);
  torch::NoGradGuard no_grad;
  Tensor ours = m.value()->forward(idx.unsqueeze(0)).squeeze(0);
  CHECK(MaxDiff(ours, g.Forward(idx)) < 1e-4);
  // The streaming decoder (AoH §5) and SAF's calibration view compute the same function.
  auto decoder = aoh::AohDecoder::Create(m.value().get(), {/*prefill_chunk=*/7});
  REQUIRE(decoder.ok());
  CHECK(MaxDiff(decoder.value()->Prefill(idx.unsqueeze(0)).squeeze(0), ours) < 1e-4);
  CheckSafView(*m.value(), idx, ours);
}

TEST_CASE("tiny Llama, Qwen 2 and Qwen 3 checkpoints import and match the reference logits") {
  for (auto [type, hd, tied] : {std::tuple<const char*, int64_t, bool>{"llama", 8, false},
                                {"qwen2", 8, true}, {"qwen3", 16, false}}) {
    INFO(type);
    testing::TempDir dir("headlab-import");
    LlamaCase l(type, hd, tied);
    l.ck.Write(dir.path(), l.config, /*shards=*/std::string(type) == "qwen3" ? 2 : 1);
    StatusOr<Gpt> m = Import(dir.path(), 20);
    INFO(m.status().ToString());
    REQUIRE(m.ok());
    const ModelConfig& c = m.value()->config();
    CHECK(c.kv_heads == 2);
    CHECK(c.HeadDim() == hd);
    CHECK(c.tie_head == tied);
    Tensor idx = torch::randint(0, 60, {20}, torch::kLong);
    torch::NoGradGuard no_grad;
    Tensor ours = m.value()->forward(idx.unsqueeze(0)).squeeze(0);
    CHECK(MaxDiff(ours, l.Forward(idx)) < 1e-4);
    auto decoder = aoh::AohDecoder::Create(m.value().get(), {/*prefill_chunk=*/6});
    REQUIRE(decoder.ok());
    CHECK(MaxDiff(decoder.value()->Prefill(idx.unsqueeze(0)).squeeze(0), ours) < 1e-4);
    CheckSafView(*m.value(), idx, ours);
  }
}

TEST_CASE("checkpoints that do not fit are refused before any step, naming file and shapes") {
  testing::TempDir dir("headlab-import");
  const std::string d = dir.path();
  Gpt2Case g;
  SECTION("a tensor of the wrong shape") {
    for (auto& [n, t] : g.ck.tensors)
      if (n == "h.1.attn.c_proj.weight") t = torch::zeros({16, 12});
    g.ck.Write(d, g.config);
    StatusOr<Gpt> m = Import(d, 24);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message() == d + "/model.safetensors: tensor h.1.attn.c_proj.weight has shape [16, 12], expected "
                                      "[16, 16] from " + d + "/config.json and model.context (headlab parameter "
                                      "blocks.1.attn.o_proj.weight)");
  }
  SECTION("a missing tensor") {
    g.ck.tensors.erase(g.ck.tensors.begin() + 3);  // h.0.ln_1.bias
    g.ck.Write(d, g.config);
    StatusOr<Gpt> m = Import(d, 24);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message().find("tensor h.0.ln_1.bias is missing") != std::string::npos);
  }
  SECTION("a tensor the architecture does not have") {
    g.ck.Add("h.0.attn.extra.weight", {4});
    g.ck.Write(d, g.config);
    StatusOr<Gpt> m = Import(d, 24);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message().find("tensor h.0.attn.extra.weight is not part of the gpt2 architecture") !=
          std::string::npos);
  }
  SECTION("a context beyond the learned positions") {
    g.ck.Write(d, g.config);
    StatusOr<Gpt> m = Import(d, 64);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message().find("$.n_positions: the checkpoint has 40 learned positions; model.context 64") !=
          std::string::npos);
  }
  SECTION("a truncated safetensors file") {
    g.ck.Write(d, g.config);
    StatusOr<std::string> bytes = ReadFile(d + "/model.safetensors");
    REQUIRE(bytes.ok());
    REQUIRE(WriteFileAtomic(d + "/model.safetensors", bytes->substr(0, bytes->size() - 100)).ok());
    StatusOr<Gpt> m = Import(d, 24);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message().find("outside the") != std::string::npos);
    CHECK(m.status().message().find("truncated file?") != std::string::npos);
  }
  SECTION("an unsupported architecture") {
    Json config = g.config;
    config["model_type"] = "t5";
    g.ck.Write(d, config);
    StatusOr<Gpt> m = Import(d, 24);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message() == d + "/config.json: $.model_type: expected gpt2, llama, mistral, qwen2 or qwen3, "
                                      "got \"t5\"");
  }
}

TEST_CASE("byte-level data for an imported model with a larger vocabulary is a tokenizer mismatch") {
  testing::TempDir dir("headlab-import");
  Gpt2Case g;
  g.ck.Write(dir.path(), g.config);
  ExecConfig c;
  c.data.source = "builtin";
  c.model.init_from = dir.path();
  c.model.context = 24;
  REQUIRE(ReadHfModelConfig(dir.path(), &c.model).ok());
  Dataset d;
  Status st = CheckDataFitsModel(d, c);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("tokenizer mismatch: the builtin corpus (byte-level, 256 tokens) for the model at " +
                          dir.path() + ", whose vocabulary has 50 tokens") != std::string::npos);
}

}  // namespace
}  // namespace headlab
