// URL query strings: decoding and lookup.
#include "coordinator/query_string.h"

#include <cctype>
#include <cstdlib>

namespace headlab::coord {

std::string UrlDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() &&
               std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += char(std::strtol(s.substr(i + 1, 2).c_str(), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string QueryParam(const std::string& query, const std::string& name) {
  size_t i = 0;
  while (i <= query.size()) {
    size_t j = query.find('&', i);
    if (j == std::string::npos) j = query.size();
    std::string kv = query.substr(i, j - i);
    size_t eq = kv.find('=');
    if (UrlDecode(kv.substr(0, eq)) == name)
      return eq == std::string::npos ? "" : UrlDecode(kv.substr(eq + 1));
    i = j + 1;
  }
  return "";
}

std::vector<std::string> SplitParamList(const std::string& list, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(sep, start);
    if (end == std::string::npos) end = list.size();
    std::string part = TrimParam(list.substr(start, end - start));
    if (!part.empty()) out.push_back(std::move(part));
    start = end + 1;
  }
  return out;
}

std::string TrimParam(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

}  // namespace headlab::coord
