// What every fuzz target asserts beyond "no crash": a broken invariant aborts with a
// message, which libFuzzer reports as a crash and saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/utf8.h"

namespace headlab::fuzz {

// Aborts with `what` unless `ok`.
inline void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

// Every error message a person may read (and a JSON answer may carry) is valid UTF-8.
inline void CheckMessage(const std::string& message) {
  Check(IsValidUtf8(message), "an error message is not valid UTF-8");
  Check(!message.empty(), "an error without a message");
}

}  // namespace headlab::fuzz
