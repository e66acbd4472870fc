// The run-config schema as one table: each leaf key's type, range, default and allowed
// strings. DefaultRunConfig, validation and the CLI's export columns all read this table,
// so adding a core key is one line here; a method's keys are its registered section
// (common/method_schema.h).
#include "common/run_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "common/error_list.h"
#include "common/head_list.h"
#include "common/method_schema.h"
#include "common/model_presets.h"
#include "common/run_config_schema.h"
#include "common/suggest.h"
#include "common/utf8.h"

namespace headlab {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kMaxParamNameBytes = 64;

// Inserts each method's keys (MethodSchemas) after the last key of the section it names in
// `after`, in turn, so that a section may follow another method's; sections whose anchor
// never appears go at the end, by name.
void AddMethodSections(std::vector<ConfigKey>* keys) {
  auto section_of = [](const std::string& key) { return key.substr(0, key.find('.')); };
  std::vector<const MethodSchema*> pending;
  for (const MethodSchema& m : MethodSchemas()) pending.push_back(&m);
  for (bool placed = true; placed && !pending.empty();) {
    placed = false;
    for (auto it = pending.begin(); it != pending.end(); ++it) {
      auto last = std::find_if(keys->rbegin(), keys->rend(), [&](const ConfigKey& k) {
        return section_of(k.key) == (*it)->after;
      });
      if (last == keys->rend()) continue;
      keys->insert(last.base(), (*it)->keys.begin(), (*it)->keys.end());
      pending.erase(it);
      placed = true;
      break;
    }
  }
  for (const MethodSchema* m : pending) keys->insert(keys->end(), m->keys.begin(), m->keys.end());
}

// The schema (schema/grid.md, "Run config"): the core sections here, each method's keys from
// its registered section (payload/methods/<m>/<m>_schema.cc). Order = documentation and
// export order.
const std::vector<ConfigKey>& Schema() {
  static const std::vector<ConfigKey> kSchema = [] {
    std::vector<ConfigKey> keys = {
        StrKey("kind", "train",
               "train|noop|bench-update|bench-prefill|bench-decode|mqar|passkey|flops|command",
               "what the worker runs: training, a no-op, a timing leg, a synthetic task, a FLOP "
               "count or the user's program (schema/exec.md, schema/command.md)"),
        IntKey("seed", 0, 9007199254740992.0, 0,
               "model init and data order (2^53: exact in every JSON reader)"),
        IntKey("model.layers", 1, 128, 2, "transformer blocks"),
        IntKey("model.heads", 1, 128, 4, "attention (query) heads per layer"),
        IntKey("model.width", 8, 65536, 128, "residual width, a multiple of model.heads"),
        IntKey("model.context", 8, 131072, 128, "sequence length T in tokens"),
        IntKey("model.mlp_ratio", 1, 64, 4, "MLP hidden width over model.width"),
        IntKey("model.vocab", 2, 1000000, 256,
               "vocabulary; at least 256 with the byte-level builtin corpus, 50257 with the GPT-2 "
               "BPE corpus"),
        StrKey(
            "model.preset", "", ModelPresetNames(),
            "a named shape (common/model_presets.h) that fills the fields it names; \"\" = none"),
        IntKey("model.kv_heads", 0, 128, 0,
               "GQA key/value heads, a divisor of model.heads; 0 = model.heads"),
        StrKey("model.pos", "learned", "learned|rope",
               "learned absolute positions or RoPE (an even head dimension)"),
        NumKey("model.rope_base", 0, kInf, 10000, "RoPE base", /*lo_open=*/true),
        StrKey("model.norm", "layernorm", "layernorm|rmsnorm", "the blocks' normalisation"),
        StrKey("model.head_modes", "", nullptr,
               "per-head attention states (payload/exec/head_state.h), e.g. "
               "`0.1=local:32,1.*=streaming:4:16,1.3=pruned`: (LAYER or *).(HEAD or *)=ordinary, "
               "pruned, local:W or streaming:SINK:RECENT; unlisted heads ordinary"),
        StrKey("model.init_from", "", nullptr,
               "a Hugging Face checkpoint folder (config.json + safetensors; schema/exec.md, "
               "\"Imported checkpoints\"): shape and weights come from it, the other model keys "
               "but context and head_modes are ignored; \"\" = a fresh model"),
        IntKey("train.steps", 0, 1e8, 200, "updates"),
        IntKey("train.batch_size", 1, 65536, 8, "sequences per micro-batch"),
        IntKey("train.grad_accum", 1, 65536, 1,
               "micro-batches per update; the loss is their mean, so an update sees batch_size x "
               "grad_accum sequences"),
        NumKey("train.lr", 0, 1, 3e-3, "peak learning rate (AdamW)", /*lo_open=*/true),
        NumKey("train.min_lr_ratio", 0, 1, 0.1,
               "the cosine schedule's final learning rate over the peak"),
        IntKey("train.warmup_steps", 0, 1e8, 20, "linear warm-up updates"),
        NumKey("train.weight_decay", 0, 10, 0.1, "AdamW weight decay"),
        NumKey("train.beta1", 0, 1, 0.9, "AdamW beta1", false, /*hi_open=*/true),
        NumKey("train.beta2", 0, 1, 0.95, "AdamW beta2", false, /*hi_open=*/true),
        NumKey("train.grad_clip", 0, kInf, 1.0, "global gradient-norm clip; 0 = no clipping"),
        IntKey("train.eval_every", 0, 1e8, 50,
               "updates between held-out evaluations; 0 = only at the end"),
        IntKey("train.eval_batches", 1, 1e6, 8, "batches per held-out evaluation"),
        IntKey("train.log_every", 1, 1e8, 10, "updates between training rows"),
        IntKey("train.checkpoint_every", 0, 1e8, 100,
               "updates between checkpoints; 0 = only at the end"),
        IntKey(
            "train.keep_checkpoints", 0, 1e6, 2,
            "retention (docs/DESIGN.md, \"Checkpoint retention\"): an attempt keeps its newest N "
            "checkpoints (0 = every one), the steps of train.keep_steps and each "
            "continuation's parent.step; the worker refuses a run whose disk cannot hold them"),
        StrKey("train.keep_steps", "", nullptr,
               "steps whose checkpoints are kept, e.g. `1500,2500`: the parent.step of "
               "continuations submitted after the run starts"),
        NumKey("train.time_budget_s", 0, kInf, 0,
               "> 0: matched time (SAF App. C.3.3): stop before an update would exceed the "
               "allowance (from process start); lr follows elapsed time over the steps' schedule"),
        StrKey("train.device", "auto", "auto|cpu|cuda",
               "where the model runs; auto = CUDA when present"),
        IntKey("train.threads", 0, 1024, 0, "CPU threads; 0 = the library default"),
        IntKey("train.ranks", 1, 64, 1,
               "data-parallel processes (payload/exec/dist.h): NCCL on CUDA (one GPU each: "
               "resources.gpus = ranks), Gloo on the CPU; each update sees ranks x batch_size x "
               "grad_accum sequences; kinds train and bench-update"),
        StrKey("train.allreduce_dtype", "fp32", JoinNames(kAllreduceDtypeNames),
               "the dtype gradients are all-reduced in (payload/exec/grad_reducer.h: 25 MB buckets "
               "started during the last micro-batch's backward); bf16 halves the bytes and rounds "
               "each update's mean gradient to bf16 once"),
        StrKey("train.precision", "auto", "auto|" + JoinNames(kPrecisionNames),
               "matmuls and attention in this dtype (payload/exec/precision.h); auto = bf16 on "
               "CUDA, fp32 on the CPU; master weights, AdamW state, norms' statistics and the "
               "loss stay fp32; fp16 adds dynamic loss scaling and needs CUDA"),
        StrKey("train.attention", "auto", JoinNames(kAttentionModeNames),
               "the attention implementation (payload/exec/attention_cuda.h): auto = per layer and "
               "shape, the plan measured fastest on CUDA (all-fused, or SDPA + fused kernels with "
               "fixed heads as GEMM, convolution or fused); fused = the fused kernels for every "
               "head; dense = the masked reference even on CUDA"),
        StrKey(
            "data.source", "builtin", "builtin|shards|corpus",
            "builtin: a byte-level corpus from Debian's text files; shards: train.bin/val.bin in "
            "data.path (`headlab data prepare`, or nanoGPT's uint16 shards; schema/exec.md, "
            "\"Token shards\"); corpus: the default corpus `make` prepares (GPT-2 BPE)"),
        StrKey("data.path", "", nullptr,
               "the shards' directory; with corpus, \"\" = BUILD/data/english-gpt2"),
        NumKey("data.val_fraction", 0, 0.5, 0.1,
               "the held-out reporting split's share of the tokens", /*lo_open=*/true),
        NumKey("data.calib_fraction", 0, 0.5, 0,
               "> 0: the last part of the training tokens is a calibration split that training and "
               "reporting never read (SAF App. A.1; saf/prune calib_split calib)"),
        NumKey("data.retrieval_fraction", 0, 0.9, 0,
               "f > 0: row n of the training stream is a synthetic retrieval sequence iff "
               "floor((n+1) f) > floor(n f), the tasks in turn (payload/exec/retrieval_mix.h), by "
               "seed alone"),
        StrKey("data.retrieval_tasks", "passkey,copy,recall", nullptr,
               "comma list of passkey, copy, recall"),
        IntKey("parent.run", 0, 9007199254740992.0, 0,
               "shared-parent continuation: start from this run's checkpoint of parent.step "
               "(weights, AdamW state, RNG, sampler position); the run waits for the parent to "
               "succeed and fails when it failed or lacks that checkpoint; 0 = no parent"),
        IntKey("parent.step", 0, 1e8, 0,
               "the parent's checkpoint step; 0 = its final one; > 0 needs a parent"),
        IntKey("parent.experiment", 0, 9007199254740992.0, 0,
               "or: the parent is the run of this experiment with arm parent.arm and this run's "
               "seed (exactly one; coordinator/parent.h), so a continuation grid pairs by seed; "
               "not with parent.run"),
        StrKey("parent.arm", "", nullptr, "the parent's arm in parent.experiment; \"\" = any"),
        IntKey(
            "time_match.experiment", -1, 9007199254740992.0, 0,
            "matched time from a measurement (SAF App. C.3.3): the run waits for the run of this "
            "experiment (-1 = its own) with arm time_match.arm and this run's seed (and "
            "parent.run), and starts with train.time_budget_s = that run's time.elapsed_s at "
            "its last update (coordinator/time_match.h); 0 = off"),
        StrKey("time_match.arm", "", nullptr, "the reference run's arm; \"\" = any"),
        StrKey("pair.group", "", nullptr,
               "paired timing (\"Paired timing\" below): the runs of one experiment with the same "
               "group run one at a time on one worker"),
        IntKey("pair.rep", 0, 1e6, 0, "the repetition, in ABBA order"),
        IntKey("pair.control", 0, 1, 0, "1 = a zero-replacement control leg"),
        NumKey("pair.tolerance", 0, 10, 0.05,
               "the control's ratio to the baseline must stay within 1 +- this"),
        // Timing run kinds bench-update (payload/exec/bench_update.h), bench-prefill and
        // bench-decode (payload/methods/aoh/bench_latency.h).
        IntKey("bench.warmup", 0, 1e6, 3, "bench-* kinds: untimed repetitions first (discarded)"),
        IntKey("bench.repeats", 1, 1e6, 10, "timed repetitions; the median is reported"),
        StrKey("bench.lengths", "", nullptr,
               "prefill/decode prompt lengths, a comma list; \"\" = model.context"),
        StrKey("bench.batch_sizes", "", nullptr,
               "prefill batch sizes, a comma list; \"\" = train.batch_size (bench-decode: 1)"),
        IntKey("bench.decode_tokens", 1, 1e6, 32, "bench-decode: tokens timed after each prefill"),
        StrKey("bench.fixed_heads", "", nullptr,
               "`L.H,...` (* wildcards) made fixed (SAF) heads with the uniform pattern (the cost "
               "does not depend on values); precision and attention from train.*"),
        // Run kind command (worker/command_run.h, schema/command.md): the user's program.
        StrKey("command.program", "", nullptr,
               "kind command (schema/command.md): the user's program; relative paths from the "
               "worker's directory"),
        StrKey("command.interpreter", "", nullptr,
               "its interpreter in PATH, e.g. python3; \"\" = run the program"),
        StrKey("command.args", "", nullptr, "extra arguments, split at blanks"),
        IntKey("noop.duration_ms", 0, 86400000, 0,
               "the no-op kind (benchmarks, tests of the service): how long it runs"),
        IntKey("noop.metrics", 0, 10000000, 0, "metric rows it reports"),
        // Synthetic task kinds mqar / passkey (payload/exec/task_eval.h).
        IntKey("mqar.vocab", 0, 1000000, 0,
               "kind mqar (SAF App. C.3.6): the task's vocabulary; 0 = model.vocab"),
        IntKey("mqar.seq_len", 0, 131072, 0, "sequence length; 0 = model.context"),
        IntKey("mqar.pairs", 1, 65536, 8, "key-value pairs per sequence"),
        NumKey("mqar.power_a", 0, 1, 0.01, "the query-gap distribution's power-law exponent a",
               /*lo_open=*/true),
        IntKey("mqar.eval_examples", 1, 1e6, 256,
               "held-out sequences for loss and accuracy at query positions"),
        IntKey(
            "mqar.updates", 0, 1e8, 0,
            "> 0: train that many updates past the start checkpoint instead of up to train.steps"),
        StrKey(
            "passkey.lengths", "", nullptr,
            "kind passkey (AoH §3): prompt lengths in tokens, a comma list; \"\" = model.context "
            "- 6"),
        StrKey("passkey.depths", "0.2,0.4,0.6,0.8", nullptr,
               "insertion depths, a comma list of fractions of the filler"),
        IntKey("passkey.samples", 1, 100000, 8, "prompts per cell; greedy exact match"),
        // Scheduling (coordinator/scheduler.h): what the run needs from a worker, and its rank.
        IntKey("resources.gpus", 0, 64, 0,
               "0: one slot of any kind; N: N GPUs on one worker (gang)"),
        NumKey("resources.min_memory_gb", 0, 1e6, 0,
               "per device, GB = 1e9 bytes (CPU: host memory)"),
        NumKey("resources.min_compute_capability", 0, 100, 0, "e.g. 8.0; > 0 needs a CUDA device"),
        IntKey("resources.exclusive", 0, 1, 0,
               "1: the worker runs nothing else meanwhile (timing)"),
        IntKey("priority", -1000, 1000, 0,
               "higher first; equal priorities share workers fairly across experiments "
               "(coordinator/scheduler.h)"),
        // Run kind flops (payload/exec/flops.h): CUPTI-counted FLOPs of one forward + one step.
        IntKey("flops.warmup", 0, 1000, 2,
               "kind flops (payload/exec/flops.h): untimed forward + step pairs first"),
        IntKey("flops.repeats", 1, 1000, 5, "event-timed pairs; the median is reported"),
        IntKey("flops.per_layer", 0, 1, 0, "1: per-layer ranges attention/L<k>"),
        StrKey("flops.tensor_metrics", "ops_path_src",
               "ops_path_src|ops_path_src_x2|ops_path_op_gmma_hmma",
               "the tensor-core counter set (payload/measure/flop_formula.h)"),
    };
    AddMethodSections(&keys);
    return keys;
  }();
  return kSchema;
}

const std::map<std::string, const ConfigKey*>& Index() {
  static const std::map<std::string, const ConfigKey*> kIndex = [] {
    std::map<std::string, const ConfigKey*> m;
    for (const ConfigKey& s : Schema()) m[s.key] = &s;
    return m;
  }();
  return kIndex;
}

std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.10g", v);
  return buf;
}

// Renders a received value for an error message, shortened so a huge value stays readable.
std::string Got(const Json& v) {
  return ShortenForMessage(v.dump(), 60);  // never splits a UTF-8 sequence
}

std::string Expected(const ConfigKey& s) {
  if (s.type == ConfigKeyType::kString) {
    if (s.any_string)
      return "a string of at most " + std::to_string(kMaxConfigStringBytes) + " bytes";
    std::string out = "one of ";
    std::string allowed = s.allowed;
    size_t start = 0;
    bool first = true;
    while (true) {
      size_t bar = allowed.find('|', start);
      out += (first ? "\"" : ", \"") + allowed.substr(start, bar - start) + "\"";
      first = false;
      if (bar == std::string::npos) break;
      start = bar + 1;
    }
    return out;
  }
  std::string what = s.type == ConfigKeyType::kInt ? "an integer" : "a number";
  if (std::isinf(s.max)) return what + (s.min_open ? " > " : " >= ") + FormatNumber(s.min);
  if (s.type == ConfigKeyType::kInt && s.max >= 9007199254740992.0)
    return what + " >= " + FormatNumber(s.min);
  return what + " in " + (s.min_open ? "(" : "[") + FormatNumber(s.min) + ", " +
         FormatNumber(s.max) + (s.max_open ? ")" : "]");
}

bool AllowedString(const ConfigKey& s, const std::string& v) {
  if (s.any_string) return v.size() <= kMaxConfigStringBytes;
  const std::string& allowed = s.allowed;
  size_t start = 0;
  while (true) {
    size_t bar = allowed.find('|', start);
    if (allowed.compare(start, bar == std::string::npos ? std::string::npos : bar - start, v) == 0)
      return true;
    if (bar == std::string::npos) return false;
    start = bar + 1;
  }
}

Json DefaultValue(const ConfigKey& s) {
  switch (s.type) {
    case ConfigKeyType::kInt:
      return Json(int64_t(s.num_default));
    case ConfigKeyType::kNumber:
      return Json(s.num_default);
    case ConfigKeyType::kString:
      return Json(s.str_default);
  }
  return Json();
}

Status Invalid(const std::string& file, const std::string& path, const std::string& what) {
  return Status::InvalidArgument(file + ": " + path + ": " + what);
}

// The names known at one level of the config ("" = top level), in schema order.
std::vector<std::string> NamesAt(const std::string& section) {
  std::vector<std::string> seen;
  for (const ConfigKey& s : Schema()) {
    std::string key = s.key;
    std::string name;
    if (section.empty()) {
      name = key.substr(0, key.find('.'));
    } else if (key.compare(0, section.size() + 1, section + ".") == 0) {
      name = key.substr(section.size() + 1);
    } else {
      continue;
    }
    if (std::find(seen.begin(), seen.end(), name) == seen.end()) seen.push_back(name);
  }
  if (section.empty()) seen.push_back(kParamsSection);
  return seen;
}

// "unknown key (did you mean "heads"?; known: layers, heads, ...)" for `name` at `section`.
std::string UnknownAt(const std::string& section, const std::string& name) {
  std::vector<std::string> names = NamesAt(section);
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  std::string guess = ClosestName(name, names);
  return std::string("unknown key") + (guess.empty() ? "" : "; did you mean \"" + guess + "\"?") +
         " (known" + (section.empty() ? "" : " in " + section) + ": " + list + ")";
}

// A section is a top-level name with keys under it ("model", "saf", ...) or params.
bool IsSection(const std::string& name) {
  static const std::set<std::string> kSections = [] {
    std::set<std::string> sections = {kParamsSection};
    for (const ConfigKey& k : Schema())
      if (size_t dot = k.key.find('.'); dot != std::string::npos)
        sections.insert(k.key.substr(0, dot));
    return sections;
  }();
  return kSections.count(name) > 0;
}

// Head lists (common/head_list.h) name heads of this model: checked at submit, so that a
// typo or a head beyond the model fails here rather than on a worker. An imported model's
// shape comes from its checkpoint: only the syntax is checked then.
Status CheckHeadLists(const Json& c, const std::string& file, const std::string& prefix) {
  const bool imported = !c["model"]["init_from"].get_ref<const std::string&>().empty();
  const int64_t layers = imported ? -1 : c["model"]["layers"].get<int64_t>();
  const int64_t heads = imported ? -1 : c["model"]["heads"].get<int64_t>();
  auto where = [&](const char* key) { return file + ": " + prefix + "." + key; };
  const std::string& modes = c["model"]["head_modes"].get_ref<const std::string&>();
  auto m = ParseHeadModeList(modes, layers, heads, where("model.head_modes"));
  if (!m.ok()) return m.status();
  for (const char* key : {"saf.heads", "prune.heads", "bench.fixed_heads"}) {
    const Json& v = c[RunConfigPointer(key)];
    if (!v.is_string()) continue;
    auto list = ParseHeadList(v.get<std::string>(), layers, heads, where(key));
    if (!list.ok()) return list.status();
  }
  return Status::Ok();
}

// Cross-field rules: checked on the merged config, reported at the field that must change.
Status CheckCrossField(const Json& c, const std::string& file, const std::string& prefix) {
  int64_t heads = c["model"]["heads"].get<int64_t>();
  int64_t width = c["model"]["width"].get<int64_t>();
  if (width % heads != 0)
    return Invalid(file, prefix + ".model.width",
                   "expected a multiple of model.heads (" + std::to_string(heads) + "), got " +
                       std::to_string(width));
  int64_t kv_heads = c["model"]["kv_heads"].get<int64_t>();
  if (kv_heads != 0 && heads % kv_heads != 0)
    return Invalid(file, prefix + ".model.kv_heads",
                   "expected 0 or a divisor of model.heads (" + std::to_string(heads) + "), got " +
                       std::to_string(kv_heads));
  if (c["model"]["pos"] == "rope" && (width / heads) % 2 != 0)
    return Invalid(file, prefix + ".model.pos",
                   "\"rope\" needs an even head dimension (model.width / model.heads), got " +
                       std::to_string(width / heads));
  const std::string& source = c["data"]["source"].get_ref<const std::string&>();
  if (source == "shards" && c["data"]["path"].get_ref<const std::string&>().empty())
    return Invalid(file, prefix + ".data.path",
                   "expected the directory holding train.bin and val.bin when data.source "
                   "is \"shards\", got \"\"");
  if (c["kind"] == "command" && c["command"]["program"].get_ref<const std::string&>().empty())
    return Invalid(file, prefix + ".command.program",
                   "expected the program to run when kind is \"command\", got \"\"");
  const int64_t parent_run = c["parent"]["run"].get<int64_t>();
  const int64_t parent_experiment = c["parent"]["experiment"].get<int64_t>();
  if (parent_run > 0 && parent_experiment > 0)
    return Invalid(file, prefix + ".parent.experiment",
                   "expected either parent.run or parent.experiment (with parent.arm), not both");
  // A checkpoint step without a parent would silently train from scratch.
  if (c["parent"]["step"].get<int64_t>() > 0 && parent_run == 0 && parent_experiment == 0)
    return Invalid(file, prefix + ".parent.step",
                   "a parent checkpoint step needs parent.run or parent.experiment (submit "
                   "with --set parent.run=ID,... or --set parent.experiment=ID)");
  if (!ParsePositiveIntList(c["train"]["keep_steps"].get_ref<const std::string&>()).ok())
    return Invalid(file, prefix + ".train.keep_steps",
                   "expected a comma-separated list of positive steps, got \"" +
                       c["train"]["keep_steps"].get<std::string>() + "\"");
  if (!c["parent"]["arm"].get_ref<const std::string&>().empty() && parent_experiment == 0)
    return Invalid(file, prefix + ".parent.arm", "parent.arm needs parent.experiment");
  if (c["time_match"]["experiment"].get<int64_t>() == -1 &&
      c["time_match"]["arm"].get_ref<const std::string&>().empty())
    return Invalid(file, prefix + ".time_match.arm",
                   "time_match.experiment -1 (this experiment) needs the reference's arm");
  if (!c["time_match"]["arm"].get_ref<const std::string&>().empty() &&
      c["time_match"]["experiment"].get<int64_t>() == 0)
    return Invalid(file, prefix + ".time_match.arm", "time_match.arm needs time_match.experiment");
  HEADLAB_RETURN_IF_ERROR(CheckHeadLists(c, file, prefix));
  for (const MethodSchema& m : MethodSchemas())
    if (m.check) HEADLAB_RETURN_IF_ERROR(m.check(c, file, prefix));
  // The builtin corpus is byte-level: token ids go up to 255; the default corpus is GPT-2
  // BPE. An imported model (model.init_from) takes its vocabulary from its checkpoint: exec
  // checks it against the data.
  int64_t vocab = c["model"]["vocab"].get<int64_t>();
  const bool imported = !c["model"]["init_from"].get_ref<const std::string&>().empty();
  if (source == "corpus" && vocab < 50257 && !imported)
    return Invalid(
        file, prefix + ".model.vocab",
        "expected an integer >= 50257 with data.source \"corpus\" (GPT-2 BPE tokens), got " +
            std::to_string(vocab));
  if (source == "builtin" && vocab < 256 && !imported)
    return Invalid(file, prefix + ".model.vocab",
                   "expected an integer >= 256 with data.source \"builtin\" (byte-level "
                   "tokens), got " +
                       std::to_string(vocab));
  return Status::Ok();
}

}  // namespace

Json::json_pointer RunConfigPointer(const std::string& dotted_key) {
  std::string p = "/" + dotted_key;
  for (char& c : p)
    if (c == '.') c = '/';
  return Json::json_pointer(p);
}

Json DefaultRunConfig() {
  static const Json kDefaults = [] {
    Json c = Json::object();
    for (const ConfigKey& s : Schema()) c[RunConfigPointer(s.key)] = DefaultValue(s);
    return c;
  }();
  return kDefaults;
}

const std::vector<ConfigKey>& RunConfigSchema() { return Schema(); }

const std::vector<std::string>& RunConfigKeys() {
  static const std::vector<std::string> kKeys = [] {
    std::vector<std::string> keys;
    for (const ConfigKey& s : Schema()) keys.push_back(s.key);
    return keys;
  }();
  return kKeys;
}

bool IsParamsKey(const std::string& dotted_key) {
  const std::string prefix = kParamsSection + std::string(".");
  if (dotted_key.compare(0, prefix.size(), prefix) != 0) return false;
  std::string name = dotted_key.substr(prefix.size());
  if (name.empty() || name.size() > kMaxParamNameBytes) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

bool IsRunConfigKey(const std::string& dotted_key) {
  return Index().count(dotted_key) > 0 || IsParamsKey(dotted_key);
}

Status UnknownRunConfigKey(const std::string& file, const std::string& path,
                           const std::string& key) {
  std::string guess = ClosestName(key, RunConfigKeys());
  return Invalid(file, path,
                 "unknown config key " + Got(Json(key)) +
                     (guess.empty() ? "" : "; did you mean \"" + guess + "\"?") +
                     " (every key with its default: schema/grid.md, \"Run config\")");
}

StatusOr<Json> ValidateRunConfigValue(const std::string& dotted_key, const Json& value,
                                      const std::string& file, const std::string& path) {
  if (IsParamsKey(dotted_key)) {
    // Free-form parameters of a command run: any JSON number, bool or short string.
    if (value.is_number() || value.is_boolean() ||
        (value.is_string() && value.get_ref<const std::string&>().size() <= kMaxConfigStringBytes))
      return value;
    return Invalid(file, path,
                   "expected a number, a bool or a string of at most " +
                       std::to_string(kMaxConfigStringBytes) + " bytes, got " + Got(value));
  }
  auto it = Index().find(dotted_key);
  if (it == Index().end()) return UnknownRunConfigKey(file, path, dotted_key);
  const ConfigKey& s = *it->second;
  auto fail = [&] {
    std::string guess;
    if (s.type == ConfigKeyType::kString && !s.any_string && value.is_string()) {
      std::vector<std::string> allowed;
      for (std::string rest = s.allowed;;) {
        size_t bar = rest.find('|');
        allowed.push_back(rest.substr(0, bar));
        if (bar == std::string::npos) break;
        rest = rest.substr(bar + 1);
      }
      guess = ClosestValue(value.get<std::string>(), allowed);
    }
    return Invalid(file, path,
                   "expected " + Expected(s) + ", got " + Got(value) +
                       (guess.empty() ? "" : " (did you mean \"" + guess + "\"?)"));
  };
  if (s.type == ConfigKeyType::kString) {
    if (!value.is_string() || !AllowedString(s, value.get_ref<const std::string&>())) return fail();
    return value;
  }
  if (!value.is_number()) return fail();
  double v = value.get<double>();
  if (v < s.min || v > s.max || (s.min_open && v == s.min) || (s.max_open && v == s.max))
    return fail();
  if (s.type == ConfigKeyType::kInt) {
    // 1e3 is accepted as 1000; 1.5 is not an integer.
    if (!value.is_number_integer() && std::floor(v) != v) return fail();
    return Json(int64_t(v));
  }
  return Json(v);  // integers given for a number key hash like their float value
}

StatusOr<Json> FlattenRunConfig(const Json& config, const std::string& file,
                                const std::string& path_prefix) {
  if (!config.is_object())
    return Invalid(file, path_prefix, "expected an object (a run config), got " + Got(config));
  Json flat = Json::object();
  ErrorList errors;  // every bad field, not only the first
  auto add = [&](const std::string& key, const Json& value, const std::string& path) {
    auto v = ValidateRunConfigValue(key, value, file, path);
    if (errors.Add(v.status())) flat[key] = std::move(v.value());
  };
  for (auto& [name, value] : config.items()) {
    std::string path = path_prefix + "." + name;
    if (IsSection(name)) {
      if (!value.is_object()) {
        errors.Add(Invalid(file, path, "expected an object, got " + Got(value)));
        continue;
      }
      for (auto& [leaf, leaf_value] : value.items()) {
        std::string key = name + "." + leaf;
        if (!IsRunConfigKey(key))
          errors.Add(Invalid(file, path + "." + leaf,
                             name == kParamsSection
                                 ? "expected a parameter name matching [A-Za-z0-9_-]{1,64}"
                                 : UnknownAt(name, leaf)));
        else
          add(key, leaf_value, path + "." + leaf);
      }
    } else if (IsRunConfigKey(name)) {
      add(name, value, path);
    } else if (name.find('.') != std::string::npos) {
      errors.Add(UnknownRunConfigKey(file, path, name));
    } else {
      errors.Add(Invalid(file, path, UnknownAt("", name)));
    }
  }
  if (!errors.empty()) return errors.ToStatus();
  return flat;
}

StatusOr<Json> BuildRunConfig(const Json& flat, const std::string& file,
                              const std::string& path_prefix) {
  Json out = DefaultRunConfig();
  auto preset = flat.find("model.preset");
  if (preset != flat.end()) {
    if (const ModelPreset* p = FindModelPreset(preset->get_ref<const std::string&>())) {
      Json& m = out["model"];
      m["layers"] = p->layers;
      m["heads"] = p->heads;
      m["width"] = p->width;
      m["context"] = p->context;
      m["vocab"] = p->vocab;
      m["kv_heads"] = p->kv_heads;
      m["pos"] = p->pos;
      m["rope_base"] = p->rope_base;
      m["norm"] = p->norm;
    }
  }
  // Keys are at most "section.leaf" (the schema has two levels): index directly, which is
  // several times cheaper than a JSON pointer on the 10^4-run expansion path.
  for (auto& [key, value] : flat.items()) {
    size_t dot = key.find('.');
    if (dot == std::string::npos)
      out[key] = value;
    else
      out[key.substr(0, dot)][key.substr(dot + 1)] = value;
  }
  HEADLAB_RETURN_IF_ERROR(CheckCrossField(out, file, path_prefix));
  return out;
}

StatusOr<Json> NormalizeRunConfig(const Json& config, const std::string& file,
                                  const std::string& path_prefix) {
  auto flat = FlattenRunConfig(config, file, path_prefix);
  if (!flat.ok()) return flat.status();
  return BuildRunConfig(flat.value(), file, path_prefix);
}

}  // namespace headlab
