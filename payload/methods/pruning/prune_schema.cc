// The prune.* keys: the pruning controls of SAF App. C.3.4.
#include "payload/methods/pruning/prune_schema.h"

namespace headlab {
namespace {

std::vector<ConfigKey> Keys() {
  return {
      StrKey("prune.method", "none", JoinNames(kPruneMethodNames)),
      StrKey("prune.heads", "", nullptr),  // heads: "LAYER.HEAD,..." (the same heads as another arm)
      NumKey("prune.rate", 0, 1, 0.25),    // gate_taylor: round(rate * layers * heads) heads
      IntKey("prune.step", -1, 1e8, -1),   // -1: at the run's start; s: after update s
      IntKey("prune.calib_sequences", 1, 1e6, 16),  // gate_taylor calibration (own generator)
      IntKey("prune.calib_batch", 1, 65536, 4),
      StrKey("prune.calib_split", "train", "train|calib"),  // gate_taylor's calibration tokens
  };
}

[[maybe_unused]] const bool kRegistered = RegisterMethodSchema(
    {"prune", /*after=*/"noop", Keys(), nullptr, "payload/methods/pruning/README.md"});

}  // namespace
}  // namespace headlab
