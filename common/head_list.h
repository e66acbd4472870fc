// The one grammar of head lists in run configs, read by the coordinator at submit (checked
// against the model's layers and heads, common/run_config.cc) and by the payload when it
// builds the model (payload/exec/head_state.h, the SAF and pruning selections):
//
//   heads      := "" | head ("," head)*                  saf.heads, prune.heads, bench.fixed_heads
//   head_modes := "" | head "=" mode ("," head "=" mode)*          model.head_modes
//   head       := LAYER "." HEAD        LAYER, HEAD := integer | "*" (every layer / head)
//   mode       := "ordinary" | "pruned" | "local:" W | "streaming:" SINK ":" RECENT [":" CHUNK]
//
// W >= 1 (AAH §5.8), SINK >= 0, RECENT >= 1 (AoH §5); CHUNK >= 1 evicts per chunk of CHUNK
// positions (AoH §5, chunked prefill; payload/exec/head_state.h), without it per token. In a head
// list a head named twice is an error; in head modes a later item overrides an earlier one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace headlab {

struct HeadAt {
  int64_t layer = 0;
  int64_t head = 0;
};

// One head of head modes, wildcards expanded: its mode's name ("ordinary", "pruned",
// "local", "streaming") and numbers (the others 0).
struct HeadModeItem {
  HeadAt at;
  std::string mode;
  int64_t window = 0;
  int64_t sink = 0;
  int64_t recent = 0;
  int64_t chunk = 0;  // streaming: 0 per-token eviction, K per chunk of K positions
};

// Parses a head list for a `layers` x `heads` model: the heads in the order named,
// wildcards expanded. InvalidArgument "<where>: ..." naming the bad item. With layers or
// heads < 0 (a shape only a checkpoint knows) it checks the syntax and returns no heads.
StatusOr<std::vector<HeadAt>> ParseHeadList(const std::string& spec, int64_t layers, int64_t heads,
                                            const std::string& where);

// Parses head modes for a `layers` x `heads` model: one item per (layer, head) named, in
// order, wildcards expanded. InvalidArgument "<where>: ..." naming the bad item. Layers or
// heads < 0: the syntax only, as for ParseHeadList.
StatusOr<std::vector<HeadModeItem>> ParseHeadModeList(const std::string& spec, int64_t layers,
                                                      int64_t heads, const std::string& where);

}  // namespace headlab
