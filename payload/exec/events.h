// The payload's writer of the exec event stream (schema/exec.md; the daemon reads it with
// payload/exec_event_reader.h): a JSON object per line on stdout, flushed as it happens.
//
// event := {"ev":"metric", "step":N, "key":K, "value":V, "t":unix_seconds}
//        | {"ev":"artifact", "kind":K, "path":P, "sha256":H, "bytes":B, "step":N}
//        | {"ev":"provenance", "fields":{...}}
//        | {"ev":"summary", "values":{key: number}}
//        | {"ev":"log", "msg":"..."}
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/json.h"

namespace headlab {

// Writes events to a FILE* (stdout in production, a temp file in tests). Single-threaded.
class EventSink {
 public:
  explicit EventSink(FILE* out) : out_(out) {}

  // A non-finite value becomes a log event (JSON has no NaN/Inf).
  void Metric(int64_t step, const std::string& key, double value);
  void Artifact(const std::string& kind, const std::string& path, const std::string& sha256,
                uint64_t bytes, int64_t step);
  void Provenance(const Json& fields);
  // Non-finite values are left out.
  void Summary(const Json& values);
  void LogLine(const std::string& msg);

 private:
  void Emit(const Json& event);
  FILE* out_;
};

// Returns the wall clock as unix seconds with sub-second precision.
double UnixSeconds();

}  // namespace headlab
