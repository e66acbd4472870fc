// Run kinds "bench-prefill" and "bench-decode": inference latency of the configured model
// with its head states (model.head_modes), warm-ups discarded, medians over bench.repeats.
//   bench-prefill  one forward pass over random prompts, for every bench.lengths x
//                  bench.batch_sizes cell (SAF App. D.3)
//   bench-decode   chunked prefill with a KV cache, then bench.decode_tokens greedy tokens,
//                  per length: ms per token and KV-cache bytes (AoH, aoh::BenchmarkLatency)
// Summaries: the first cell under the plain key (bench.prefill_ms, ...), every cell under
// key.l<LENGTH>[.b<BATCH>]; the whole table is a bench_table JSON artifact. Torch-free header.
// Registered in the run-kind table through AoH's MethodSpec (aoh_method.cc).
#pragma once

#include "common/status.h"
#include "payload/exec/bench_update.h"
#include "payload/exec/events.h"

namespace headlab {

Status RunBenchPrefill(const BenchRequest& req, EventSink* events);
Status RunBenchDecode(const BenchRequest& req, EventSink* events);

}  // namespace headlab
