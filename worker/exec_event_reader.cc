// Strict validation of exec events: a malformed line is reported, never half-used.
#include "worker/exec_event_reader.h"

#include <chrono>

namespace headlab {
namespace {

Status Expect(bool ok, const std::string& what) {
  return ok ? Status::Ok() : Status::InvalidArgument("event: " + what);
}

bool IsInteger(const Json& j) { return j.is_number_integer() || j.is_number_unsigned(); }

}  // namespace

StatusOr<ExecEvent> ParseExecEvent(const std::string& line) {
  Json j;
  try {
    j = Json::parse(line);
  } catch (const Json::exception&) {
    return Status::InvalidArgument("event: not a JSON line");
  }
  HEADLAB_RETURN_IF_ERROR(Expect(j.is_object(), "not a JSON object"));
  HEADLAB_RETURN_IF_ERROR(Expect(j.contains("ev") && j["ev"].is_string(), "missing \"ev\""));
  const std::string ev = j["ev"];
  ExecEvent e;
  if (ev == "metric") {
    e.type = ExecEvent::Type::kMetric;
    HEADLAB_RETURN_IF_ERROR(
        Expect(j.contains("step") && IsInteger(j["step"]) && j["step"].get<int64_t>() >= 0,
               "metric.step: expected an integer >= 0"));
    HEADLAB_RETURN_IF_ERROR(
        Expect(j.contains("key") && j["key"].is_string() && !j["key"].get<std::string>().empty(),
               "metric.key: expected a non-empty string"));
    HEADLAB_RETURN_IF_ERROR(
        Expect(j.contains("value") && j["value"].is_number(), "metric.value: expected a number"));
    e.step = j["step"];
    e.key = j["key"];
    e.value = j["value"];
    if (j.contains("t")) {
      HEADLAB_RETURN_IF_ERROR(Expect(j["t"].is_number(), "metric.t: expected a number"));
      e.time_s = j["t"];
    } else {
      // Tolerated: stamp it on arrival (pipe latency is milliseconds).
      e.time_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                     .count();
    }
  } else if (ev == "artifact") {
    e.type = ExecEvent::Type::kArtifact;
    for (const char* k : {"kind", "path", "sha256"})
      HEADLAB_RETURN_IF_ERROR(
          Expect(j.contains(k) && j[k].is_string() && !j[k].get<std::string>().empty(),
                 std::string("artifact.") + k + ": expected a non-empty string"));
    HEADLAB_RETURN_IF_ERROR(
        Expect(j.contains("bytes") && IsInteger(j["bytes"]) && j["bytes"].get<int64_t>() >= 0,
               "artifact.bytes: expected an integer >= 0"));
    HEADLAB_RETURN_IF_ERROR(
        Expect(j.contains("step") && IsInteger(j["step"]) && j["step"].get<int64_t>() >= 0,
               "artifact.step: expected an integer >= 0"));
    e.kind = j["kind"];
    e.path = j["path"];
    e.sha256 = j["sha256"];
    e.bytes = j["bytes"].get<uint64_t>();
    e.step = j["step"];
  } else if (ev == "provenance") {
    e.type = ExecEvent::Type::kProvenance;
    HEADLAB_RETURN_IF_ERROR(Expect(j.contains("fields") && j["fields"].is_object(),
                                   "provenance.fields: expected an object"));
    e.object = j["fields"];
  } else if (ev == "summary") {
    e.type = ExecEvent::Type::kSummary;
    HEADLAB_RETURN_IF_ERROR(Expect(j.contains("values") && j["values"].is_object(),
                                   "summary.values: expected an object"));
    for (auto it = j["values"].begin(); it != j["values"].end(); ++it)
      HEADLAB_RETURN_IF_ERROR(
          Expect(it.value().is_number(), "summary.values." + it.key() + ": expected a number"));
    e.object = j["values"];
  } else if (ev == "log") {
    e.type = ExecEvent::Type::kLog;
    HEADLAB_RETURN_IF_ERROR(
        Expect(j.contains("msg") && j["msg"].is_string(), "log.msg: expected a string"));
    e.key = j["msg"];
  } else {
    return Status::InvalidArgument("event: unknown ev \"" + ev + "\"");
  }
  return e;
}

}  // namespace headlab
