// The prune.* keys: the pruning controls of SAF App. C.3.4.
#include "payload/methods/pruning/prune_schema.h"

namespace headlab {
namespace {

std::vector<ConfigKey> Keys() {
  return {
      StrKey("prune.method", "none", JoinNames(kPruneMethodNames),
             "none, heads (remove prune.heads), gate_taylor (remove the round(rate x layers x "
             "heads) lowest by eq. 19) or saf (the heads SAF's selection picks under the run's "
             "saf.* keys); removed physically (AdamW state kept); kinds train and flops"),
      StrKey("prune.heads", "", nullptr, "heads: `LAYER.HEAD,...` removed"),
      NumKey("prune.rate", 0, 1, 0.25,
             "gate_taylor: the fraction of heads removed, round(rate x layers x heads)"),
      IntKey("prune.step", -1, 1e8, -1,
             "-1: prune at the run's start (after the parent checkpoint is restored); s: after "
             "update s"),
      IntKey("prune.calib_sequences", 1, 1e6, 16,
             "gate_taylor calibration sequences (a generator of their own, seeded like SAF's first "
             "event)"),
      IntKey("prune.calib_batch", 1, 65536, 4, "sequences per calibration forward"),
      StrKey("prune.calib_split", "train", "train|calib",
             "gate_taylor's calibration tokens: training tokens or the held-out calibration split "
             "(data.calib_fraction)"),
  };
}

[[maybe_unused]] const bool kRegistered =
    RegisterMethodSchema({"prune", /*after=*/"noop", /*on_key=*/"method", /*off_value=*/"none",
                          Keys(), nullptr, "payload/methods/pruning/README.md"});

}  // namespace
}  // namespace headlab
