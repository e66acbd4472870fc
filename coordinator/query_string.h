// URL query strings of the HTTP API: percent-decoding and parameter lookup.
#pragma once

#include <string>
#include <vector>

namespace headlab::coord {

// Returns `s` with %XX escapes and '+' (space) decoded; malformed escapes stay as they are.
std::string UrlDecode(const std::string& s);

// Returns the decoded value of `name` in a query string ("a=1&b=2"), "" if absent.
std::string QueryParam(const std::string& query, const std::string& name);

// Splits a parameter's list ("a, b,,c") on `sep`: parts trimmed of spaces, empty ones dropped.
std::vector<std::string> SplitParamList(const std::string& list, char sep);

// Returns `s` without leading and trailing spaces and tabs.
std::string TrimParam(const std::string& s);

}  // namespace headlab::coord
