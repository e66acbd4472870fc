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
    } else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
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
    size_t a = list.find_first_not_of(" \t", start);
    if (a != std::string::npos && a < end) {
      size_t b = list.find_last_not_of(" \t", end - 1);
      out.push_back(list.substr(a, b - a + 1));
    }
    start = end + 1;
  }
  return out;
}

}  // namespace headlab::coord
