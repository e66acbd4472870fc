// The built-in metric names: the string literals of the metric headers
// (cmake/metric_names.cmake lists them).
#include "common/metric_catalog.h"

#include <cctype>

namespace headlab {

const std::vector<std::string>& BuiltinMetricNames() {
  static const std::vector<std::string> kNames = {
#include "generated/metric_names.inc"
  };
  return kNames;
}

bool IsBuiltinMetric(const std::string& name) {
  if (name.empty()) return false;
  for (const std::string& k : BuiltinMetricNames()) {
    if (k == name) return k.back() != '.';
    if (name.size() > k.size() && name.compare(0, k.size(), k) == 0 &&
        (k.back() == '.' || name[k.size()] == '.'))
      return true;
  }
  return false;
}

namespace {

bool Has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

int BetterDirection(const std::string& metric) {
  // The last component decides, after qualifiers such as ".l16", ".b2", ".L256", ".D20"
  // ("bench.prefill_ms.l16.b1" -> prefill_ms).
  std::vector<std::string> parts;
  for (size_t start = 0; start <= metric.size();) {
    size_t dot = metric.find('.', start);
    if (dot == std::string::npos) dot = metric.size();
    parts.push_back(metric.substr(start, dot - start));
    start = dot + 1;
  }
  auto qualifier = [](const std::string& p) {
    if (p.size() < 2 || std::string("lbLD").find(p[0]) == std::string::npos) return false;
    for (size_t i = 1; i < p.size(); ++i)
      if (!std::isdigit(static_cast<unsigned char>(p[i]))) return false;
    return true;
  };
  while (parts.size() > 1 && qualifier(parts.back())) parts.pop_back();
  const std::string leaf = parts.back();
  if (Has(leaf, "per_s") || Has(leaf, "acc") || Has(leaf, "mfu") || Has(leaf, "speedup")) return +1;
  if (Has(leaf, "loss") || Has(leaf, "ppl") || EndsWith(leaf, "_s") || EndsWith(leaf, "_ms") ||
      Has(leaf, "_ms_") || Has(leaf, "bytes") || Has(leaf, "kl_") || EndsWith(leaf, "_kl") ||
      metric.rfind("flops.", 0) == 0 || metric.rfind("time.", 0) == 0 ||
      metric.rfind("kernel.", 0) == 0)
    return -1;
  return 0;
}

}  // namespace headlab
