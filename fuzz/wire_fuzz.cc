// libFuzzer target: the worker -> coordinator message bodies (coordinator/messages.h,
// schema/protocol.md). The first input byte picks the command, the rest is its body, parsed
// as the coordinator parses it (ParseBody: bounded strict JSON, then the command's
// validator; METRICS by the streaming parser).
// Invariants: no crash or uncaught exception; every refusal has a valid UTF-8 message.
#include <cstddef>
#include <cstdint>
#include <string>

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
  static const char* kCommands[] = {"METRICS",    "READY",  "HEARTBEAT",
                                    "REJECT",     "ACCEPT", "ARTIFACT",
                                    "PROVENANCE", "DONE",   "ARTIFACT_DELETED"};
  const std::string command = kCommands[data[0] % 9];
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  if (command == "METRICS") {
    Expect(ParseMetricsText(body));
    return 0;
  }
  auto j = ParseBody(command, body);
  if (!j.ok()) {
    fuzz::CheckMessage(j.status().message());
    return 0;
  }
  if (command == "READY")
    Expect(ParseReady(*j));
  else if (command == "HEARTBEAT")
    Expect(ParseHeartbeat(*j));
  else if (command == "REJECT")
    Expect(ParseReject(*j));
  else if (command == "ACCEPT")
    Expect(ParseAccept(*j));
  else if (command == "ARTIFACT")
    Expect(ParseArtifact(*j));
  else if (command == "PROVENANCE")
    Expect(ParseProvenance(*j));
  else if (command == "ARTIFACT_DELETED")
    Expect(ParseArtifactDeleted(*j));
  else
    Expect(ParseDone(*j));
  return 0;
}
