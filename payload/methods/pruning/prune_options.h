// The typed `prune` config section (SAF App. C.3.4 pruning controls). Torch-free.
//
// prune.method  none | heads (prune.heads, e.g. the same heads as another arm) |
//               gate_taylor (round(prune.rate * layers * heads) heads by SAF eq. 19) |
//               saf (the heads SAF's selection picks under this run's saf.* keys: score,
//               saf.rate, calibration and fit rule; the set an saf.method replace arm of the
//               same seed fixes from the same parent, SAF App. C.3.1 "the same heads")
// prune.step    -1: at the run's start (a continuation's first step); s >= 0: after update
//               s (at the start when the run begins past s)
// prune.calib_sequences, prune.calib_batch, prune.calib_split: gate-Taylor calibration
//               sequences (training split or the held-out calibration split, drawn by a
//               generator of their own so the training sampler is untouched)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/exec_config.h"
#include "payload/methods/pruning/selection.h"

namespace headlab {

enum class PruneMethod { kNone, kHeads, kGateTaylor, kSaf };

// Defaults: prune_schema.cc (the initialisers repeat them for code that builds options).
struct PruneOptions {
  PruneMethod method = PruneMethod::kNone;
  std::vector<HeadRef> heads;  // kHeads: sorted by (layer, head)
  double rate = 0.25;          // kGateTaylor
  int64_t step = -1;
  int64_t calib_sequences = 16;
  int64_t calib_batch = 4;
  std::string calib_split = "train";  // train | calib (data.calib_fraction > 0)
};

// Reads the `prune` section of a normalised run config (NormalizeRunConfig has checked every
// key against prune_schema.cc; a config that is not normalised is InvalidArgument) for
// `config`'s model. Errors are InvalidArgument naming `file` and the field (e.g. a head outside the
// model, an empty head set, pruning asked of a run kind other than train).
StatusOr<PruneOptions> PruneOptionsFromJson(const Json& config_json, const ExecConfig& config,
                                            const std::string& file);

}  // namespace headlab
