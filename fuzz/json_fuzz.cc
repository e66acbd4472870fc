// libFuzzer target: ParseJsonBounded (common/json.h), the parser every input goes through.
// Invariants: no crash or uncaught exception at any depth or size; a refusal has a valid
// UTF-8 message; an accepted value has depth <= the limit, serialises without throwing,
// and its canonical text parses back to the same value.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/json.h"
#include "fuzz/fuzz_check.h"

namespace {

size_t DepthOf(const headlab::Json& j) {
  if (!j.is_structured()) return 0;
  size_t d = 0;
  for (const headlab::Json& v : j) d = std::max(d, DepthOf(v));
  return d + 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headlab;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const JsonLimits limits{16, 1 << 16};
  auto parsed = ParseJsonBounded(text, "fuzz input", limits);
  if (!parsed.ok()) {
    fuzz::CheckMessage(parsed.status().message());
    return 0;
  }
  fuzz::Check(DepthOf(*parsed) <= limits.max_depth, "accepted beyond the depth limit");
  const std::string canonical = CanonicalJson(*parsed);
  (void)JsonText(*parsed);
  auto again = ParseJsonBounded(canonical, "canonical", limits);
  fuzz::Check(again.ok(), "the canonical text of an accepted value does not parse");
  // NaN is not JSON, so every parsed value equals itself.
  fuzz::Check(*again == *parsed, "the canonical text parses to another value");
  return 0;
}
