// Event lines on a FILE*.
#include "worker/exec/events.h"

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
  // JSON has no NaN/Inf; a diverged loss is still reported (as null) rather than dropped.
  Json v = std::isfinite(value) ? Json(value) : Json(nullptr);
  Emit({{"ev", "metric"}, {"step", step}, {"key", key}, {"value", v}, {"t", UnixSeconds()}});
}

void EventSink::Artifact(const std::string& kind, const std::string& path,
                         const std::string& sha256, uint64_t bytes, int64_t step) {
  Emit({{"ev", "artifact"}, {"kind", kind}, {"path", path}, {"sha256", sha256},
        {"bytes", bytes}, {"step", step}});
}

void EventSink::Provenance(const Json& fields) { Emit({{"ev", "provenance"}, {"fields", fields}}); }

void EventSink::Summary(const Json& values) { Emit({{"ev", "summary"}, {"values", values}}); }

void EventSink::LogLine(const std::string& msg) { Emit({{"ev", "log"}, {"msg", msg}}); }

}  // namespace headlab
