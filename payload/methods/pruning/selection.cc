// Pruning head selection: head-set parsing and the gate-Taylor ranking (SAF eq. 19).
#include "payload/methods/pruning/selection.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace headlab {
namespace {

bool ParseIndex(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *out = std::stoll(s);
  return true;
}

}  // namespace

StatusOr<std::vector<HeadRef>> ParseHeadSet(const std::string& spec, int64_t layers,
                                            int64_t heads, const std::string& where) {
  std::vector<HeadRef> out;
  size_t start = 0;
  while (!spec.empty()) {  // every comma-separated item, an empty trailing one included
    size_t comma = spec.find(',', start);
    std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos
                                                                     : comma - start);
    size_t dot = item.find('.');
    HeadRef r;
    if (dot == std::string::npos || !ParseIndex(item.substr(0, dot), &r.layer) ||
        !ParseIndex(item.substr(dot + 1), &r.head))
      return Status::InvalidArgument(where + ": expected LAYER.HEAD, got \"" + item + "\"");
    if (r.layer >= layers || r.head >= heads)
      return Status::InvalidArgument(where + ": head " + item + " is outside the model's " +
                                     std::to_string(layers) + " x " + std::to_string(heads));
    out.push_back(r);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  auto key = [](const HeadRef& h) { return std::make_pair(h.layer, h.head); };
  std::sort(out.begin(), out.end(), [&](const HeadRef& a, const HeadRef& b) { return key(a) < key(b); });
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i] == out[i - 1])
      return Status::InvalidArgument(where + ": head " + std::to_string(out[i].layer) + "." +
                                     std::to_string(out[i].head) + " listed twice");
  return out;
}

int64_t PruneCount(double rate, int64_t total) {
  return std::clamp<int64_t>(int64_t(std::floor(rate * double(total) + 0.5)), 0, total);
}

std::vector<HeadRef> GateTaylorSelect(const std::vector<std::vector<double>>& importance,
                                      int64_t count, const std::vector<HeadRef>& exclude) {
  std::vector<std::tuple<double, int64_t, int64_t>> scored;  // (s_lh, layer, head)
  for (size_t l = 0; l < importance.size(); ++l) {
    double norm2 = 0;
    for (double i : importance[l]) norm2 += i * i;
    const double norm = std::sqrt(norm2);
    for (size_t h = 0; h < importance[l].size(); ++h)
      if (std::find(exclude.begin(), exclude.end(), HeadRef{int64_t(l), int64_t(h)}) == exclude.end())
        scored.emplace_back(norm > 0 ? importance[l][h] / norm : 0.0, int64_t(l), int64_t(h));
  }
  // Tuple order is (score, layer, head): the tie rule of App. C.3.4.
  std::sort(scored.begin(), scored.end());
  std::vector<HeadRef> out;
  for (int64_t i = 0; i < count && i < int64_t(scored.size()); ++i)
    out.push_back({std::get<1>(scored[size_t(i)]), std::get<2>(scored[size_t(i)])});
  return out;
}

}  // namespace headlab
