// The head-list grammar (common/head_list.h).
#include "common/head_list.h"

#include <cstdlib>
#include <set>
#include <utility>

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

// Parses LAYER or HEAD ("*" = all of `count`) into [*lo, *hi); an integer may lie outside
// [0, count) (the caller says so with the model's shape).
bool ParseIndex(const std::string& s, int64_t count, int64_t* lo, int64_t* hi) {
  if (s == "*") {
    *lo = 0;
    *hi = count;
    return true;
  }
  if (!ParseInt(s, 0, lo)) return false;
  *hi = *lo + 1;
  return true;
}

// Expands `head` ("L.H", wildcards) for a layers x heads model into *out.
Status ExpandHead(const std::string& head, const std::string& item, int64_t layers, int64_t heads,
                  const std::string& where, std::vector<HeadAt>* out) {
  std::vector<std::string> lh = Split(head, '.');
  int64_t l0, l1, h0, h1;
  if (lh.size() != 2 || !ParseIndex(lh[0], layers, &l0, &l1) || !ParseIndex(lh[1], heads, &h0, &h1))
    return Status::InvalidArgument(where + ": expected LAYER.HEAD (integers or *), got \"" + item +
                                   "\"");
  if (layers < 0 || heads < 0) return Status::Ok();  // shape unknown: the syntax only
  if (l1 > layers || h1 > heads)
    return Status::InvalidArgument(where + ": head " + head + " is outside the model's " +
                                   std::to_string(layers) + " x " + std::to_string(heads));
  for (int64_t l = l0; l < l1; ++l)
    for (int64_t h = h0; h < h1; ++h) out->push_back({l, h});
  return Status::Ok();
}

bool ParseMode(const std::string& s, HeadModeItem* m) {
  std::vector<std::string> f = Split(s, ':');
  m->mode = f[0];
  if ((f[0] == "ordinary" || f[0] == "pruned") && f.size() == 1) return true;
  if (f[0] == "local" && f.size() == 2) return ParseInt(f[1], 1, &m->window);
  if (f[0] == "streaming" && (f.size() == 3 || f.size() == 4))
    return ParseInt(f[1], 0, &m->sink) && ParseInt(f[2], 1, &m->recent) &&
           (f.size() == 3 || ParseInt(f[3], 1, &m->chunk));
  return false;
}

}  // namespace

StatusOr<std::vector<HeadAt>> ParseHeadList(const std::string& spec, int64_t layers, int64_t heads,
                                            const std::string& where) {
  std::vector<HeadAt> out;
  if (spec.empty()) return out;
  std::set<std::pair<int64_t, int64_t>> seen;
  for (const std::string& item : Split(spec, ',')) {
    const size_t first = out.size();
    HEADLAB_RETURN_IF_ERROR(ExpandHead(item, item, layers, heads, where, &out));
    for (size_t i = first; i < out.size(); ++i)
      if (!seen.insert({out[i].layer, out[i].head}).second)
        return Status::InvalidArgument(where + ": head " + std::to_string(out[i].layer) + "." +
                                       std::to_string(out[i].head) + " listed twice");
  }
  return out;
}

StatusOr<std::vector<HeadModeItem>> ParseHeadModeList(const std::string& spec, int64_t layers,
                                                      int64_t heads, const std::string& where) {
  std::vector<HeadModeItem> out;
  if (spec.empty()) return out;
  for (const std::string& item : Split(spec, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      return Status::InvalidArgument(where + ": expected LAYER.HEAD=MODE, got \"" + item + "\"");
    std::vector<HeadAt> at;
    HEADLAB_RETURN_IF_ERROR(ExpandHead(item.substr(0, eq), item, layers, heads, where, &at));
    HeadModeItem mode;
    if (!ParseMode(item.substr(eq + 1), &mode))
      return Status::InvalidArgument(where + ": \"" + item +
                                     "\": mode must be ordinary, pruned, local:W (W >= 1) or "
                                     "streaming:SINK:RECENT[:CHUNK] (RECENT >= 1, CHUNK >= 1)");
    for (const HeadAt& h : at) {
      mode.at = h;
      out.push_back(mode);
    }
  }
  return out;
}

}  // namespace headlab
