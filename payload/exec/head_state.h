// Per-head attention states of the hybrid-head layer (attention.h) and their config syntax.
// Torch-free: the config reader and the CLI-facing validation use it without LibTorch.
//
// model.head_modes := "" | item ("," item)*          (unlisted heads stay ordinary)
// item  := LAYER "." HEAD "=" mode                    (later items override earlier ones)
// LAYER, HEAD := integer | "*"
// mode  := "ordinary" | "pruned" | "local:" W | "streaming:" SINK ":" RECENT [":" CHUNK]
// e.g. "0.1=local:32,1.*=streaming:4:16,1.2=streaming:4:16:64,1.3=pruned" (no CHUNK: token
// eviction). Fixed heads need fitted patterns and
// are installed by the methods, not by config.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace headlab {

enum class HeadMode { kOrdinary, kFixed, kStreaming, kLocal, kPruned };

// Returns "ordinary", "fixed", "streaming", "local" or "pruned".
const char* HeadModeName(HeadMode m);

// Whether a head in mode `m` forms attention scores from its Q and K (ordinary, local,
// streaming); fixed heads read a pattern and pruned heads nothing.
bool FormsScores(HeadMode m);

struct HeadState {
  HeadMode mode = HeadMode::kOrdinary;
  int64_t window = 0;  // local: W >= 1, key k allowed iff q - W < k <= q (AAH §5.8)
  int64_t sink = 0;    // streaming: keys k < sink ...
  int64_t recent = 0;  // ... or the recent window, recent >= 1 (AoH §5); see chunk
  bool dense = false;  // fixed: a dense [T, T] pattern rather than alpha/rho/logZ
  // Streaming eviction. 0: per token (StreamingLLM), key k visible iff q - k < recent.
  // K >= 1: per chunk (AoH §5, chunked prefill): the cache is trimmed to sink + recent after
  // each chunk of K positions, so query q of the chunk starting at c = floor(q / K) K sees
  // k >= c - recent (the kept window and its own chunk up to q).
  int64_t chunk = 0;
};

struct HeadAssignment {
  int64_t layer = 0;
  int64_t head = 0;
  HeadState state;
};

// Parses `spec` for a model of `layers` x `heads`; returns one assignment per (layer, head)
// it names, wildcards expanded, in order. Errors are InvalidArgument "<where>: ...".
StatusOr<std::vector<HeadAssignment>> ParseHeadModes(const std::string& spec, int64_t layers,
                                                     int64_t heads, const std::string& where);

}  // namespace headlab
