// The one place that defines each metric's name. Exec emits them, the coordinator stores
// them under these keys, the CLI and dashboard display them.
#pragma once

namespace headlab::metric {

// Training (per logged step).
inline constexpr const char* kTrainLoss = "train.loss";  // nats/token
inline constexpr const char* kTrainLr = "train.lr";
inline constexpr const char* kTrainTokens = "train.tokens";  // cumulative tokens seen
// Throughput of the training updates (evaluation and checkpoint time excluded, the
// attempt's first update excluded as warm-up, and so is each update that carries a
// one-off intervention — a SAF event, an AoH conversion, a pruning — together with the
// first update after it, which re-plans the changed layers: the intervention's cost is its
// method's to report, e.g. saf.cost.total_s; payload/exec/train_hooks.h "interventions").
inline constexpr const char* kTrainTokensPerS = "train.tokens_per_s";
inline constexpr const char* kTrainStepS = "train.step_s";  // seconds per update
// The same throughput over the updates after the latest intervention only (runs with one).
inline constexpr const char* kTrainTokensPerSAfterEvent = "train.tokens_per_s_after_event";
// Model FLOPs utilisation: ModelFlopsPerToken (6 N + 6 L T C) x tokens/s over the device's
// peak dense FLOP/s for the run's precision; absent where the peak is unknown (CPU).
inline constexpr const char* kTrainMfu = "train.mfu";
inline constexpr const char* kTrainGradNorm = "train.grad_norm";       // before clipping
inline constexpr const char* kElapsedS = "time.elapsed_s";             // wall seconds since start
inline constexpr const char* kPeakMemBytes = "mem.peak_bytes";         // process peak RSS
inline constexpr const char* kGpuPeakMemBytes = "mem.gpu_peak_bytes";  // CUDA allocator peak

// System series the worker samples while an attempt runs (worker/attempt.h), at step =
// whole seconds since the attempt started, every AttemptOptions::system_period.
inline constexpr const char* kSysHostRssBytes = "sys.host_rss_bytes";  // the child's process group
inline constexpr const char* kSysGpuUtilPct = "sys.gpu_util_pct";      // NVML, mean over its GPUs
// NVML, device memory in use, summed
inline constexpr const char* kSysGpuMemBytes = "sys.gpu_mem_bytes";

// Data-parallel runs (train.ranks > 1, payload/exec/dist.h): per logged step and summary,
// means per update over the attempt.
inline constexpr const char* kDistRanks = "dist.ranks";
inline constexpr const char* kDistAllReduceS = "dist.allreduce_s";  // gradient all-reduce
// the slowest rank's update
inline constexpr const char* kDistSlowestUpdateS = "dist.update_s_slowest";

// Evaluation on the held-out reporting split.
inline constexpr const char* kEvalLoss = "eval.loss";  // nats/token
inline constexpr const char* kEvalPpl = "eval.ppl";    // exp(eval.loss)

// Paired timing run kinds (payload/exec/bench_*.h): medians over bench.repeats timed
// repetitions after bench.warmup discarded ones.
inline constexpr const char* kBenchUpdateMs = "bench.update_ms";    // one full optimiser update
inline constexpr const char* kBenchPrefillMs = "bench.prefill_ms";  // at the first length x batch
inline constexpr const char* kBenchDecodeMsPerToken = "bench.decode_ms_per_token";
inline constexpr const char* kBenchKvBytes = "bench.kv_bytes";  // KV cache after decode
// CUDA peak allocated, else peak RSS
inline constexpr const char* kBenchPeakMemBytes = "bench.peak_mem_bytes";

// Hardware FLOPs (the flops run kind, CUPTI; AAH §5.10): per-run counts as summaries, and
// method / pure ratios as results. A count that was not measured is never a number: the
// run's provenance carries kFlopsStatus = "unmeasured" and kFlopsReason instead.
inline constexpr const char* kFlopsTotal = "flops.total";          // per training step
inline constexpr const char* kFlopsAttention = "flops.attention";  // attention ranges only
// The attention ranges split (payload/measure/range_paths.h): the Q/K/V and output
// projections, and the core (scores, softmax, P V), which alone a window can shrink.
inline constexpr const char* kFlopsAttentionProj = "flops.attention_proj";
inline constexpr const char* kFlopsAttentionCore = "flops.attention_core";
// Means over a method controller's period (TrainHooks::ControlPeriod: every step counted,
// control and non-control alike), where flops.total and flops.method are one step's.
inline constexpr const char* kFlopsTotalMean = "flops.total_mean";
inline constexpr const char* kFlopsMethodMean = "flops.method_mean";
inline constexpr const char* kFlopsTotalRatio = "flops.total_ratio";          // results
inline constexpr const char* kFlopsAttentionRatio = "flops.attention_ratio";  // results
inline constexpr const char* kFlopsStatus = "flops.status";  // provenance: measured | unmeasured
inline constexpr const char* kFlopsReason = "flops.reason";  // provenance: why unmeasured

// More of the flops run kind (payload/exec/flops.h): the step's counts by kind, the no-grad
// forward's, the replay cost, and CUDA-event / Activity API times of the named ranges.
inline constexpr const char* kFlopsFp32 = "flops.fp32";      // fadd + fmul + 2 ffma
inline constexpr const char* kFlopsHalf = "flops.half";      // fp16/bf16 non-tensor
inline constexpr const char* kFlopsTensor = "flops.tensor";  // tensor-core ops
inline constexpr const char* kFlopsForwardTotal = "flops.forward_total";
inline constexpr const char* kFlopsForwardAttention = "flops.forward_attention";
// step's method hooks (e.g. AAH controller)
inline constexpr const char* kFlopsMethod = "flops.method";
inline constexpr const char* kFlopsPasses = "flops.passes";          // counter replay passes
inline constexpr const char* kFlopsOverheadX = "flops.overhead_x";   // profiled / plain wall time
inline constexpr const char* kTimeWallPairMs = "time.pair_wall_ms";  // forward + step, host clock
inline constexpr const char* kTimeStepMs = "time.step_ms";           // CUDA events, median
inline constexpr const char* kTimeForwardMs = "time.forward_ms";
inline constexpr const char* kTimeAttentionMs = "time.attention_ms";  // attention ranges in a step
inline constexpr const char* kTimeAttentionCoreMs = "time.attention_core_ms";  // less projections
// method hooks, period mean
inline constexpr const char* kTimeMethodMeanMs = "time.method_mean_ms";
inline constexpr const char* kKernelStepMs = "kernel.step_ms";  // Activity API kernel time
inline constexpr const char* kKernelAttentionMs = "kernel.attention_ms";
inline constexpr const char* kKernelAttentionCoreMs = "kernel.attention_core_ms";

// Synthetic task run kinds (payload/exec/task_eval.h). MQAR (SAF App. C.3.6): loss and
// accuracy at query positions only; passkey (AoH §3): greedy exact-match accuracy, overall
// and per cell as kPasskeyCellPrefix + "L<length>.D<depth %>", e.g. "passkey.acc.L256.D20".
inline constexpr const char* kMqarTrainLoss = "mqar.train_loss";     // per logged step
inline constexpr const char* kMqarLoss = "mqar.loss";                // eval examples, nats/query
inline constexpr const char* kMqarAccuracy = "mqar.accuracy";        // eval examples, 0..1
inline constexpr const char* kPasskeyAccuracy = "passkey.accuracy";  // all cells, 0..1
inline constexpr const char* kPasskeyCellPrefix = "passkey.acc.";

}  // namespace headlab::metric
