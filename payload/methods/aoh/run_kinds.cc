// AoH's run kinds in exec's run-kind table (run_kinds.h): the inference latency legs of
// bench_latency.h, which time the model through AoH's KV-cache decoder (bench-decode).
#include "payload/exec/run_kinds.h"

#include "payload/methods/aoh/bench_latency.h"

namespace headlab {

void AddAohRunKinds(RunKindTable* table) {
  table->push_back(
      {"bench-prefill", false, kBenchRefusesMethods,
       [](const LoadedRun& r, EventSink* e) { return RunBenchPrefill(BenchRequestOf(r), e); }});
  table->push_back(
      {"bench-decode", false, kBenchRefusesMethods,
       [](const LoadedRun& r, EventSink* e) { return RunBenchDecode(BenchRequestOf(r), e); }});
}

}  // namespace headlab
