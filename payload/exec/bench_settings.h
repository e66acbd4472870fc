// The bench.* keys of a normalized run config (schema/grid.md) as plain fields, for the
// bench-update / bench-prefill / bench-decode run kinds. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/head_state.h"

namespace headlab {

struct BenchSettings {
  int64_t warmup = 0;                       // untimed repetitions, discarded
  int64_t repeats = 1;                      // timed repetitions; medians are reported
  std::vector<int64_t> lengths;             // prompt lengths (bench.lengths, default model.context)
  std::vector<int64_t> batch_sizes;         // prefill batch sizes (default train.batch_size)
  std::vector<int64_t> decode_batch_sizes;  // bench-decode's, from the same key (default 1)
  int64_t decode_tokens = 0;
  std::vector<HeadAssignment> fixed_heads;  // bench.fixed_heads, wildcards expanded
};

// Reads bench.* of the normalized `config`; lengths above model.context with learned
// positions and malformed lists are InvalidArgument naming `file` and the key.
StatusOr<BenchSettings> BenchSettingsFromJson(const Json& config, const ExecConfig& exec,
                                              const std::string& file);

// Parses a comma-separated list of positive integers ("128,256"); {fallback} when `list`
// is empty. InvalidArgument naming `where` otherwise.
StatusOr<std::vector<int64_t>> ParsePositiveList(const std::string& list, int64_t fallback,
                                                 const std::string& where);

}  // namespace headlab
