// ConfigKey constructors and the named-enum / list helpers of the method schemas.
#include "common/config_key.h"

#include <cstdlib>
#include <sstream>

namespace headlab {

ConfigKey IntKey(const char* key, double lo, double hi, double def, const char* doc) {
  ConfigKey k;
  k.key = key;
  k.type = ConfigKeyType::kInt;
  k.min = lo;
  k.max = hi;
  k.num_default = def;
  k.doc = doc;
  return k;
}

ConfigKey NumKey(const char* key, double lo, double hi, double def, const char* doc, bool lo_open,
                 bool hi_open) {
  ConfigKey k = IntKey(key, lo, hi, def, doc);
  k.type = ConfigKeyType::kNumber;
  k.min_open = lo_open;
  k.max_open = hi_open;
  return k;
}

ConfigKey StrKey(const char* key, const char* def, const char* allowed, const char* doc) {
  ConfigKey k;
  k.key = key;
  k.type = ConfigKeyType::kString;
  k.str_default = def;
  k.any_string = allowed == nullptr;
  if (allowed) k.allowed = allowed;
  k.doc = doc;
  return k;
}

ConfigKey StrKey(const char* key, const char* def, const std::string& allowed, const char* doc) {
  return StrKey(key, def, allowed.c_str(), doc);
}

std::string JoinNames(const char* const* names, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += (i ? "|" : "") + std::string(names[i]);
  return out;
}

StatusOr<int> ParseNameIndex(const char* const* names, size_t n, const std::string& s,
                             const std::string& what) {
  std::string known;
  for (size_t i = 0; i < n; ++i) {
    if (s == names[i]) return int(i);
    known += (i ? ", " : "") + std::string(names[i]);
  }
  return Status::InvalidArgument("unknown " + what + " \"" + s + "\" (known: " + known + ")");
}

StatusOr<std::vector<int64_t>> ParsePositiveIntList(const std::string& s) {
  std::vector<int64_t> out;
  if (s.find_first_not_of(' ') == std::string::npos) return out;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    std::string item =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    item = a == std::string::npos ? "" : item.substr(a, b - a + 1);
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1)
      return Status::InvalidArgument(
          "expected a comma-separated list of positive integers, got \"" + s + "\"");
    out.push_back(int64_t(v));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

StatusOr<std::vector<double>> ParseFractionList(const std::string& s) {
  std::vector<double> out;
  if (s.find_first_not_of(' ') == std::string::npos) return out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    item = a == std::string::npos ? "" : item.substr(a, b - a + 1);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v >= 0 && v <= 1))
      return Status::InvalidArgument(
          "expected a comma-separated list of numbers in [0, 1], got \"" + s + "\"");
    out.push_back(v);
  }
  if (!s.empty() && s.back() == ',')
    return Status::InvalidArgument("expected a comma-separated list of numbers in [0, 1], got \"" +
                                   s + "\"");
  return out;
}

}  // namespace headlab
