// config.json mapping of the GPT-2 and Llama families.
#include "payload/exec/hf_config.h"

#include "common/files.h"

namespace headlab {
namespace {

// Reads typed keys of a config.json object; the first failure is kept.
class HfReader {
 public:
  HfReader(const Json& j, const std::string& path) : j_(j), path_(path) {}

  int64_t Int(const char* key, int64_t def, bool required, int64_t min = 1) {
    if (!j_.contains(key) || j_[key].is_null()) {
      if (required) Fail(key, "missing");
      return def;
    }
    if (!j_[key].is_number_integer() || j_[key].get<int64_t>() < min || j_[key].get<int64_t>() > 100000000) {
      Fail(key, "expected an integer >= " + std::to_string(min) + ", got " + j_[key].dump());
      return def;
    }
    return j_[key].get<int64_t>();
  }
  double Num(const char* key, double def) {
    if (!j_.contains(key) || j_[key].is_null()) return def;
    if (!j_[key].is_number() || !(j_[key].get<double>() > 0)) {
      Fail(key, "expected a number > 0, got " + j_[key].dump());
      return def;
    }
    return j_[key].get<double>();
  }
  bool Bool(const char* key, bool def) {
    if (!j_.contains(key) || j_[key].is_null()) return def;
    if (!j_[key].is_boolean()) {
      Fail(key, "expected true or false, got " + j_[key].dump());
      return def;
    }
    return j_[key].get<bool>();
  }
  std::string Str(const char* key, const std::string& def) {
    if (!j_.contains(key) || j_[key].is_null()) return def;
    if (!j_[key].is_string()) {
      Fail(key, "expected a string, got " + j_[key].dump());
      return def;
    }
    return j_[key].get<std::string>();
  }
  void Fail(const std::string& key, const std::string& what) {
    if (status_.ok()) status_ = Status::InvalidArgument(path_ + ": $." + key + ": " + what);
  }
  const Status& status() const { return status_; }

 private:
  const Json& j_;
  const std::string& path_;
  Status status_;
};

}  // namespace

Status ModelConfigFromHf(const Json& j, const std::string& path, ModelConfig* m) {
  if (!j.is_object()) return Status::InvalidArgument(path + ": expected a JSON object");
  HfReader r(j, path);
  const std::string type = r.Str("model_type", "");
  if (type == "gpt2") {
    m->family = "gpt2";
    m->layers = r.Int("n_layer", 0, true);
    m->heads = r.Int("n_head", 0, true);
    m->width = r.Int("n_embd", 0, true);
    m->vocab = r.Int("vocab_size", 0, true);
    m->kv_heads = m->heads;
    m->head_dim = 0;
    m->mlp_hidden = r.Int("n_inner", 4 * m->width, false);
    const int64_t positions = r.Int("n_positions", r.Int("n_ctx", 1024, false), false);
    const std::string act = r.Str("activation_function", "gelu_new");
    if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") m->mlp_act = "gelu_tanh";
    else if (act == "gelu") m->mlp_act = "gelu";
    else r.Fail("activation_function", "expected gelu_new, gelu_pytorch_tanh or gelu, got \"" + act + "\"");
    m->norm_eps = r.Num("layer_norm_epsilon", 1e-5);
    if (r.Bool("scale_attn_by_inverse_layer_idx", false))
      r.Fail("scale_attn_by_inverse_layer_idx", "true is not supported");
    m->pos = "learned";
    m->norm = "layernorm";
    m->attn_bias = m->out_bias = m->mlp_bias = true;
    m->qk_norm = false;
    m->tie_head = r.Bool("tie_word_embeddings", true);
    HEADLAB_RETURN_IF_ERROR(r.status());
    if (m->context > positions)
      return Status::InvalidArgument(path + ": $.n_positions: the checkpoint has " + std::to_string(positions) +
                                     " learned positions; model.context " + std::to_string(m->context) +
                                     " needs that many (set model.context <= " + std::to_string(positions) + ")");
  } else if (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3") {
    m->family = type;
    m->layers = r.Int("num_hidden_layers", 0, true);
    m->heads = r.Int("num_attention_heads", 0, true);
    m->width = r.Int("hidden_size", 0, true);
    m->vocab = r.Int("vocab_size", 0, true);
    m->kv_heads = r.Int("num_key_value_heads", m->heads, false);
    m->mlp_hidden = r.Int("intermediate_size", 0, true);
    m->head_dim = r.Int("head_dim", 0, false);
    m->rope_base = r.Num("rope_theta", 10000.0);
    m->norm_eps = r.Num("rms_norm_eps", 1e-6);
    const std::string act = r.Str("hidden_act", "silu");
    if (act != "silu") r.Fail("hidden_act", "expected \"silu\" (SwiGLU), got \"" + act + "\"");
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
      r.Fail("rope_scaling", "only null is supported (no Llama 3.1 / YaRN frequency scaling), got " +
                                 j["rope_scaling"].dump().substr(0, 80));
    const bool sliding = r.Bool("use_sliding_window", false) ||
                         (type == "mistral" && j.contains("sliding_window") && !j["sliding_window"].is_null());
    if (sliding) r.Fail(type == "mistral" ? "sliding_window" : "use_sliding_window", "sliding-window attention is not supported");
    m->pos = "rope";
    m->norm = "rmsnorm";
    m->mlp_act = "swiglu";
    m->attn_bias = type == "qwen2" ? true : r.Bool("attention_bias", false);
    m->out_bias = type == "qwen2" ? false : m->attn_bias;
    m->mlp_bias = r.Bool("mlp_bias", false);
    m->qk_norm = type == "qwen3";
    m->tie_head = r.Bool("tie_word_embeddings", type != "llama" && type != "mistral");
    HEADLAB_RETURN_IF_ERROR(r.status());
  } else {
    return Status::InvalidArgument(path + ": $.model_type: expected gpt2, llama, mistral, qwen2 or qwen3, got \"" +
                                   type + "\"");
  }
  if (m->heads % m->kv_heads != 0)
    return Status::InvalidArgument(path + ": num_key_value_heads " + std::to_string(m->kv_heads) +
                                   " does not divide num_attention_heads " + std::to_string(m->heads));
  if (m->head_dim == 0 && m->width % m->heads != 0)
    return Status::InvalidArgument(path + ": hidden size " + std::to_string(m->width) + " is not a multiple of " +
                                   std::to_string(m->heads) + " heads (and no head_dim is given)");
  if (m->pos == "rope" && m->HeadDim() % 2 != 0)
    return Status::InvalidArgument(path + ": RoPE needs an even head dimension, got " + std::to_string(m->HeadDim()));
  // The hybrid layer's per-head buffers and patterns assume the output projection maps
  // heads * head_dim back to the width; any head_dim works.
  m->mlp_ratio = double(m->MlpHidden()) / double(m->width);
  return Status::Ok();
}

Status ReadHfModelConfig(const std::string& dir, ModelConfig* m) {
  const std::string path = dir + "/config.json";
  if (!PathExists(path))
    return Status::NotFound(path + ": missing (model.init_from expects a Hugging Face checkpoint folder with "
                            "config.json and model.safetensors)");
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  StatusOr<Json> j = ParseJson(text.value(), path);
  if (!j.ok()) return j.status();
  return ModelConfigFromHf(j.value(), path, m);
}

}  // namespace headlab
