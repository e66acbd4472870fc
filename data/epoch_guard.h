// How many times a grid's runs would pass over their training tokens, and a warning when
// that is more than a few (a paper-scale grid on a small corpus memorises it instead of
// measuring the method). Torch-free: `headlab submit` checks before anything is stored.
//
// Passes = steps * batch_size * grad_accum * ranks * context / training tokens, the
// training tokens from the shards' meta.json (data.source "shards", or "corpus": the
// default corpus's folder) less the calibration split (data.calib_fraction). The builtin
// byte-level corpus is for tiny CPU grids and is not checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"

namespace headlab {

// Passes above this get a warning.
inline constexpr double kMaxPassesWithoutWarning = 4.0;

// Returns the planned passes of one run config (a normalised or partial run config: missing
// keys take the run-config defaults) over `train_tokens`; 0 when train_tokens <= 0.
double PlannedPasses(const Json& config, int64_t train_tokens);

// Returns one warning per distinct (data folder, passes) of `configs` above
// kMaxPassesWithoutWarning, e.g. "12 runs would pass over build/data/english-gpt2
// (4,563,210 training tokens) 500.3 times (steps 20000 x batch 16 x context 1024); ...".
// A folder whose meta.json cannot be read is skipped (the run itself reports that).
std::vector<std::string> EpochWarnings(const std::vector<Json>& configs);

// Returns n with thousands separated: 4563210 -> "4,563,210" (also `headlab data`'s reports).
std::string GroupedDigits(int64_t n);

}  // namespace headlab
