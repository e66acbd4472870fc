// Per-category windows of log lines.
#include "common/log_throttle.h"

#include "common/log.h"

namespace headlab {

void LogThrottle::EndWindow(const std::string& name, Category* c) {
  if (c->suppressed)
    LogWarn(name + ": " + std::to_string(c->suppressed) +
            " more like this suppressed in the last " + std::to_string(window_.count()) + " ms");
  c->lines = 0;
  c->suppressed = 0;
}

bool LogThrottle::Warn(const std::string& category, const std::string& msg, Clock::time_point now) {
  Category& c = categories_[category];
  if (now >= c.window_end) {
    EndWindow(category, &c);
    c.window_end = now + window_;
  }
  if (c.lines >= burst_) {
    ++c.suppressed;
    ++suppressed_total_;
    return false;
  }
  ++c.lines;
  ++written_total_;
  LogWarn(msg);
  return true;
}

void LogThrottle::Flush(Clock::time_point now) {
  for (auto it = categories_.begin(); it != categories_.end();) {
    if (now < it->second.window_end) {
      ++it;
      continue;
    }
    EndWindow(it->first, &it->second);
    it = categories_.erase(it);  // idle categories cost nothing
  }
}

}  // namespace headlab
