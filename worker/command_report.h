// The report protocol of the `command` run kind (schema/command.md): the user's program
// writes one JSON object per line to the file descriptor named by $HEADLAB_FD, and
// ReportTranslator turns each line into the exec events of schema/exec.md.
//
//    line := {"ev":"metric", "step":N, "key":K, "value":V [, "t":unix_seconds]}
//          | {"ev":"metrics", "step":N, "values":{K: V, ...} [, "t":unix_seconds]}
//          | {"ev":"summary", "values":{K: V, ...}}        merged; the last value of a key wins
//          | {"ev":"artifact", "kind":KIND, "path":P, "step":N}   P inside the run directory
//          | {"ev":"provenance", "fields":{NAME: value, ...}}
//          | {"ev":"log", "msg":"..."}
//    K     := [A-Za-z0-9_.-]{1,128}      V := a finite number (null: not finite, logged)
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

class ReportTranslator {
 public:
  // `run_dir`: the attempt's directory (absolute); artifact paths resolve against it and
  // must stay inside it. `now` stamps metrics that carry no "t".
  explicit ReportTranslator(std::string run_dir, std::function<double()> now);

  // Translates one report line into exec event objects (in order). A malformed line gives
  // InvalidArgument naming the field; nothing of it is emitted.
  StatusOr<std::vector<Json>> Translate(const std::string& line);

  // Returns the final summary event: the last value of every metric key, overridden by
  // the program's own summary values. Null when there is neither.
  Json FinalSummary() const;

 private:
  StatusOr<std::vector<Json>> Metrics(const Json& j, int64_t step, const Json& values);
  StatusOr<Json> Artifact(const Json& j);

  // Constant after construction.
  const std::string run_dir_;
  const std::function<double()> now_;

  std::map<std::string, double> last_metric_;  // key -> last finite value
  Json summary_ = Json::object();              // explicit summary values so far
};

// Returns true iff `key` matches [A-Za-z0-9_.-]{1,128}.
bool IsReportKey(const std::string& key);

}  // namespace headlab
