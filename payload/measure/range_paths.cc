// Attention, projection and core range paths.
#include "payload/measure/range_paths.h"

namespace headlab::measure {
namespace {

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Under `prefix` and not inside a method hook's range.
bool ModelWorkUnder(const std::string& path, const std::string& prefix) {
  return path.compare(0, prefix.size() + 1, prefix + "/") == 0 &&
         path.find("/method/") == std::string::npos;
}

// True iff `segment` is a per-layer label "L<digits>".
bool IsLayerLabel(const std::string& segment) {
  if (segment.size() < 2 || segment[0] != 'L') return false;
  for (size_t i = 1; i < segment.size(); ++i)
    if (segment[i] < '0' || segment[i] > '9') return false;
  return true;
}

}  // namespace

bool IsAttentionPath(const std::string& path, const std::string& prefix) {
  return ModelWorkUnder(path, prefix) && EndsWith(path, std::string("/") + kAttentionRange);
}

bool IsProjectionPath(const std::string& path, const std::string& prefix) {
  const std::string tail = std::string("/") + kProjectionRange;
  if (!ModelWorkUnder(path, prefix) || !EndsWith(path, tail)) return false;
  std::string parent = path.substr(0, path.size() - tail.size());
  const size_t slash = parent.rfind('/');
  if (slash != std::string::npos && IsLayerLabel(parent.substr(slash + 1)))
    parent = parent.substr(0, slash);
  return EndsWith(parent, std::string("/") + kAttentionRange);
}

AttentionSplit SplitAttention(const std::map<std::string, double>& by_path,
                              const std::string& prefix) {
  AttentionSplit s;
  for (const auto& [path, v] : by_path) {
    if (IsAttentionPath(path, prefix)) s.attention += v;
    if (IsProjectionPath(path, prefix)) s.projection += v;
  }
  return s;
}

}  // namespace headlab::measure
