// libFuzzer target: the worker -> coordinator message bodies (coordinator/messages.h,
// schema/protocol.md). The first input byte picks the command, the rest is its body, parsed
// as the coordinator parses it (bounded JSON, then the command's validator; METRICS by the
// streaming parser).
// Invariants: no crash or uncaught exception; every refusal has a valid UTF-8 message.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/json.h"
#include "coordinator/messages.h"
#include "fuzz/fuzz_check.h"

namespace {

template <typename T>
void Expect(const headlab::StatusOr<T>& r) {
  if (!r.ok()) headlab::fuzz::CheckMessage(r.status().message());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headlab;
  using namespace headlab::coord;
  if (size == 0) return 0;
  const uint8_t command = data[0] % 8;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  if (command == 0) {
    Expect(ParseMetricsText(body));
    return 0;
  }
  auto j = ParseJsonBounded(body, "HLW1 body", JsonLimits{kMaxJsonDepth, 1 << 20});
  if (!j.ok()) {
    fuzz::CheckMessage(j.status().message());
    return 0;
  }
  switch (command) {
    case 1: Expect(ParseReady(*j)); break;
    case 2: Expect(ParseHeartbeat(*j)); break;
    case 3: Expect(ParseReject(*j)); break;
    case 4: Expect(ParseRef(*j, "ACCEPT")); break;
    case 5: Expect(ParseArtifact(*j)); break;
    case 6: Expect(ParseProvenance(*j)); break;
    default: Expect(ParseDone(*j)); break;
  }
  return 0;
}
