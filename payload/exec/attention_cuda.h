// The hybrid-head layer's fast path (CUDA): HybridAttentionImpl::forward hands a layer whose
// input lives on a CUDA device to FusedAttentionForward, which runs it as its plan says
// (attention_plan.h): one packed Q/K/V projection with only the rows the heads use
// (fixed heads have no Q/K rows, pruned heads no rows at all), ordinary heads through
// PyTorch's scaled_dot_product_attention, local heads through PyTorch's FlashAttention-2
// with a left window where the build and device have it (fp16/bf16), streaming heads (and
// local ones elsewhere, and with train.attention = fused every head) through the fused
// hybrid-head kernels (kernels/),
// fixed heads as a GEMM with their cached causal pattern, and one output projection over
// the heads that have outputs. The dense masks of attention.cc stay the CPU path and the
// oracle this path is tested against (kernels/torch/exec_fused_gpu_test.cc, and on the CPU
// attention_cuda_test.cc with stand-ins for SDPA and the kernels).
//
// The kernels are linked only into CUDA builds (LibTorch with CUDA and nvcc: the device
// machine); elsewhere FusedAttentionCompiled() is false.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "kernels/hybrid_attention.h"
#include "payload/exec/attention_plan.h"
#include "payload/exec/head_state.h"

// scaled_dot_product_attention is part of LibTorch from 2.0 on.
#define HEADLAB_HAVE_SDPA (TORCH_VERSION_MAJOR >= 2)

namespace headlab {

class HybridAttentionImpl;
struct ForwardTaps;

// Which implementation the layers use (train.attention): kAuto = the fast path with the
// plan measured fastest per layer and shape (below; the static rules of attention_plan.h
// where nothing can be timed), kFused = the fast path with the fused kernels for every
// head (the SAF paper's single-kernel form), kDense = the dense reference everywhere.
enum class AttentionMode { kAuto, kFused, kDense };

// Parses "auto" | "fused" | "dense"; false for anything else.
bool ParseAttentionMode(const std::string& s, AttentionMode* mode);
const char* AttentionModeName(AttentionMode mode);

// Sets the mode for this process (the run kinds set it from train.attention); kAuto by default.
void SetAttentionMode(AttentionMode mode);
AttentionMode GetAttentionMode();

// Returns true iff this build links the fused CUDA kernels.
bool FusedAttentionCompiled();

// Returns "" iff the layer's shape and input suit the fast path and the fused kernels,
// else why not: train.attention is not dense, x [B, T, ...] is fp32, fp16 or bf16, head_dim
// is 64, 96 or 128, at most kernels::kMaxHeads heads, B * H * T * d < 2^31.
std::string KernelInputUnsupported(const HybridAttentionImpl& layer, const torch::Tensor& x);

// Returns "" iff `layer` on input x takes the fast path, else why not (e.g. "input not on
// CUDA", "train.attention = dense", a plan's reason). Plans (and caches the plan of) the
// layer for x's shape and dtype; a fallback is logged once per process.
std::string FusedAttentionUnsupported(HybridAttentionImpl& layer, const torch::Tensor& x);

// The layer's forward on the fast path: same contract as HybridAttentionImpl::forward
// (x [B, T, C] -> [B, T, C], `rotate` applied to queries and keys [B, h, T, d]). Requires
// FusedAttentionUnsupported(layer, x) == "". *taps, when given, gets the projections and
// per-head outputs where the plan has every head's (ForwardTaps, attention.h).
torch::Tensor FusedAttentionForward(
    HybridAttentionImpl& layer, const torch::Tensor& x,
    const std::function<torch::Tensor(const torch::Tensor&)>& rotate, ForwardTaps* taps = nullptr);

// Returns the kernels' spec of a head in `state` (its window, sink and recent; the fixed
// heads' prior pointers left null for the caller to fill).
kernels::HeadSpec KernelHeadSpec(const HeadState& state);

// Returns how many layer forwards took the fast path in this process (tests assert on it).
int64_t FusedAttentionCalls();

// Runs SDPA's causal attention (forward + backward) once over every head count 1..H of
// `layer`'s heads, on inputs laid out as the fast path's packed projection gives them (B x
// T tokens of `dtype` on `device`; `rotated`: queries and keys after a rotary encoding, as
// RoPE models have them). SDPA's cuDNN backend builds an execution plan on the first call of
// each shape (128-148 ms forward + backward at the 1b preset's layer on an H100,
// scripts/gpu/aah_layer_bench.py), and a method that moves heads between SDPA and local
// windows (AAH-v3) meets a new head count at most control updates; the plans are the
// process's, shared by every layer of that shape. Returns the seconds spent; 0 with nothing
// run (not CUDA, no SDPA in this build, train.attention other than auto).
double PrepareSdpaHeadCounts(const HybridAttentionImpl& layer, int64_t batch, int64_t seq,
                             torch::ScalarType dtype, const torch::Device& device, bool rotated);

// Returns what `layer`'s latest forward ran on, e.g. "sdpa[9] fixed_gemm[3]",
// "fused[12] kernel=wgmma-ws/wgmma-ws" (the fused kernels' forward/backward) or
// "dense_reference (why)"; "" before its first forward.
std::string LayerPathLabel(const HybridAttentionImpl& layer);

// train.attention = auto: the first forward of a layer for each (head states, B, T, dtype,
// forward or forward + backward) times every candidate plan (CandidatePlans: the static
// plan first; all-fused; fixed heads as GEMM, convolution or fused) with CUDA events, five
// repetitions each taken round-robin, keeps the static plan unless another is faster
// beyond the noise (ChoosePlan, on the medians), logs the choice once, and later forwards
// of that shape run it. Layers without fixed heads run the static plan without a timing.
// Returns the layer's measured choices (for provenance), in no particular order.
std::vector<PlanChoice> LayerPlanChoices(const HybridAttentionImpl& layer);

// Times one repetition of a candidate: calls `run` (a forward, or forward + backward) as
// often as it likes and returns milliseconds per call.
using PlanTimer = std::function<double(const std::string& label, const std::function<void()>& run)>;

// Tests only: replaces the CUDA-event timer (and enables the measured choice on CPU inputs
// under SetFastPathOnCpuForTesting); an empty timer restores the default.
void SetPlanTimerForTesting(PlanTimer timer);

// Returns the attention backend a model on `device` trains with, for provenance:
// "fused_cuda" (CUDA device, the kernels linked, mode not dense) or "dense_reference".
// Per-layer detail: LayerPathLabel.
const char* AttentionBackendName(const torch::Device& device);

// Tests only: lets CPU inputs take the fast path, with dense stand-ins for SDPA and the
// fused kernels (the packing, row selection, fixed-pattern GEMM and output assembly are the
// real code).
void SetFastPathOnCpuForTesting(bool enabled);

// Tests only: lets local heads of CPU inputs take the FlashAttention-2 segments (with the
// heads' masks as the stand-in) under SetFastPathOnCpuForTesting.
void SetFlashWindowOnCpuForTesting(bool enabled);

}  // namespace headlab
