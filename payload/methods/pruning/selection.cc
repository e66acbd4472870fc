// Pruning head selection: head-set parsing and the gate-Taylor ranking (SAF eq. 19).
#include "payload/methods/pruning/selection.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "common/head_list.h"

namespace headlab {

StatusOr<std::vector<HeadRef>> ParseHeadSet(const std::string& spec, int64_t layers, int64_t heads,
                                            const std::string& where) {
  auto list = ParseHeadList(spec, layers, heads, where);  // the grammar: common/head_list.h
  if (!list.ok()) return list.status();
  std::vector<HeadRef> out;
  for (const HeadAt& h : *list) out.push_back({h.layer, h.head});
  std::sort(out.begin(), out.end(), [](const HeadRef& a, const HeadRef& b) {
    return std::make_pair(a.layer, a.head) < std::make_pair(b.layer, b.head);
  });
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
      if (std::find(exclude.begin(), exclude.end(), HeadRef{int64_t(l), int64_t(h)}) ==
          exclude.end())
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
