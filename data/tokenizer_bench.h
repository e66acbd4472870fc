// `headlab data bench`: tokenizer throughput on real text, for docs/BENCHMARKS.md.
// Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

struct TokenizerBenchResult {
  std::string tokenizer;     // kind
  int64_t bytes = 0;         // input bytes per pass
  int64_t tokens = 0;        // tokens per pass
  double cold_mb_s = 0;      // first pass, a fresh tokenizer (empty piece cache)
  double warm_mb_s = 0;      // median of the later passes
  double warm_cpu_mb_s = 0;  // the same per second of this thread's CPU time (robust to a
                             // shared machine's load)
  double decode_mb_s = 0;    // median Decode throughput (output bytes)
  int repeats = 0;
  bool roundtrip = false;  // Decode(Encode(text)) == text on every input
};

// Encodes the documents of `inputs` (ListInputFiles; each file one document) `repeats`
// times with tokenizer `spec` (a fresh load for the cold pass) and decodes them back.
StatusOr<TokenizerBenchResult> BenchTokenizer(const std::string& spec,
                                              const std::vector<std::string>& inputs, int repeats);
Json TokenizerBenchJson(const TokenizerBenchResult& r);

}  // namespace headlab
