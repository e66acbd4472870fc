// Model FLOPs and the device peaks that model FLOPs utilisation (MFU) divides by.
// Torch-free.
//
// ModelFlopsPerToken is the forward + backward cost of one trained token (PaLM, Chowdhery et
// al. 2022, App. B, with causal attention): 6 N + 6 L T C, where N counts the parameters that
// take part in matmuls (per layer the Q, K, V and output projections and the MLP, plus the
// output head; embedding lookups are not matmuls), L the layers, T the context and C = heads
// x head_dim (each layer's QK^T and PV cost 2 T C per token forward over the causal half,
// x3 for forward + backward). It counts an all-ordinary model, so arms that replace or prune
// heads are compared at equal work: their MFU rises when they save time.
#pragma once

#include <string>

#include "payload/exec/exec_config.h"

namespace headlab {

// Returns 6 N + 6 L T C for `c` (see above), in FLOPs per token.
double ModelFlopsPerToken(const ModelConfig& c);

// Returns the dense peak FLOP/s of the device called `device_name` (e.g. "cuda:0 NVIDIA
// H200") for matmuls in `dtype` ("fp32", "bf16", "fp16"), or 0 when this table does not know
// the device (then no MFU is reported). From the vendors' data sheets, SXM parts.
double PeakFlops(const std::string& device_name, const std::string& dtype);

}  // namespace headlab
