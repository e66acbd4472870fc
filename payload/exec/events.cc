// Event lines on a FILE*.
#include "payload/exec/events.h"

#include <chrono>
#include <cmath>

namespace headlab {

double UnixSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

void EventSink::Emit(const Json& event) {
  std::string line = event.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

void EventSink::Metric(int64_t step, const std::string& key, double value) {
  // JSON has no NaN/Inf and the worker accepts numbers only: a diverged value is reported
  // as a log line instead of being dropped silently.
  if (!std::isfinite(value)) {
    LogLine("metric " + key + " at step " + std::to_string(step) + " is not finite (" +
            std::to_string(value) + ")");
    return;
  }
  Emit({{"ev", "metric"}, {"step", step}, {"key", key}, {"value", value}, {"t", UnixSeconds()}});
}

void EventSink::Artifact(const std::string& kind, const std::string& path,
                         const std::string& sha256, uint64_t bytes, int64_t step) {
  Emit({{"ev", "artifact"},
        {"kind", kind},
        {"path", path},
        {"sha256", sha256},
        {"bytes", bytes},
        {"step", step}});
}

void EventSink::Provenance(const Json& fields) { Emit({{"ev", "provenance"}, {"fields", fields}}); }

void EventSink::Summary(const Json& values) {
  Json finite = Json::object();
  for (auto it = values.begin(); it != values.end(); ++it)
    if (it->is_number() && std::isfinite(it->get<double>())) finite[it.key()] = *it;
  Emit({{"ev", "summary"}, {"values", finite}});
}

void EventSink::LogLine(const std::string& msg) { Emit({{"ev", "log"}, {"msg", msg}}); }

}  // namespace headlab
