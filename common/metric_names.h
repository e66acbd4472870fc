// The one place that defines each metric's name. Exec emits them, the coordinator stores
// them under these keys, the CLI and dashboard display them.
#pragma once

namespace headlab::metric {

// Training (per logged step).
inline constexpr const char* kTrainLoss = "train.loss";          // nats/token
inline constexpr const char* kTrainLr = "train.lr";
inline constexpr const char* kTrainTokens = "train.tokens";      // cumulative tokens seen
inline constexpr const char* kTrainTokensPerS = "train.tokens_per_s";
inline constexpr const char* kTrainGradNorm = "train.grad_norm";  // before clipping
inline constexpr const char* kElapsedS = "time.elapsed_s";       // wall seconds since start
inline constexpr const char* kPeakMemBytes = "mem.peak_bytes";

// Evaluation on the held-out reporting split.
inline constexpr const char* kEvalLoss = "eval.loss";            // nats/token
inline constexpr const char* kEvalPpl = "eval.ppl";              // exp(eval.loss)

}  // namespace headlab::metric
