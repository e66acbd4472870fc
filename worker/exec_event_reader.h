// The daemon's reader of `headlab exec` stdout event lines (schema/exec.md, "Events"); the
// payload writes them with payload/exec/events.h.
//
//    line := {"ev":"metric", "step":N, "key":K, "value":V, "t":unix_seconds}
//          | {"ev":"artifact", "kind":K, "path":P, "sha256":H, "bytes":B, "step":N}
//          | {"ev":"provenance", "fields":{...}}
//          | {"ev":"summary", "values":{key: number}}
//          | {"ev":"log", "msg":"..."}
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

struct ExecEvent {
  enum class Type { kMetric, kArtifact, kProvenance, kSummary, kLog };
  Type type = Type::kLog;
  // kMetric
  int64_t step = 0;
  std::string key;
  double value = 0;
  double time_s = 0;
  // kArtifact (step shared with kMetric)
  std::string kind, path, sha256;
  uint64_t bytes = 0;
  // kProvenance: fields; kSummary: values (numbers only); kLog: msg in `key`
  Json object;
};

// Parses one stdout line. Returns InvalidArgument (naming what is wrong) for anything that
// is not a well-formed event: the caller ignores such lines.
StatusOr<ExecEvent> ParseExecEvent(const std::string& line);

}  // namespace headlab
