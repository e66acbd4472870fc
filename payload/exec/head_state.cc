// Head-mode names and the model.head_modes parser.
#include "payload/exec/head_state.h"

#include <cstdlib>

namespace headlab {
namespace {

// Splits `s` at every `sep`.
std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

// Parses a decimal integer >= min; returns false on anything else.
bool ParseInt(const std::string& s, int64_t min, int64_t* out) {
  if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *out = std::strtoll(s.c_str(), nullptr, 10);
  return *out >= min;
}

// Parses LAYER or HEAD ("*" = all of `count`) into [*lo, *hi).
bool ParseIndex(const std::string& s, int64_t count, int64_t* lo, int64_t* hi) {
  if (s == "*") {
    *lo = 0;
    *hi = count;
    return true;
  }
  if (!ParseInt(s, 0, lo) || *lo >= count) return false;
  *hi = *lo + 1;
  return true;
}

bool ParseMode(const std::string& s, HeadState* state) {
  std::vector<std::string> f = Split(s, ':');
  if (f[0] == "ordinary" && f.size() == 1) {
    state->mode = HeadMode::kOrdinary;
    return true;
  }
  if (f[0] == "pruned" && f.size() == 1) {
    state->mode = HeadMode::kPruned;
    return true;
  }
  if (f[0] == "local" && f.size() == 2) {
    state->mode = HeadMode::kLocal;
    return ParseInt(f[1], 1, &state->window);
  }
  if (f[0] == "streaming" && (f.size() == 3 || f.size() == 4)) {
    state->mode = HeadMode::kStreaming;
    return ParseInt(f[1], 0, &state->sink) && ParseInt(f[2], 1, &state->recent) &&
           (f.size() == 3 || ParseInt(f[3], 1, &state->chunk));
  }
  return false;
}

}  // namespace

const char* HeadModeName(HeadMode m) {
  switch (m) {
    case HeadMode::kOrdinary: return "ordinary";
    case HeadMode::kFixed: return "fixed";
    case HeadMode::kStreaming: return "streaming";
    case HeadMode::kLocal: return "local";
    case HeadMode::kPruned: return "pruned";
  }
  return "?";
}

StatusOr<std::vector<HeadAssignment>> ParseHeadModes(const std::string& spec, int64_t layers,
                                                     int64_t heads, const std::string& where) {
  std::vector<HeadAssignment> out;
  if (spec.empty()) return out;
  for (const std::string& item : Split(spec, ',')) {
    auto bad = [&](const std::string& what) {
      return Status::InvalidArgument(where + ": \"" + item + "\": " + what);
    };
    size_t eq = item.find('=');
    if (eq == std::string::npos) return bad("expected LAYER.HEAD=MODE");
    std::vector<std::string> lh = Split(item.substr(0, eq), '.');
    int64_t l0, l1, h0, h1;
    if (lh.size() != 2) return bad("expected LAYER.HEAD before '='");
    if (!ParseIndex(lh[0], layers, &l0, &l1))
      return bad("layer must be * or an integer in [0, " + std::to_string(layers) + ")");
    if (!ParseIndex(lh[1], heads, &h0, &h1))
      return bad("head must be * or an integer in [0, " + std::to_string(heads) + ")");
    HeadState state;
    if (!ParseMode(item.substr(eq + 1), &state))
      return bad("mode must be ordinary, pruned, local:W (W >= 1) or streaming:SINK:RECENT[:CHUNK] "
                 "(RECENT >= 1, CHUNK >= 1)");
    for (int64_t l = l0; l < l1; ++l)
      for (int64_t h = h0; h < h1; ++h) out.push_back({l, h, state});
  }
  return out;
}

}  // namespace headlab
