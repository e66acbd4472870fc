// The aoh.* run-config keys read into AohRunConfig.
#include "worker/methods/aoh/aoh_config.h"

#include <cstdlib>
#include <sstream>

namespace headlab::aoh {
namespace {

// Splits on commas, trimming spaces; "" gives no items.
std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    out.push_back(a == std::string::npos ? "" : item.substr(a, b - a + 1));
  }
  if (out.size() == 1 && out[0].empty()) out.clear();
  return out;
}

}  // namespace

Status ValidateOptions(const AohOptions& o) {
  if (!(o.sparsity >= 0 && o.sparsity <= 1))
    return Status::InvalidArgument("aoh.sparsity: expected a number in [0, 1], got " +
                                   std::to_string(o.sparsity));
  if (o.sink < 0) return Status::InvalidArgument("aoh.sink: expected >= 0");
  if (o.recent < 1) return Status::InvalidArgument("aoh.recent: expected >= 1");
  if (o.rope_max_distance < 0) return Status::InvalidArgument("aoh.rope_max_distance: expected >= 0");
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> ParseIntList(const std::string& s) {
  std::vector<int64_t> out;
  for (const std::string& item : SplitCommas(s)) {
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1)
      return Status::InvalidArgument("expected a comma-separated list of positive integers, got \"" + s + "\"");
    out.push_back(int64_t(v));
  }
  return out;
}

StatusOr<std::vector<double>> ParseNumberList(const std::string& s) {
  std::vector<double> out;
  for (const std::string& item : SplitCommas(s)) {
    char* end = nullptr;
    double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v >= 0 && v <= 1))
      return Status::InvalidArgument("expected a comma-separated list of numbers in [0, 1], got \"" + s + "\"");
    out.push_back(v);
  }
  return out;
}

StatusOr<AohRunConfig> AohRunConfigFromJson(const Json& config, const std::string& file) {
  AohRunConfig r;
  auto section = config.find("aoh");
  if (section == config.end()) return r;
  const Json& a = *section;
  std::string key;
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(file + ": $.aoh." + key + ": " + what);
  };
  try {
    key = "method";
    const std::string method = a.value("method", std::string("none"));
    // "none" (full attention) still reads the rest: a full-attention arm is evaluated
    // with the same passkey / bench settings as the AoH arms it is compared with.
    r.enabled = method != "none";
    if (method == "aoh_rope") {
      r.options.selection = Selection::kAoh;
      r.options.rope_max_distance = a.value("rope_max_distance", int64_t(32768));
    } else if (r.enabled) {
      auto sel = ParseSelection(method);
      if (!sel.ok()) return bad(sel.status().message() + " (or \"aoh_rope\", \"none\")");
      r.options.selection = sel.value();
    }
    key = "metric";
    auto metric = ParseMetric(a.value("metric", std::string("effective_rank")));
    if (!metric.ok()) return bad(metric.status().message());
    r.options.metric = metric.value();
    key = "gqa_agg";
    auto agg = ParseGroupAggregation(a.value("gqa_agg", std::string("mean")));
    if (!agg.ok()) return bad(agg.status().message());
    r.options.aggregation = agg.value();
    key = "sparsity";
    r.options.sparsity = a.value("sparsity", 0.5);
    key = "random_seed";
    // Random_avg (AoH Table 2) averages random draws: the draw follows the run seed and
    // the shared parent run too, so a grid's seed axis or parent.run list averages over
    // draws while runs stay paired by them.
    const Json parent = config.value("parent", Json::object());
    r.options.seed = a.value("random_seed", uint64_t(0)) * 1000003u + config.value("seed", uint64_t(0)) +
                     (parent.is_object() ? parent.value("run", uint64_t(0)) : 0) * 7919u;
    key = "sink";
    r.options.sink = a.value("sink", int64_t(128));
    key = "recent";
    r.options.recent = a.value("recent", int64_t(256));
    key = "apply_step";
    r.apply_step = a.value("apply_step", int64_t(-1));
    key = "prefill_chunk";
    r.prefill_chunk = a.value("prefill_chunk", int64_t(512));
    key = "anchor_block";
    r.anchor_block = a.value("anchor_block", int64_t(0));
    key = "anchor_topk";
    r.anchor_topk = a.value("anchor_topk", int64_t(64));
    key = "passkey_lengths";
    auto lengths = ParseIntList(a.value("passkey_lengths", std::string()));
    if (!lengths.ok()) return bad(lengths.status().message());
    r.passkey_lengths = lengths.value();
    key = "passkey_depths";
    auto depths = ParseNumberList(a.value("passkey_depths", std::string("0.2,0.4,0.6,0.8")));
    if (!depths.ok()) return bad(depths.status().message());
    r.passkey_depths = depths.value();
    key = "passkey_samples";
    r.passkey_samples = a.value("passkey_samples", int64_t(8));
    key = "bench_contexts";
    auto contexts = ParseIntList(a.value("bench_contexts", std::string()));
    if (!contexts.ok()) return bad(contexts.status().message());
    r.bench_contexts = contexts.value();
    key = "bench_decode_tokens";
    r.bench_decode_tokens = a.value("bench_decode_tokens", int64_t(32));
    key = "bench_repeats";
    r.bench_repeats = a.value("bench_repeats", int64_t(3));
  } catch (const std::exception& e) {
    return bad(std::string("wrong type (") + e.what() + ")");
  }
  Status s = ValidateOptions(r.options);
  if (!s.ok()) return Status::InvalidArgument(file + ": $." + s.message());
  if (r.prefill_chunk < 1 || r.passkey_samples < 1 || r.bench_repeats < 1 || r.anchor_topk < 1)
    return Status::InvalidArgument(file + ": $.aoh: prefill_chunk, passkey_samples, bench_repeats "
                                   "and anchor_topk must be >= 1");
  return r;
}

}  // namespace headlab::aoh
