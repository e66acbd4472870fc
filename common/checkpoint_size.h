// The size of a run's checkpoints, estimated from its config before anything is built
// (torch-free: the worker's disk check, worker/disk_check.h). The closed forms follow the
// model (payload/exec/model.cc, attention.cc) and the checkpoint's grammar
// (payload/exec/checkpoint.h); payload/exec/checkpoint_test.cc checks them against real
// models and serialized checkpoints.
#pragma once

#include <cstdint>

#include "common/json.h"

namespace headlab {

// Returns the parameter count of the model a normalized run config builds with headlab's
// own architecture (model.*): token embedding vocab x width; learned positions context x
// width (model.pos "learned"); per layer two norms, q and o projections width x width, k
// and v projections width x kv_heads x head_dim, MLP width x hidden twice; a final norm.
// Norms hold 2 x width values (layernorm: weight, bias) or width (rmsnorm). The output
// head is the embedding (tied). 0 for model.init_from (its shape is in the folder's
// config.json, read only by exec).
int64_t ModelParameterCount(const Json& config);

// Returns the bytes of one checkpoint of that model: the fp32 parameters and AdamW's two
// fp32 moments (exp_avg, exp_avg_sq) per parameter, 12 bytes a parameter, plus the fixed
// patterns' compact buffers (alpha, rho, log Z: 3 x heads x context fp32 per layer). The
// archive's own framing (names, per-tensor records) is left to the caller's margin.
// 0 when ModelParameterCount is.
int64_t CheckpointBytesEstimate(const Json& config);

}  // namespace headlab
