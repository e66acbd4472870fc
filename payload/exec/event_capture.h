// Test helper: capturing what an event-emitting entry point (RunTraining, RunFlops, the
// benches) writes to its EventSink. Shared by exec's and the methods' tests.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/events.h"

namespace headlab::testing {

// Runs fn on an event sink over a temporary file; returns fn's status in *status and every
// event it emitted, in order.
inline std::vector<Json> CaptureEvents(const std::function<Status(EventSink*)>& fn,
                                       Status* status) {
  std::vector<Json> events;
  FILE* f = std::tmpfile();
  if (!f) {
    *status = Status::Internal("tmpfile failed");
    return events;
  }
  EventSink sink(f);
  *status = fn(&sink);
  std::rewind(f);
  std::string text;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    events.push_back(Json::parse(text.substr(start, end - start)));
  return events;
}

// Adds a provenance event's fields to *provenance, newest winning, as the coordinator merges
// the provenance events of one attempt.
inline void MergeProvenance(Json* provenance, const Json& fields) {
  if (provenance->is_null()) *provenance = Json::object();
  provenance->update(fields);
}

}  // namespace headlab::testing
