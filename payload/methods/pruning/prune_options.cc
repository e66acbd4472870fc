// Reading the `prune` config section.
#include "payload/methods/pruning/prune_options.h"

#include <iterator>

#include "payload/methods/pruning/prune_schema.h"

namespace headlab {

static_assert(std::size(kPruneMethodNames) == size_t(PruneMethod::kSaf) + 1);

StatusOr<PruneOptions> PruneOptionsFromJson(const Json& config_json, const ExecConfig& config,
                                            const std::string& file) {
  // The values were validated against prune_schema.cc by NormalizeRunConfig.
  PruneOptions o;
  try {
    const Json& p = config_json.at("prune");
    StatusOr<PruneMethod> method = ParseNamed<PruneMethod>(
        kPruneMethodNames, p.at("method").get<std::string>(), "prune method");
    if (!method.ok())
      return Status::InvalidArgument(file +
                                     ": $.config.prune.method: " + method.status().message());
    o.method = *method;
    if (o.method == PruneMethod::kNone) return o;
    o.rate = p.at("rate").get<double>();
    o.step = p.at("step").get<int64_t>();
    o.calib_sequences = p.at("calib_sequences").get<int64_t>();
    o.calib_batch = p.at("calib_batch").get<int64_t>();
    o.calib_split = p.at("calib_split").get<std::string>();
    const std::string heads = p.at("heads").get<std::string>();
    if (config.kind != "train" && config.kind != "flops")
      return Status::InvalidArgument(file +
                                     ": $.config.prune.method: pruning controls apply to "
                                     "the training loop (kind \"train\"), not kind \"" +
                                     config.kind + "\"");
    if (o.method == PruneMethod::kHeads) {
      StatusOr<std::vector<HeadRef>> set = ParseHeadSet(
          heads, config.model.layers, config.model.heads, file + ": $.config.prune.heads");
      if (!set.ok()) return set.status();
      if (set->empty())
        return Status::InvalidArgument(file +
                                       ": $.config.prune.heads: prune.method \"heads\" "
                                       "needs at least one LAYER.HEAD");
      o.heads = set.value();
    } else if (!heads.empty()) {
      return Status::InvalidArgument(file +
                                     ": $.config.prune.heads: only prune.method \"heads\" "
                                     "takes a head set (gate_taylor and saf select their own)");
    }
  } catch (const std::exception& e) {
    return Status::InvalidArgument(file + ": $.config.prune: expected a normalised run config (" +
                                   e.what() + ")");
  }
  return o;
}

}  // namespace headlab
