// model.init_from: tiny GPT-2 and Llama-family checkpoints written here (config.json +
// safetensors), imported, and checked against a reference forward of the same weights
// written from the published architectures' equations with plain tensor algebra (no headlab
// module is called): GPT-2 (Radford et al. 2019; HF GPT2Model: Conv1D x W + b, tanh GELU,
// pre-LayerNorm, learned positions, tied head) and Llama / Qwen (RMSNorm, rotate-half RoPE
// at theta^(-2i/d), GQA, SwiGLU down(silu(gate x) * up x); Qwen 2 q/k/v biases; Qwen 3
// per-head q/k RMSNorm before RoPE).
#include "payload/exec/import_weights.h"

#include <cmath>

#include "common/files.h"
#include "common/run_config.h"
#include "common/testing/temp_dir.h"
#include "payload/decode/decoder.h"
#include "payload/exec/attention_cuda.h"
#include "payload/exec/data_check.h"
#include "payload/exec/hf_config.h"
#include "payload/exec/run_setup.h"
#include "payload/exec/safetensors.h"
#include "payload/methods/saf/calibration.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

using torch::Tensor;

// A checkpoint under construction: named tensors and config.json.
struct Checkpoint {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::string f16_name;  // stored as F16 (its values are rounded to F16 first)
  bool bf16 = false;     // every other tensor stored as BF16 (values rounded to BF16 first)
  // The value as stored: rounded to the storage dtype, held in fp32.
  Tensor Stored(const std::string& name, Tensor t) const {
    if (name == f16_name) return t.to(torch::kHalf).to(torch::kFloat);
    if (bf16) return t.to(torch::kBFloat16).to(torch::kFloat);
    return t;
  }
  Tensor Add(const std::string& name, std::vector<int64_t> shape, double scale = 0.2) {
    Tensor t = Stored(name, torch::randn(shape) * scale);
    tensors.push_back({name, t});
    return t;
  }
  Tensor Ones(const std::string& name, int64_t n) {  // norm gains near 1
    Tensor t = Stored(name, 1 + 0.1 * torch::randn({n}));
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
      const bool half = name == f16_name, brain = bf16 && !half && t.is_floating_point();
      Tensor c = (half ? t.to(torch::kHalf) : brain ? t.to(torch::kBFloat16) : t).contiguous();
      out[i % size_t(shards)].push_back({name,
                                         half    ? "F16"
                                         : brain ? "BF16"
                                                 : "F32",
                                         t.sizes().vec(),
                                         std::string(static_cast<const char*>(c.data_ptr()),
                                                     size_t(c.numel() * c.element_size()))});
      weight_map[name] = "model-0000" + std::to_string(i % size_t(shards) + 1) + ".safetensors";
    }
    if (shards == 1) {
      REQUIRE(WriteFileAtomic(dir + "/model.safetensors", EncodeSafetensors(out[0])).ok());
    } else {
      for (int k = 0; k < shards; ++k)
        REQUIRE(WriteFileAtomic(dir + "/model-0000" + std::to_string(k + 1) + ".safetensors",
                                EncodeSafetensors(out[size_t(k)]))
                    .ok());
      REQUIRE(WriteFileAtomic(dir + "/model.safetensors.index.json",
                              Json{{"weight_map", weight_map}}.dump())
                  .ok());
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
// HF's rotate-half RoPE of x [h, T, d] with config.json's rope_scaling (null, llama3 or
// yarn), its frequencies written out here with tensor ops from the published formulas.
Tensor RopeRef(const Tensor& x, double theta, const Json& scaling = nullptr) {
  const int64_t T = x.size(1), d = x.size(2);
  Tensor inv = torch::pow(theta, -torch::arange(0, d, 2).to(torch::kDouble) / double(d));
  double mscale = 1;
  if (!scaling.is_null() && scaling["rope_type"] == "llama3") {
    // Llama 3.1: wavelengths above L / low_freq_factor divided by the factor, below
    // L / high_freq_factor kept, in between blended by (L / wavelength - low) / (high - low).
    const double s = scaling["factor"], lo = scaling["low_freq_factor"],
                 hi = scaling["high_freq_factor"];
    const double L = scaling["original_max_position_embeddings"];
    Tensor wavelength = 2 * M_PI / inv;
    Tensor smooth = (L / wavelength - lo) / (hi - lo);
    Tensor mid = (1 - smooth) * inv / s + smooth * inv;
    inv = torch::where(wavelength < L / hi, inv, torch::where(wavelength > L / lo, inv / s, mid));
  } else if (!scaling.is_null() && scaling["rope_type"] == "yarn") {
    // YaRN: a linear ramp over the pair index between the indices where the pair turns
    // 32 and 1 times over L (floor / ceil), interpolating (theta / s) above it; cos and sin
    // scaled by 0.1 ln s + 1.
    const double s = scaling["factor"], L = scaling["original_max_position_embeddings"];
    auto index = [&](double turns) {
      return double(d) * std::log(L / (turns * 2 * M_PI)) / (2 * std::log(theta));
    };
    const double lo = std::max(std::floor(index(32)), 0.0),
                 hi = std::min(std::ceil(index(1)), double(d - 1));
    Tensor ramp = ((torch::arange(d / 2).to(torch::kDouble) - lo) / (hi - lo)).clamp(0, 1);
    inv = inv / s * ramp + inv * (1 - ramp);
    mscale = 0.1 * std::log(s) + 1;
  }
  Tensor ang = torch::outer(torch::arange(T).to(torch::kDouble), inv);
  Tensor emb = torch::cat({ang, ang}, -1);
  Tensor cos = (emb.cos() * mscale).to(torch::kFloat), sin = (emb.sin() * mscale).to(torch::kFloat);
  Tensor rot = torch::cat({-x.narrow(-1, d / 2, d / 2), x.narrow(-1, 0, d / 2)}, -1);
  return x * cos + rot * sin;
}

// Tiny GPT-2: 2 layers, 2 heads, width 16, 40 learned positions, vocab 50.
struct Gpt2Case {
  Checkpoint ck;
  Json config = {{"model_type", "gpt2"},
                 {"n_layer", 2},
                 {"n_head", 2},
                 {"n_embd", 16},
                 {"n_positions", 40},
                 {"vocab_size", 50},
                 {"activation_function", "gelu_new"},
                 {"layer_norm_epsilon", 1e-5},
                 {"n_inner", nullptr}};
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
      ck.tensors.push_back(
          {h + "attn.bias", torch::ones({1, 1, 40, 40}).tril()});  // HF's mask buffer
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
      Tensor qkv =
          torch::matmul(a, ck.Get(h + "attn.c_attn.weight")) + ck.Get(h + "attn.c_attn.bias");
      auto heads = [&](int64_t part) {
        return qkv.narrow(1, part * 16, 16).view({T, H, d}).transpose(0, 1);
      };
      Tensor y = CausalAttentionRef(heads(0), heads(1), heads(2)).transpose(0, 1).reshape({T, 16});
      x = x + torch::matmul(y, ck.Get(h + "attn.c_proj.weight")) + ck.Get(h + "attn.c_proj.bias");
      Tensor m = LayerNormRef(x, ck.Get(h + "ln_2.weight"), ck.Get(h + "ln_2.bias"), 1e-5);
      m = GeluTanhRef(torch::matmul(m, ck.Get(h + "mlp.c_fc.weight")) +
                      ck.Get(h + "mlp.c_fc.bias"));
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
  Json rope_scaling;
  Checkpoint ck;
  Json config;
  LlamaCase(const std::string& model_type, int64_t hd, bool tie, Json scaling = nullptr,
            bool bf16 = false)
      : type(model_type), head_dim(hd), tied(tie), rope_scaling(std::move(scaling)) {
    torch::manual_seed(5);
    ck.bf16 = bf16;
    config = {{"model_type", type},
              {"num_hidden_layers", 2},
              {"hidden_size", 32},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"intermediate_size", 40},
              {"vocab_size", 60},
              {"rms_norm_eps", 1e-6},
              {"rope_theta", 500000.0},
              {"hidden_act", "silu"},
              {"tie_word_embeddings", tied},
              {"rope_scaling", rope_scaling},
              {"max_position_embeddings", 4096}};
    if (hd != 8) config["head_dim"] = hd;
    if (!bf16) ck.f16_name = "model.layers.0.mlp.up_proj.weight";
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
      q = RopeRef(q, 500000.0, rope_scaling);
      k = RopeRef(k, 500000.0, rope_scaling);
      // GQA: query heads 0, 1 read KV head 0; 2, 3 read KV head 1.
      k = k.repeat_interleave(2, 0);
      v = v.repeat_interleave(2, 0);
      Tensor y = CausalAttentionRef(q, k, v).transpose(0, 1).reshape({T, 4 * d});
      x = x + torch::matmul(y, ck.Get(h + "self_attn.o_proj.weight").t());
      Tensor m = RmsNormRef(x, ck.Get(h + "post_attention_layernorm.weight"), 1e-6);
      Tensor gate = torch::matmul(m, ck.Get(h + "mlp.gate_proj.weight").t());
      Tensor up = torch::matmul(m, ck.Get(h + "mlp.up_proj.weight").t());
      x = x +
          torch::matmul(gate * torch::sigmoid(gate) * up, ck.Get(h + "mlp.down_proj.weight").t());
    }
    Tensor out = RmsNormRef(x, ck.Get("model.norm.weight"), 1e-6);
    return torch::matmul(out, ck.Get(tied ? "model.embed_tokens.weight" : "lm_head.weight").t());
  }
};

// Builds the model of `dir` as exec does: config.json -> ModelConfig -> weights.
StatusOr<Gpt> Import(const std::string& dir, int64_t context,
                     torch::ScalarType weights = torch::kFloat) {
  ModelConfig c;
  c.context = context;
  c.init_from = dir;
  c.pos = "learned";
  c.norm = "layernorm";
  HEADLAB_RETURN_IF_ERROR(ReadHfModelConfig(dir, &c));
  torch::manual_seed(1);
  Gpt model(c, weights);
  Json prov = Json::object();
  HEADLAB_RETURN_IF_ERROR(InitFromCheckpoint(*model, c, &prov));
  if (prov["init_from_sha256"].get<std::string>().size() != 64)
    return Status::Internal("no checkpoint hash");
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
  auto decoder = decode::KvDecoder::Create(m.value().get(), {/*prefill_chunk=*/7});
  REQUIRE(decoder.ok());
  CHECK(MaxDiff(decoder.value()->Prefill(idx.unsqueeze(0)).squeeze(0), ours) < 1e-4);
  CheckSafView(*m.value(), idx, ours);
}

TEST_CASE("tiny Llama, Qwen 2 and Qwen 3 checkpoints import and match the reference logits") {
  for (auto [type, hd, tied] : {std::tuple<const char*, int64_t, bool>{"llama", 8, false},
                                {"qwen2", 8, true},
                                {"qwen3", 16, false}}) {
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
    auto decoder = decode::KvDecoder::Create(m.value().get(), {/*prefill_chunk=*/6});
    REQUIRE(decoder.ok());
    CHECK(MaxDiff(decoder.value()->Prefill(idx.unsqueeze(0)).squeeze(0), ours) < 1e-4);
    CheckSafView(*m.value(), idx, ours);
  }
}

// Llama 3.1's and YaRN's rescaled frequencies (original context 256 and 32 make every branch
// of both formulas matter at head_dim 8 and theta 500000 within 20 positions).
const Json kLlama3Scaling = {{"rope_type", "llama3"},
                             {"factor", 8.0},
                             {"low_freq_factor", 1.0},
                             {"high_freq_factor", 4.0},
                             {"original_max_position_embeddings", 256}};
const Json kYarnScaling = {
    {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32}};

TEST_CASE("rope_scaling llama3 and yarn checkpoints import and match the reference logits") {
  for (auto [type, hd, scaling] :
       {std::tuple<const char*, int64_t, Json>{"llama", 8, kLlama3Scaling},
        {"qwen2", 8, kYarnScaling},
        {"qwen3", 16, kYarnScaling}}) {
    INFO(type << " " << scaling.dump());
    testing::TempDir dir("headlab-import");
    LlamaCase l(type, hd, /*tie=*/false, scaling);
    l.ck.Write(dir.path(), l.config);
    StatusOr<Gpt> m = Import(dir.path(), 20);
    INFO(m.status().ToString());
    REQUIRE(m.ok());
    CHECK(m.value()->config().rope_scaling.type == scaling["rope_type"].get<std::string>());
    Tensor idx = torch::randint(0, 60, {20}, torch::kLong);
    torch::NoGradGuard no_grad;
    Tensor ours = m.value()->forward(idx.unsqueeze(0)).squeeze(0);
    CHECK(MaxDiff(ours, l.Forward(idx)) < 1e-4);
    // The scaling matters here: the same weights without it give other logits.
    LlamaCase plain(type, hd, false);
    CHECK(MaxDiff(plain.Forward(idx), l.Forward(idx)) > 1e-3);
    // The streaming decoder's RoPE tables carry the scaling too.
    auto decoder = decode::KvDecoder::Create(m.value().get(), {/*prefill_chunk=*/6});
    REQUIRE(decoder.ok());
    CHECK(MaxDiff(decoder.value()->Prefill(idx.unsqueeze(0)).squeeze(0), ours) < 1e-4);
  }
}

TEST_CASE("rope_scaling that is not llama3 or yarn is refused by name") {
  ModelConfig m;
  LlamaCase l("llama", 8, false);
  Json config = l.config;
  config["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  Status st = ModelConfigFromHf(config, "c.json", &m);
  CHECK(st.message() ==
        "c.json: $.rope_scaling.rope_type: expected \"default\", \"llama3\" or \"yarn\", got "
        "\"dynamic\"");
  config["rope_scaling"] = {
      {"type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}};
  st = ModelConfigFromHf(config, "c.json", &m);
  CHECK(st.message() == "c.json: $.rope_scaling.original_max_position_embeddings: missing");
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"mscale", 0.707}};
  st = ModelConfigFromHf(config, "c.json", &m);
  CHECK(st.message() == "c.json: $.rope_scaling.mscale: not supported (YaRN's DeepSeek variant)");
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 0.5}};
  st = ModelConfigFromHf(config, "c.json", &m);
  CHECK(st.message() == "c.json: $.rope_scaling.factor: expected a number >= 1, got 0.5");
  config["rope_scaling"] = {{"rope_type", "default"}};
  CHECK(ModelConfigFromHf(config, "c.json", &m).ok());
  CHECK(m.rope_scaling.type.empty());
}

TEST_CASE("a bf16 checkpoint imports into bf16 weights bit for bit, and into fp32 ones exactly") {
  for (const char* type : {"llama", "qwen2", "qwen3"}) {
    INFO(type);
    testing::TempDir dir("headlab-import");
    LlamaCase l(type, 16, /*tie=*/false,
                std::string(type) == "llama" ? kLlama3Scaling : Json(nullptr),
                /*bf16=*/true);
    l.ck.Write(dir.path(), l.config);
    StatusOr<Gpt> bf16 = Import(dir.path(), 20, torch::kBFloat16);
    INFO(bf16.status().ToString());
    REQUIRE(bf16.ok());
    StatusOr<Gpt> fp32 = Import(dir.path(), 20);
    REQUIRE(fp32.ok());
    // Matrices held in bf16 with the checkpoint's bits; gains and biases in fp32 (exact).
    auto ours = bf16.value()->named_parameters();
    for (const auto& p : fp32.value()->named_parameters()) {
      INFO(p.key());
      const Tensor& b = ours[p.key()];
      CHECK(b.scalar_type() == (p.value().dim() >= 2 ? torch::kBFloat16 : torch::kFloat));
      CHECK(torch::equal(b.to(torch::kFloat), p.value()));
    }
    CHECK(bf16.value()->HeadWeight().scalar_type() == torch::kBFloat16);
    // The fp32 import of the bf16 values is the reference model exactly.
    Tensor idx = torch::randint(0, 60, {20}, torch::kLong);
    torch::NoGradGuard no_grad;
    CHECK(MaxDiff(fp32.value()->forward(idx.unsqueeze(0)).squeeze(0), l.Forward(idx)) < 1e-4);
  }
}

// Every layer of the imported families takes the fast path (grouped-query layers: one
// kernel segment over all heads) with q/k biases, q/k norms, RoPE scaling and streaming
// heads: no dense fallback; on the CPU the kernels' stand-ins compute it
// (SetFastPathOnCpuForTesting), equal to the dense reference.
TEST_CASE("imported GQA layers with biases, q/k norms and streaming heads run the fused path") {
  for (auto [type, scaling] : {std::tuple<const char*, Json>{"llama", kLlama3Scaling},
                               {"qwen2", kYarnScaling},
                               {"qwen3", nullptr}}) {
    INFO(type);
    testing::TempDir dir("headlab-import");
    LlamaCase l(type, 64, /*tie=*/false, scaling);
    l.ck.Write(dir.path(), l.config);
    StatusOr<Gpt> m = Import(dir.path(), 20);
    REQUIRE(m.ok());
    for (int64_t layer = 0; layer < 2; ++layer)  // the first KV group's heads stream
      for (int64_t h = 0; h < 2; ++h)
        m.value()->attention(layer)->SetHeadState(h, {HeadMode::kStreaming, 0, 2, 5});
    Tensor idx = torch::randint(0, 60, {2, 20}, torch::kLong);
    torch::NoGradGuard no_grad;
    Tensor dense = m.value()->forward(idx);
    CHECK(AttentionPaths(m.value()) == Json{{"dense_reference", {0, 1}}});
    SetFastPathOnCpuForTesting(true);
    Tensor fast = m.value()->forward(idx);
    SetFastPathOnCpuForTesting(false);
    CHECK(AttentionPaths(m.value()) ==
          Json{{"fused[4] kernel=cpu_stand_in", {0, 1}}});  // one segment, no dense
    CHECK(MaxDiff(fast, dense) < 1e-4);
  }
}

// The published config.json values of the models AoH measures (their Hugging Face
// repositories' config files), as far as headlab reads them.
const Json kPublishedConfigs[] = {{{"model_type", "llama"},
                                   {"hidden_size", 4096},
                                   {"intermediate_size", 14336},
                                   {"num_hidden_layers", 32},
                                   {"num_attention_heads", 32},
                                   {"num_key_value_heads", 8},
                                   {"head_dim", 128},
                                   {"rms_norm_eps", 1e-5},
                                   {"rope_theta", 500000.0},
                                   {"vocab_size", 128256},
                                   {"tie_word_embeddings", false},
                                   {"hidden_act", "silu"},
                                   {"max_position_embeddings", 131072},
                                   {"attention_bias", false},
                                   {"mlp_bias", false},
                                   {"rope_scaling",
                                    {{"factor", 8.0},
                                     {"low_freq_factor", 1.0},
                                     {"high_freq_factor", 4.0},
                                     {"original_max_position_embeddings", 8192},
                                     {"rope_type", "llama3"}}}},
                                  {{"model_type", "qwen2"},
                                   {"hidden_size", 3584},
                                   {"intermediate_size", 18944},
                                   {"num_hidden_layers", 28},
                                   {"num_attention_heads", 28},
                                   {"num_key_value_heads", 4},
                                   {"rms_norm_eps", 1e-6},
                                   {"rope_theta", 1000000.0},
                                   {"vocab_size", 152064},
                                   {"tie_word_embeddings", false},
                                   {"hidden_act", "silu"},
                                   {"max_position_embeddings", 32768},
                                   {"use_sliding_window", false},
                                   {"rope_scaling", nullptr}},
                                  {{"model_type", "qwen3"},
                                   {"hidden_size", 4096},
                                   {"intermediate_size", 12288},
                                   {"num_hidden_layers", 36},
                                   {"num_attention_heads", 32},
                                   {"num_key_value_heads", 8},
                                   {"head_dim", 128},
                                   {"rms_norm_eps", 1e-6},
                                   {"rope_theta", 1000000.0},
                                   {"vocab_size", 151936},
                                   {"tie_word_embeddings", false},
                                   {"hidden_act", "silu"},
                                   {"max_position_embeddings", 40960},
                                   {"attention_bias", false},
                                   {"use_sliding_window", false},
                                   {"rope_scaling", nullptr}}};

TEST_CASE("the pretrained-family presets are the architectures of their published config.json") {
  const char* presets[] = {"llama3.1-8b", "qwen2.5-7b", "qwen3-8b"};
  for (size_t i = 0; i < 3; ++i) {
    INFO(presets[i]);
    StatusOr<Json> run = NormalizeRunConfig(Json{{"model", {{"preset", presets[i]}}}}, "p.json");
    REQUIRE(run.ok());
    StatusOr<ExecConfig> exec = ExecConfigFromJson(run.value(), "p.json");
    INFO(exec.status().ToString());
    REQUIRE(exec.ok());
    const ModelConfig& p = exec->model;
    ModelConfig hf;
    hf.context = p.context;
    REQUIRE(ModelConfigFromHf(kPublishedConfigs[i], "config.json", &hf).ok());
    CHECK(p.context == kPublishedConfigs[i]["max_position_embeddings"].get<int64_t>());
    CHECK(p.family == hf.family);
    CHECK(p.layers == hf.layers);
    CHECK(p.heads == hf.heads);
    CHECK(p.kv_heads == hf.kv_heads);
    CHECK(p.width == hf.width);
    CHECK(p.HeadDim() == hf.HeadDim());
    CHECK(p.MlpHidden() == hf.MlpHidden());
    CHECK(p.mlp_ratio == hf.mlp_ratio);
    CHECK(p.vocab == hf.vocab);
    CHECK(p.pos == hf.pos);
    CHECK(p.norm == hf.norm);
    CHECK(p.NormEps() == hf.NormEps());
    CHECK(p.rope_base == hf.rope_base);
    CHECK(p.rope_scaling == hf.rope_scaling);
    CHECK(p.mlp_act == hf.mlp_act);
    CHECK(p.attn_bias == hf.attn_bias);
    CHECK(p.out_bias == hf.out_bias);
    CHECK(p.mlp_bias == hf.mlp_bias);
    CHECK(p.qk_norm == hf.qk_norm);
    CHECK(p.tie_head == hf.tie_head);
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
    CHECK(m.status().message() ==
          d +
              "/model.safetensors: tensor h.1.attn.c_proj.weight has shape [16, 12], expected "
              "[16, 16] from " +
              d +
              "/config.json and model.context (headlab parameter "
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
    CHECK(m.status().message().find(
              "tensor h.0.attn.extra.weight is not part of the gpt2 architecture") !=
          std::string::npos);
  }
  SECTION("a context beyond the learned positions") {
    g.ck.Write(d, g.config);
    StatusOr<Gpt> m = Import(d, 64);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message().find(
              "$.n_positions: the checkpoint has 40 learned positions; model.context 64") !=
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
    CHECK(m.status().message() ==
          d + "/config.json: $.model_type: expected gpt2, llama, mistral, qwen2 or qwen3, "
              "got \"t5\"");
  }
}

TEST_CASE(
    "byte-level data for an imported model with a larger vocabulary is a tokenizer mismatch") {
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
  CHECK(st.message().find(
            "tokenizer mismatch: the builtin corpus (byte-level, 256 tokens) for the model at " +
            dir.path() + ", whose vocabulary has 50 tokens") != std::string::npos);
}

}  // namespace
}  // namespace headlab
