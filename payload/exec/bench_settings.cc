// bench.* keys -> BenchSettings.
#include "payload/exec/bench_settings.h"

#include "common/config_key.h"
#include "common/head_list.h"

namespace headlab {

StatusOr<std::vector<int64_t>> ParsePositiveList(const std::string& list, int64_t fallback,
                                                 const std::string& where) {
  if (list.find_first_not_of(' ') == std::string::npos) return std::vector<int64_t>{fallback};
  auto values = ParsePositiveIntList(list);
  if (!values.ok()) return Status::InvalidArgument(where + ": " + values.status().message());
  return values;
}

StatusOr<BenchSettings> BenchSettingsFromJson(const Json& config, const ExecConfig& exec,
                                              const std::string& file) {
  BenchSettings s;
  try {
    const Json& b = config.at("bench");
    s.warmup = b.at("warmup").get<int64_t>();
    s.repeats = b.at("repeats").get<int64_t>();
    s.decode_tokens = b.at("decode_tokens").get<int64_t>();
    auto lengths = ParsePositiveList(b.at("lengths").get<std::string>(), exec.model.context,
                                     file + ": $.config.bench.lengths");
    if (!lengths.ok()) return lengths.status();
    s.lengths = *lengths;
    auto batches = ParsePositiveList(b.at("batch_sizes").get<std::string>(), exec.train.batch_size,
                                     file + ": $.config.bench.batch_sizes");
    if (!batches.ok()) return batches.status();
    s.batch_sizes = *batches;
    batches = ParsePositiveList(b.at("batch_sizes").get<std::string>(), 1,
                                file + ": $.config.bench.batch_sizes");
    if (!batches.ok()) return batches.status();
    s.decode_batch_sizes = *batches;
    // bench.fixed_heads: a head list (common/head_list.h), each head's state left ordinary
    // here (the bench installs fixed patterns on them).
    auto heads = ParseHeadList(b.at("fixed_heads").get<std::string>(), exec.model.layers,
                               exec.model.heads, file + ": $.config.bench.fixed_heads");
    if (!heads.ok()) return heads.status();
    for (const HeadAt& h : *heads) s.fixed_heads.push_back({h.layer, h.head, HeadState{}});
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(file + ": $.config.bench: " + e.what());
  }
  if (exec.model.pos == "learned")
    for (int64_t len : s.lengths)
      if (len > exec.model.context)
        return Status::InvalidArgument(file + ": $.config.bench.lengths: " + std::to_string(len) +
                                       " exceeds model.context " +
                                       std::to_string(exec.model.context) + " (learned positions)");
  return s;
}

}  // namespace headlab
