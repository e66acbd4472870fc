// Validation of the JSON bodies workers send (schema/protocol.md, worker -> coordinator).
// Every parser returns InvalidArgument naming the command and field on bad input, so the
// router can log it and drop the message. Parsing is bounded: a body past
// wire::MaxBodyBytes(command) is refused before it is read, one nested deeper than
// wire::kMaxBodyDepth while it is read (no recursion anywhere depends on the input).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/store.h"

namespace headlab::coord {

struct ReadyMsg {
  std::string id;  // printable ASCII: the worker's name on the wire and in SQL
  std::string name, host, version;
  std::string work_dir;  // absolute; attempts write under work_dir/runs/<run>-<attempt>
  std::string session;   // the previous WELCOME's key ("" = none): reconnect proof
  int64_t pid = 0;
  int slots = 0;
  Json devices;                   // the array as sent (stored in workers.devices_json)
  std::vector<int> cuda_devices;  // indices of devices with kind "cuda"
  std::vector<AttemptRef> running;
};

struct AcceptMsg {
  AttemptRef ref;
  Json resume;  // the checkpoint the attempt actually resumes from, or null
};

struct RejectMsg {
  AttemptRef ref;
  std::string reason;
  bool busy = false;  // no free slot / device busy: the run is requeued, not charged
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

struct ArtifactDeletedMsg {
  AttemptRef ref;
  int64_t seq = 0;  // the ARTIFACT whose file is gone
  std::string path;
};

struct DoneMsg {
  AttemptRef ref;
  std::string status;  // succeeded | failed | cancelled
  int exit_code = 0;
  std::string error, stderr_tail;
  Json summary;  // object of key -> number (null allowed)
};

// Returns the body of `command` as a JSON object (common/wire_body.h with the limit of
// wire::MaxBodyBytes(command)), or InvalidArgument.
StatusOr<Json> ParseBody(const std::string& command, const std::string& text);

// Returns true iff `id` may name a worker: 1..wire::kMaxWorkerIdBytes printable ASCII
// characters (no spaces, no control bytes, no ZeroMQ-generated binary identities).
bool ValidWorkerId(const std::string& id);

StatusOr<ReadyMsg> ParseReady(const Json& body);
// ACCEPT {run, attempt, resume?: null | {path, sha256, step}}.
StatusOr<AcceptMsg> ParseAccept(const Json& body);
// HEARTBEAT {running: [ref]}.
StatusOr<std::vector<AttemptRef>> ParseHeartbeat(const Json& body);
StatusOr<RejectMsg> ParseReject(const Json& body);
// ACCEPT-style {run, attempt}.
StatusOr<AttemptRef> ParseRef(const Json& body, const char* command);
// METRICS from the body's text, streamed (SAX) into MetricPoints without building a JSON
// tree: METRICS is the bulk of the traffic (docs/DESIGN.md, Scale). Bounded like ParseBody.
StatusOr<MetricsMsg> ParseMetricsText(const std::string& text);
StatusOr<ArtifactMsg> ParseArtifact(const Json& body);
StatusOr<ArtifactDeletedMsg> ParseArtifactDeleted(const Json& body);
// PROVENANCE {run, attempt, fields: {...}}: returns the ref; fields are body["fields"].
StatusOr<AttemptRef> ParseProvenance(const Json& body);
StatusOr<DoneMsg> ParseDone(const Json& body);

// Returns true iff `path` lies inside `dir` (both absolute; compared after lexical
// normalisation, so "dir/../x" is outside). Symbolic links are not followed here.
bool PathInside(const std::string& path, const std::string& dir);

// Returns true iff `path` exists and, with every symbolic link resolved, lies inside `dir`
// (also resolved).
bool ResolvesInside(const std::string& path, const std::string& dir);

// Returns `bytes` for a log line: as is when it is printable ASCII, else as hex ("0x00ab..");
// at most `max` characters of either.
std::string PrintableBytes(const std::string& bytes, size_t max = 48);

// Returns {"run": r, "attempt": a}.
Json RefJson(const AttemptRef& ref);
// Returns "run R attempt A" (for log lines).
std::string RefString(const AttemptRef& ref);

}  // namespace headlab::coord
