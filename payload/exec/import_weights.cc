// Name mapping, layout transforms and shape checks of checkpoint import.
#include "payload/exec/import_weights.h"

#include <functional>
#include <map>
#include <set>

#include "common/sha256.h"
#include "payload/exec/safetensors.h"

namespace headlab {
namespace {

// One headlab parameter and where its values come from: checkpoint tensor `name`,
// transposed first when `transpose` (GPT-2's Conv1D stores [in, out]), then rows
// [row0, row0 + rows) of dimension 0 of a source with `full_rows` rows (rows < 0: all of
// it), or its first rows when `prefix` (GPT-2's wpe: the first model.context positions).
struct Source {
  std::string name;
  bool transpose = false;
  int64_t row0 = 0, rows = -1, full_rows = -1;
  bool prefix = false;
};

// The checkpoint's tensor in its own dtype, without a copy (a view of the loaded file): the
// copy into a parameter converts it to the parameter's dtype in one pass, so a bf16
// checkpoint goes into bf16 weights as is and into fp32 ones without a float copy first.
StatusOr<torch::Tensor> View(const SafeTensor& t, const std::string& name) {
  c10::ScalarType type;
  if (t.dtype == "F32")
    type = torch::kFloat;
  else if (t.dtype == "F16")
    type = torch::kHalf;
  else if (t.dtype == "BF16")
    type = torch::kBFloat16;
  else if (t.dtype == "F64")
    type = torch::kDouble;
  else
    return Status::InvalidArgument(t.file + ": tensor " + name + " has dtype " + t.dtype +
                                   ", expected F32, F16, BF16 or F64");
  return torch::from_blob(const_cast<uint8_t*>(t.data), t.shape, torch::dtype(type));
}

bool Ignorable(const std::string& name) {
  auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".attn.bias") || ends(".attn.masked_bias") || ends("rotary_emb.inv_freq");
}

// The headlab parameter name -> source map of `model`'s family.
std::map<std::string, Source> NameMap(const ModelConfig& c, const std::set<std::string>& names) {
  std::map<std::string, Source> m;
  const int64_t q_rows = c.heads * c.HeadDim(), kv_rows = c.kv_heads * c.HeadDim();
  if (c.family == "gpt2") {
    const std::string pre = names.count("transformer.wte.weight") ? "transformer." : "";
    m["wte.weight"] = {pre + "wte.weight"};
    m["wpe.weight"] = {pre + "wpe.weight", false, 0, -1, -1, true};
    m["ln_f.weight"] = {pre + "ln_f.weight"};
    m["ln_f.bias"] = {pre + "ln_f.bias"};
    for (int64_t i = 0; i < c.layers; ++i) {
      const std::string h = pre + "h." + std::to_string(i) + ".",
                        b = "blocks." + std::to_string(i) + ".";
      for (const char* wb : {"weight", "bias"}) {
        const bool t = std::string(wb) == "weight";  // Conv1D weights are [in, out]
        m[b + "ln1." + wb] = {h + "ln_1." + wb};
        m[b + "ln2." + wb] = {h + "ln_2." + wb};
        const int64_t all = q_rows + 2 * kv_rows;
        m[b + "attn.q_proj." + wb] = {h + "attn.c_attn." + wb, t, 0, q_rows, all};
        m[b + "attn.k_proj." + wb] = {h + "attn.c_attn." + wb, t, q_rows, kv_rows, all};
        m[b + "attn.v_proj." + wb] = {h + "attn.c_attn." + wb, t, q_rows + kv_rows, kv_rows, all};
        m[b + "attn.o_proj." + wb] = {h + "attn.c_proj." + wb, t};
        m[b + "fc." + wb] = {h + "mlp.c_fc." + wb, t};
        m[b + "proj." + wb] = {h + "mlp.c_proj." + wb, t};
      }
    }
    if (!c.tie_head) m["head.weight"] = {"lm_head.weight"};
    return m;
  }
  m["wte.weight"] = {"model.embed_tokens.weight"};
  m["ln_f.weight"] = {"model.norm.weight"};
  if (!c.tie_head) m["head.weight"] = {"lm_head.weight"};
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string h = "model.layers." + std::to_string(i) + ".",
                      b = "blocks." + std::to_string(i) + ".";
    m[b + "ln1.weight"] = {h + "input_layernorm.weight"};
    m[b + "ln2.weight"] = {h + "post_attention_layernorm.weight"};
    for (const char* p : {"q", "k", "v", "o"})
      for (const char* wb : {"weight", "bias"})
        m[b + "attn." + p + "_proj." + wb] = {h + "self_attn." + p + "_proj." + wb};
    m[b + "attn.q_norm"] = {h + "self_attn.q_norm.weight"};
    m[b + "attn.k_norm"] = {h + "self_attn.k_norm.weight"};
    for (const char* wb : {"weight", "bias"}) {
      m[b + "gate." + wb] = {h + "mlp.gate_proj." + wb};
      m[b + "fc." + wb] = {h + "mlp.up_proj." + wb};
      m[b + "proj." + wb] = {h + "mlp.down_proj." + wb};
    }
  }
  return m;
}

}  // namespace

Status ImportWeights(GptImpl& model, const std::string& dir, ImportInfo* info) {
  const ModelConfig& c = model.config();
  StatusOr<SafeTensorSet> set = SafeTensorSet::Open(dir);
  if (!set.ok()) return set.status();
  const auto& tensors = set->tensors();
  std::set<std::string> names;
  for (const auto& [n, t] : tensors) names.insert(n);
  const std::map<std::string, Source> map = NameMap(c, names);
  std::set<std::string> used;
  torch::NoGradGuard no_grad;
  for (auto& p : model.named_parameters()) {
    const std::string& name = p.key();
    auto it = map.find(name);
    if (it == map.end())
      return Status::Internal("import: no checkpoint name for parameter " + name + " of family " +
                              c.family);
    const Source& src = it->second;
    auto t = tensors.find(src.name);
    if (t == tensors.end())
      return Status::InvalidArgument(
          set->source() + ": tensor " + src.name + " is missing; the " + c.family +
          " architecture of " + dir + "/config.json needs it (shape " +
          ShapeString(p.value().sizes().vec()) + ", headlab parameter " + name + ")");
    StatusOr<torch::Tensor> value = View(t->second, src.name);
    if (!value.ok()) return value.status();
    torch::Tensor v = value.value();
    if (src.transpose && v.dim() == 2) v = v.t();
    const std::vector<int64_t> want = p.value().sizes().vec();
    // The source's expected rows (dimension 0 after the transpose).
    const int64_t rows = src.rows >= 0 ? src.full_rows : want[0];
    bool fits =
        v.dim() == int64_t(want.size()) && (src.prefix ? v.size(0) >= want[0] : v.size(0) == rows);
    for (int64_t d = 1; fits && d < v.dim(); ++d) fits = v.size(d) == want[size_t(d)];
    if (!fits) {
      std::vector<int64_t> expected = want;
      expected[0] = rows;
      if (src.transpose && expected.size() == 2) std::swap(expected[0], expected[1]);
      std::string e = ShapeString(expected);
      if (src.prefix) e = "[>= " + std::to_string(want[0]) + ", " + std::to_string(want[1]) + "]";
      return Status::InvalidArgument(set->source() + ": tensor " + src.name + " has shape " +
                                     ShapeString(t->second.shape) + ", expected " + e + " from " +
                                     dir + "/config.json and model.context (headlab parameter " +
                                     name + ")");
    }
    if (src.prefix)
      v = v.narrow(0, 0, want[0]);
    else if (src.rows >= 0)
      v = v.narrow(0, src.row0, src.rows);
    p.value().copy_(v);
    used.insert(src.name);
  }
  for (const auto& [n, t] : tensors) {
    if (used.count(n) || Ignorable(n)) continue;
    if (n == "lm_head.weight" && c.tie_head) {
      // A tied checkpoint may still store the head: it must be the embedding.
      StatusOr<torch::Tensor> head = View(t, n);
      if (!head.ok()) return head.status();
      const torch::Tensor& wte = model.wte->weight;
      if (head->sizes() != wte.sizes() || !torch::equal(head->to(wte.scalar_type()), wte))
        return Status::InvalidArgument(set->source() +
                                       ": lm_head.weight differs from the token embedding, but " +
                                       dir + "/config.json ties them (tie_word_embeddings)");
      continue;
    }
    return Status::InvalidArgument(set->source() + ": tensor " + n + " is not part of the " +
                                   c.family + " architecture that " + dir +
                                   "/config.json describes");
  }
  if (info) {
    info->source = set->source();
    info->tensors = int64_t(used.size());
    Sha256 h;
    std::vector<std::string> files = {dir + "/config.json"};
    files.insert(files.end(), set->files().begin(), set->files().end());
    for (const std::string& f : files) {
      StatusOr<std::string> s = Sha256File(f);
      if (!s.ok()) return s.status();
      h.Update(s.value());
    }
    info->sha256 = h.HexDigest();
  }
  return Status::Ok();
}

Status InitFromCheckpoint(GptImpl& model, const ModelConfig& c, Json* provenance) {
  if (c.init_from.empty()) return Status::Ok();
  ImportInfo info;
  HEADLAB_RETURN_IF_ERROR(ImportWeights(model, c.init_from, &info));
  if (provenance) {
    (*provenance)["init_from"] = c.init_from;
    (*provenance)["init_from_sha256"] = info.sha256;
    (*provenance)["init_from_family"] = c.family;
  }
  return Status::Ok();
}

}  // namespace headlab
