// AoH (retrieval and streaming heads) in exec's method table (payload/exec/method_spec.h); its
// run-config section is registered in aoh_schema.cc.
#include "payload/methods/aoh/aoh_method.h"

#include "payload/exec/method_spec.h"
#include "payload/methods/aoh/bench_latency.h"

namespace headlab {
namespace {

// The inference latency legs of bench_latency.h, which time the model through AoH's
// KV-cache decoder (bench-decode).
std::vector<RunKind> RunKinds() {
  return {
      {"bench-prefill", false, kBenchRefusesMethods,
       [](const LoadedRun& r, EventSink* e) { return RunBenchPrefill(BenchRequestOf(r), e); }},
      {"bench-decode", false, kBenchRefusesMethods,
       [](const LoadedRun& r, EventSink* e) { return RunBenchDecode(BenchRequestOf(r), e); }},
  };
}

[[maybe_unused]] const bool kRegistered =
    RegisterMethod({"aoh", /*loop_order=*/30, MakeAohHooks, RunKinds()});

}  // namespace
}  // namespace headlab
