// Validation of the JSON bodies workers send (schema/protocol.md, worker -> coordinator).
// Every parser returns InvalidArgument naming the command and field on bad input, so the
// router can log it and drop the message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/store.h"

namespace headlab::coord {

struct ReadyMsg {
  std::string token, name, host, version;
  int64_t pid = 0;
  int slots = 0;
  Json devices;                      // the array as sent (stored in workers.devices_json)
  std::vector<int> cuda_devices;     // indices of devices with kind "cuda"
  std::vector<AttemptRef> running;
};

struct RejectMsg {
  AttemptRef ref;
  std::string reason;
};

struct MetricsMsg {
  AttemptRef ref;
  std::vector<MetricPoint> points;
  int64_t max_seq = -1;
};

struct ArtifactMsg {
  AttemptRef ref;
  int64_t seq = 0;
  std::string kind, path, sha256;
  int64_t bytes = 0;
  int64_t step = 0;
};

struct DoneMsg {
  AttemptRef ref;
  std::string status;  // succeeded | failed | cancelled
  int exit_code = 0;
  std::string error, stderr_tail;
  Json summary;        // object of key -> number (null allowed)
};

StatusOr<ReadyMsg> ParseReady(const Json& body);
// HEARTBEAT {running: [ref]}.
StatusOr<std::vector<AttemptRef>> ParseHeartbeat(const Json& body);
StatusOr<RejectMsg> ParseReject(const Json& body);
// ACCEPT-style {run, attempt}.
StatusOr<AttemptRef> ParseRef(const Json& body, const char* command);
// METRICS from the body's text, streamed (SAX) into MetricPoints without building a JSON
// tree: METRICS is the bulk of the traffic (DESIGN.md, Scale).
StatusOr<MetricsMsg> ParseMetricsText(const std::string& text);
StatusOr<ArtifactMsg> ParseArtifact(const Json& body);
// PROVENANCE {run, attempt, fields: {...}}: returns the ref; fields are body["fields"].
StatusOr<AttemptRef> ParseProvenance(const Json& body);
StatusOr<DoneMsg> ParseDone(const Json& body);

// Returns {"run": r, "attempt": a}.
Json RefJson(const AttemptRef& ref);
// Returns "run R attempt A" (for log lines).
std::string RefString(const AttemptRef& ref);

}  // namespace headlab::coord
