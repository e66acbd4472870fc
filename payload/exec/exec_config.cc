// Normalized JSON run config -> ExecConfig.
#include "payload/exec/exec_config.h"

#include "common/model_presets.h"
#include "payload/exec/hf_config.h"

namespace headlab {
namespace {

// Reads dotted `path` of `root` into *out; a missing key or wrong type names the path.
class FieldReader {
 public:
  FieldReader(const Json& root, const std::string& file) : root_(root), file_(file) {}

  template <typename T>
  void Read(const std::string& path, T* out) {
    if (!status_.ok()) return;
    const Json* node = &root_;
    size_t begin = 0;
    while (begin <= path.size()) {
      size_t dot = path.find('.', begin);
      std::string part =
          path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
      if (!node->is_object() || !node->contains(part)) {
        status_ = Status::InvalidArgument(file_ + ": $.config." + path + ": missing");
        return;
      }
      node = &(*node)[part];
      if (dot == std::string::npos) break;
      begin = dot + 1;
    }
    if (!TypeMatches(*node, out)) {
      status_ = Status::InvalidArgument(file_ + ": $.config." + path + ": expected " +
                                        TypeName(out) + ", got " + node->dump());
      return;
    }
    *out = node->get<T>();
  }

  const Status& status() const { return status_; }

 private:
  static bool TypeMatches(const Json& j, int64_t*) { return j.is_number_integer(); }
  static bool TypeMatches(const Json& j, double*) { return j.is_number(); }
  static bool TypeMatches(const Json& j, std::string*) { return j.is_string(); }
  static const char* TypeName(int64_t*) { return "an integer"; }
  static const char* TypeName(double*) { return "a number"; }
  static const char* TypeName(std::string*) { return "a string"; }

  const Json& root_;
  const std::string& file_;
  Status status_;
};

// The architecture of model.preset `name` that has no run-config key (the keys it fills
// came through the normalized config, where explicit ones override them).
void ApplyPresetArchitecture(const std::string& name, ModelConfig* m) {
  const ModelPreset* p = FindModelPreset(name);
  if (p == nullptr) return;
  m->family = p->family;
  m->mlp_hidden = p->mlp_hidden;
  m->mlp_act = p->mlp_act;
  m->attn_bias = p->attn_bias;
  m->qk_norm = p->qk_norm;
  m->tie_head = p->tie_head;
  m->norm_eps = p->norm_eps;
  m->rope_scaling = RopeScaling();
  m->rope_scaling.type = p->rope_scaling;
  if (!m->rope_scaling.type.empty()) {
    m->rope_scaling.factor = p->rope_factor;
    m->rope_scaling.low_freq_factor = p->rope_low_freq_factor;
    m->rope_scaling.high_freq_factor = p->rope_high_freq_factor;
    m->rope_scaling.original_context = p->rope_original_context;
  }
  if (m->mlp_hidden > 0) m->mlp_ratio = double(m->mlp_hidden) / double(m->width);
}

}  // namespace

StatusOr<ExecConfig> ExecConfigFromJson(const Json& config, const std::string& file) {
  ExecConfig c;
  FieldReader r(config, file);
  r.Read("kind", &c.kind);
  r.Read("seed", &c.seed);
  r.Read("model.layers", &c.model.layers);
  r.Read("model.heads", &c.model.heads);
  r.Read("model.width", &c.model.width);
  r.Read("model.context", &c.model.context);
  r.Read("model.mlp_ratio", &c.model.mlp_ratio);
  r.Read("model.vocab", &c.model.vocab);
  r.Read("model.kv_heads", &c.model.kv_heads);
  r.Read("model.pos", &c.model.pos);
  r.Read("model.rope_base", &c.model.rope_base);
  r.Read("model.norm", &c.model.norm);
  r.Read("model.init_from", &c.model.init_from);
  std::string preset;
  r.Read("model.preset", &preset);
  std::string head_modes;
  r.Read("model.head_modes", &head_modes);
  r.Read("train.steps", &c.train.steps);
  r.Read("train.batch_size", &c.train.batch_size);
  r.Read("train.lr", &c.train.lr);
  r.Read("train.min_lr_ratio", &c.train.min_lr_ratio);
  r.Read("train.warmup_steps", &c.train.warmup_steps);
  r.Read("train.weight_decay", &c.train.weight_decay);
  r.Read("train.beta1", &c.train.beta1);
  r.Read("train.beta2", &c.train.beta2);
  r.Read("train.grad_clip", &c.train.grad_clip);
  r.Read("train.eval_every", &c.train.eval_every);
  r.Read("train.eval_batches", &c.train.eval_batches);
  r.Read("train.log_every", &c.train.log_every);
  r.Read("train.checkpoint_every", &c.train.checkpoint_every);
  r.Read("train.time_budget_s", &c.train.time_budget_s);
  r.Read("train.grad_accum", &c.train.grad_accum);
  r.Read("train.device", &c.train.device);
  r.Read("train.threads", &c.train.threads);
  r.Read("train.ranks", &c.train.ranks);
  r.Read("train.allreduce_dtype", &c.train.allreduce_dtype);
  r.Read("train.precision", &c.train.precision);
  r.Read("train.attention", &c.train.attention);
  r.Read("data.source", &c.data.source);
  r.Read("data.path", &c.data.path);
  r.Read("data.val_fraction", &c.data.val_fraction);
  r.Read("data.calib_fraction", &c.data.calib_fraction);
  r.Read("data.retrieval_fraction", &c.data.retrieval_fraction);
  r.Read("data.retrieval_tasks", &c.data.retrieval_tasks);
  r.Read("noop.duration_ms", &c.noop.duration_ms);
  r.Read("noop.metrics", &c.noop.metrics);
  if (!r.status().ok()) return r.status();
  if (c.model.kv_heads == 0) c.model.kv_heads = c.model.heads;
  ApplyPresetArchitecture(preset, &c.model);
  if (!c.model.init_from.empty())
    HEADLAB_RETURN_IF_ERROR(ReadHfModelConfig(c.model.init_from, &c.model));
  StatusOr<std::vector<HeadAssignment>> modes = ParseHeadModes(
      head_modes, c.model.layers, c.model.heads, file + ": $.config.model.head_modes");
  if (!modes.ok()) return modes.status();
  c.model.head_modes = modes.value();
  return c;
}

}  // namespace headlab
