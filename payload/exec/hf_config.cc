// config.json mapping of the GPT-2 and Llama families.
#include "payload/exec/hf_config.h"

#include <utility>

#include "common/files.h"

namespace headlab {
namespace {

// Reads typed keys of a config.json object; the first failure is kept.
class HfReader {
 public:
  // `prefix` names the object j within the file in errors ("rope_scaling.").
  HfReader(const Json& j, const std::string& path, std::string prefix = "")
      : j_(j), path_(path), prefix_(std::move(prefix)) {}

  int64_t Int(const char* key, int64_t def, bool required, int64_t min = 1) {
    if (!j_.contains(key) || j_[key].is_null()) {
      if (required) Fail(key, "missing");
      return def;
    }
    if (!j_[key].is_number_integer() || j_[key].get<int64_t>() < min ||
        j_[key].get<int64_t>() > 100000000) {
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
    if (status_.ok())
      status_ = Status::InvalidArgument(path_ + ": $." + prefix_ + key + ": " + what);
  }
  const Status& status() const { return status_; }

 private:
  const Json& j_;
  const std::string& path_;
  std::string prefix_;
  Status status_;
};

// config.json's rope_scaling (null, or an object whose rope_type, or older type, is
// "default", "llama3" or "yarn") -> *s. Keys of other variants (linear, dynamic, longrope,
// DeepSeek's mscale) are refused by name rather than ignored.
Status ReadRopeScaling(const Json& j, const std::string& path, RopeScaling* s) {
  *s = RopeScaling();
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return Status::Ok();
  const Json& rs = j["rope_scaling"];
  const std::string where = path + ": $.rope_scaling";
  if (!rs.is_object())
    return Status::InvalidArgument(where + ": expected null or an object, got " +
                                   rs.dump().substr(0, 80));
  HfReader r(rs, path, "rope_scaling.");
  const std::string type = r.Str("rope_type", r.Str("type", ""));
  HEADLAB_RETURN_IF_ERROR(r.status());
  if (type == "default") return Status::Ok();
  if (type != "llama3" && type != "yarn")
    return Status::InvalidArgument(
        where + ".rope_type: expected \"default\", \"llama3\" or \"yarn\", got \"" + type + "\"");
  for (const char* key : {"mscale", "mscale_all_dim"})
    if (rs.contains(key) && !rs[key].is_null())
      return Status::InvalidArgument(where + "." + key +
                                     ": not supported (YaRN's DeepSeek variant)");
  s->type = type;
  s->factor = r.Num("factor", 0);
  if (!(s->factor >= 1))
    r.Fail("factor", "expected a number >= 1, got " +
                         (rs.contains("factor") ? rs["factor"].dump() : "nothing"));
  // YaRN's L defaults to the model's context, as in the reference implementation.
  const int64_t model_context =
      j.contains("max_position_embeddings") && j["max_position_embeddings"].is_number_integer()
          ? j["max_position_embeddings"].get<int64_t>()
          : 0;
  s->original_context = r.Int("original_max_position_embeddings", model_context,
                              /*required=*/type == "llama3" || model_context == 0);
  if (type == "llama3") {
    s->low_freq_factor = r.Num("low_freq_factor", 0);
    s->high_freq_factor = r.Num("high_freq_factor", 0);
    if (!(s->low_freq_factor > 0)) r.Fail("low_freq_factor", "missing");
    if (s->high_freq_factor <= s->low_freq_factor)
      r.Fail("high_freq_factor",
             "expected a number > low_freq_factor (" + std::to_string(s->low_freq_factor) + ")");
  } else {
    s->beta_fast = r.Num("beta_fast", 32);
    s->beta_slow = r.Num("beta_slow", 1);
    s->attention_factor = r.Num("attention_factor", 0);
    if (s->beta_fast <= s->beta_slow)
      r.Fail("beta_fast", "expected a number > beta_slow (" + std::to_string(s->beta_slow) + ")");
  }
  return r.status();
}

}  // namespace

Status ModelConfigFromHf(const Json& j, const std::string& path, ModelConfig* m) {
  if (!j.is_object()) return Status::InvalidArgument(path + ": expected a JSON object");
  HfReader r(j, path);
  const std::string type = r.Str("model_type", "");
  if (type == "gpt2") {
    m->family = "gpt2";
    m->rope_scaling = RopeScaling();
    m->layers = r.Int("n_layer", 0, true);
    m->heads = r.Int("n_head", 0, true);
    m->width = r.Int("n_embd", 0, true);
    m->vocab = r.Int("vocab_size", 0, true);
    m->kv_heads = m->heads;
    m->head_dim = 0;
    m->mlp_hidden = r.Int("n_inner", 4 * m->width, false);
    const int64_t positions = r.Int("n_positions", r.Int("n_ctx", 1024, false), false);
    const std::string act = r.Str("activation_function", "gelu_new");
    if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast")
      m->mlp_act = "gelu_tanh";
    else if (act == "gelu")
      m->mlp_act = "gelu";
    else
      r.Fail("activation_function",
             "expected gelu_new, gelu_pytorch_tanh or gelu, got \"" + act + "\"");
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
      return Status::InvalidArgument(
          path + ": $.n_positions: the checkpoint has " + std::to_string(positions) +
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
    HEADLAB_RETURN_IF_ERROR(r.status());
    HEADLAB_RETURN_IF_ERROR(ReadRopeScaling(j, path, &m->rope_scaling));
    const bool sliding =
        r.Bool("use_sliding_window", false) ||
        (type == "mistral" && j.contains("sliding_window") && !j["sliding_window"].is_null());
    if (sliding)
      r.Fail(type == "mistral" ? "sliding_window" : "use_sliding_window",
             "sliding-window attention is not supported");
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
    return Status::InvalidArgument(
        path + ": $.model_type: expected gpt2, llama, mistral, qwen2 or qwen3, got \"" + type +
        "\"");
  }
  if (m->heads % m->kv_heads != 0)
    return Status::InvalidArgument(path + ": num_key_value_heads " + std::to_string(m->kv_heads) +
                                   " does not divide num_attention_heads " +
                                   std::to_string(m->heads));
  if (m->head_dim == 0 && m->width % m->heads != 0)
    return Status::InvalidArgument(path + ": hidden size " + std::to_string(m->width) +
                                   " is not a multiple of " + std::to_string(m->heads) +
                                   " heads (and no head_dim is given)");
  if (m->pos == "rope" && m->HeadDim() % 2 != 0)
    return Status::InvalidArgument(path + ": RoPE needs an even head dimension, got " +
                                   std::to_string(m->HeadDim()));
  // The hybrid layer's per-head buffers and patterns assume the output projection maps
  // heads * head_dim back to the width; any head_dim works.
  m->mlp_ratio = double(m->MlpHidden()) / double(m->width);
  return Status::Ok();
}

Status ReadHfModelConfig(const std::string& dir, ModelConfig* m) {
  const std::string path = dir + "/config.json";
  if (!PathExists(path))
    return Status::NotFound(
        path +
        ": missing (model.init_from expects a Hugging Face checkpoint folder with "
        "config.json and model.safetensors)");
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  StatusOr<Json> j = ParseJson(text.value(), path);
  if (!j.ok()) return j.status();
  return ModelConfigFromHf(j.value(), path, m);
}

}  // namespace headlab
