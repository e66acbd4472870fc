// What paired results read besides summaries: where a run's succeeded attempt ran (the
// device label and device count), its per-token log-probabilities (the logprobs artifact)
// and why its FLOPs were not measured (provenance flops.status / flops.reason).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/db.h"

namespace headlab::coord {

struct RunPlacement {
  std::string device;    // provenance "device" of its latest attempt, "" when unknown
  int device_count = 0;  // attempts.devices_json length of that attempt (0 = CPU)
};

// Returns where run `run`'s latest attempt ran.
RunPlacement LoadRunPlacement(Db* db, int64_t run);

// Returns run `run`'s latest logprobs artifact (float32 little-endian, schema/exec.md)
// after checking its SHA-256: NotFound when it has none, Corruption on a mismatch, an I/O
// error when the coordinator cannot read the worker's path.
StatusOr<std::vector<float>> LoadLogProbs(Db* db, int64_t run);

// Returns provenance flops.reason of run `run`'s latest attempt, or "".
std::string LoadFlopsReason(Db* db, int64_t run);

// How a run's model computed (payload/exec/run_setup.h provenance): its precision
// ("bf16", ...; "" for runs that report none) and the distinct per-layer attention paths
// of its first update (e.g. "sdpa[12]", "fused[4] kernel=wgmma-ws/wgmma-ws", "dense_reference
// (why)").
struct RunExecution {
  std::string precision;
  std::vector<std::string> attention_paths;
};
RunExecution LoadRunExecution(Db* db, int64_t run);

}  // namespace headlab::coord
