// Head-mode names and model.head_modes as head states (the grammar: common/head_list.h).
#include "payload/exec/head_state.h"

#include "common/head_list.h"

namespace headlab {

const char* HeadModeName(HeadMode m) {
  switch (m) {
    case HeadMode::kOrdinary:
      return "ordinary";
    case HeadMode::kFixed:
      return "fixed";
    case HeadMode::kStreaming:
      return "streaming";
    case HeadMode::kLocal:
      return "local";
    case HeadMode::kPruned:
      return "pruned";
  }
  return "?";
}

bool FormsScores(HeadMode m) {
  return m == HeadMode::kOrdinary || m == HeadMode::kLocal || m == HeadMode::kStreaming;
}

StatusOr<std::vector<HeadAssignment>> ParseHeadModes(const std::string& spec, int64_t layers,
                                                     int64_t heads, const std::string& where) {
  auto items = ParseHeadModeList(spec, layers, heads, where);  // the grammar: common/head_list.h
  if (!items.ok()) return items.status();
  std::vector<HeadAssignment> out;
  for (const HeadModeItem& m : *items) {
    HeadState state;
    for (HeadMode mode :
         {HeadMode::kOrdinary, HeadMode::kPruned, HeadMode::kLocal, HeadMode::kStreaming})
      if (m.mode == HeadModeName(mode)) state.mode = mode;
    state.window = m.window;
    state.sink = m.sink;
    state.recent = m.recent;
    state.chunk = m.chunk;
    out.push_back({m.at.layer, m.at.head, state});
  }
  return out;
}

}  // namespace headlab
