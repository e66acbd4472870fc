// Edit distance and the closest known name.
#include "common/suggest.h"

#include <algorithm>
#include <utility>

namespace headlab {

size_t EditDistance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::string ClosestName(const std::string& word, const std::vector<std::string>& candidates) {
  if (word.empty()) return "";
  const size_t limit = std::max<size_t>(1, word.size() / 3);
  std::string best;
  size_t best_d = limit + 1;
  for (const std::string& c : candidates) {
    if (c == word) return c;
    size_t d = EditDistance(word, c);
    if (d < best_d) {
      best = c;
      best_d = d;
    }
  }
  if (!best.empty()) return best;
  // A truncated or extended name ("eval.perplexity" for "eval.ppl" is not one; "result"
  // for "results" is): a shared prefix of the shorter name, 3 characters or more.
  for (const std::string& c : candidates) {
    const std::string& shorter = c.size() < word.size() ? c : word;
    const std::string& longer = c.size() < word.size() ? word : c;
    if (shorter.size() >= 3 && longer.compare(0, shorter.size(), shorter) == 0) return c;
  }
  return "";
}

std::string ClosestValue(const std::string& word, const std::vector<std::string>& allowed) {
  // Other names people give config values; checked before spelling, since a short word's
  // nearest spelling can mean its opposite.
  static const std::pair<const char*, const char*> kOtherNames[] = {
      {"gpu", "cuda"},     {"nvidia", "cuda"}, {"cuda:0", "cuda"},   {"host", "cpu"},
      {"float16", "fp16"}, {"half", "fp16"},   {"bfloat16", "bf16"}, {"float32", "fp32"},
      {"float", "fp32"},   {"rotary", "rope"}, {"none", "off"},      {"off", "none"}};
  for (const auto& [other, name] : kOtherNames)
    if (word == other)
      for (const std::string& a : allowed)
        if (a == name) return a;
  return ClosestName(word, allowed);
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string c = ClosestName(word, candidates);
  return c.empty() ? "" : " (did you mean \"" + c + "\"?)";
}

}  // namespace headlab
