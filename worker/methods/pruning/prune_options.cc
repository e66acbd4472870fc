// Reading the `prune` config section.
#include "worker/methods/pruning/prune_options.h"

namespace headlab {

StatusOr<PruneOptions> PruneOptionsFromJson(const Json& config_json, const ExecConfig& config,
                                            const std::string& file) {
  PruneOptions o;
  if (!config_json.is_object() || !config_json.contains("prune")) return o;
  const Json& p = config_json["prune"];
  try {
    const std::string method = p.value("method", std::string("none"));
    if (method == "none") return o;
    if (method == "heads")
      o.method = PruneMethod::kHeads;
    else if (method == "gate_taylor")
      o.method = PruneMethod::kGateTaylor;
    else if (method == "saf")
      o.method = PruneMethod::kSaf;
    else
      return Status::InvalidArgument(file + ": $.config.prune.method: expected none, heads, "
                                            "gate_taylor or saf, got \"" + method + "\"");
    o.rate = p.value("rate", o.rate);
    o.step = p.value("step", o.step);
    o.calib_sequences = p.value("calib_sequences", o.calib_sequences);
    o.calib_batch = p.value("calib_batch", o.calib_batch);
    o.calib_split = p.value("calib_split", o.calib_split);
    const std::string heads = p.value("heads", std::string());
    if (config.kind != "train" && config.kind != "flops")
      return Status::InvalidArgument(file + ": $.config.prune.method: pruning controls apply to "
                                            "the training loop (kind \"train\"), not kind \"" +
                                            config.kind + "\"");
    if (o.method == PruneMethod::kHeads) {
      StatusOr<std::vector<HeadRef>> set = ParseHeadSet(heads, config.model.layers,
                                                        config.model.heads,
                                                        file + ": $.config.prune.heads");
      if (!set.ok()) return set.status();
      if (set->empty())
        return Status::InvalidArgument(file + ": $.config.prune.heads: prune.method \"heads\" "
                                              "needs at least one LAYER.HEAD");
      o.heads = set.value();
    } else if (!heads.empty()) {
      return Status::InvalidArgument(file + ": $.config.prune.heads: only prune.method \"heads\" "
                                            "takes a head set (gate_taylor and saf select their own)");
    }
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(file + ": $.config.prune: " + e.what());
  }
  return o;
}

}  // namespace headlab
