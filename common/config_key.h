// One leaf key of the run config (schema/grid.md, "Run config"): its type, range, default and
// allowed strings. The run-config schema (common/run_config.cc) is a list of these, composed
// of the core sections and one list per method (payload/methods/<m>/<m>_schema.h), so each
// key is defined once; validation, defaults, documentation order and export columns all
// read it. Also the named-enum helpers the method schemas share: a method's allowed names
// are one array, which both the schema and the method's enum parser read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/status.h"

namespace headlab {

enum class ConfigKeyType { kInt, kNumber, kString };

struct ConfigKey {
  std::string key;  // dotted: "train.lr"
  ConfigKeyType type;
  // kInt / kNumber: the value lies in [min, max] (an open end where min_open / max_open; an
  // infinite end is unbounded).
  double min = 0, max = 0;
  bool min_open = false, max_open = false;
  double num_default = 0;   // kInt / kNumber
  std::string str_default;  // kString
  // kString: the accepted values, '|'-separated ("a|b|c"; "|a" accepts "" too), or any
  // string of at most kMaxConfigStringBytes when `any_string`.
  bool any_string = true;
  std::string allowed;
};

inline constexpr size_t kMaxConfigStringBytes = 4096;

ConfigKey IntKey(const char* key, double lo, double hi, double def);
ConfigKey NumKey(const char* key, double lo, double hi, double def, bool lo_open = false,
                 bool hi_open = false);
// `allowed`: "a|b|c", or nullptr for any string.
ConfigKey StrKey(const char* key, const char* def, const char* allowed);
ConfigKey StrKey(const char* key, const char* def, const std::string& allowed);

// Returns "a|b|c" for {"a", "b", "c"}.
std::string JoinNames(const char* const* names, size_t n);
template <size_t N>
std::string JoinNames(const char* const (&names)[N]) {
  return JoinNames(names, N);
}

// Returns the enum whose name (names[int(e)]) is `s`, or InvalidArgument
// "unknown <what> "<s>" (known: a, b, c)".
StatusOr<int> ParseNameIndex(const char* const* names, size_t n, const std::string& s,
                             const std::string& what);
template <class E, size_t N>
StatusOr<E> ParseNamed(const char* const (&names)[N], const std::string& s,
                       const std::string& what) {
  StatusOr<int> i = ParseNameIndex(names, N, s, what);
  if (!i.ok()) return i.status();
  return E(*i);
}

// Returns the value of a parse that the schema has already made sure succeeds (a method's
// options reading a normalised config); a failure there is a bug between schema and parser,
// thrown as std::invalid_argument for the reader's catch to report.
template <class T>
T SchemaChecked(StatusOr<T> r) {
  if (!r.ok()) throw std::invalid_argument(r.status().message());
  return *r;
}

// Returns the positive integers of a comma-separated list ("2, 2,4" -> {2, 2, 4}; "" -> {}),
// or InvalidArgument "expected a comma-separated list of positive integers, got "<s>"".
StatusOr<std::vector<int64_t>> ParsePositiveIntList(const std::string& s);
// Returns the numbers in [0, 1] of a comma-separated list ("0.2, 0.4" -> {0.2, 0.4}; "" -> {}),
// or InvalidArgument "expected a comma-separated list of numbers in [0, 1], got "<s>"".
StatusOr<std::vector<double>> ParseFractionList(const std::string& s);

}  // namespace headlab
