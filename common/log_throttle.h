// Rate-limited warnings for input a peer controls (garbage frames, forged messages): a
// flood must not turn into one log line per message. Each category may log `burst` lines
// per `window`; the rest are counted, and one line says how many were suppressed when the
// category's window ends (at its next line or Flush). Not thread-safe: one owner thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace headlab {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogThrottle(std::chrono::milliseconds window = std::chrono::seconds(10), int burst = 5)
      : window_(window), burst_(burst) {}

  // Logs `msg` as a warning unless `category` has used its burst in the current window.
  // Returns true iff the line was written.
  bool Warn(const std::string& category, const std::string& msg, Clock::time_point now);
  // Writes the suppressed-count line of every category whose window has ended.
  void Flush(Clock::time_point now);
  // Returns the number of lines suppressed so far (all categories).
  uint64_t suppressed() const { return suppressed_total_; }
  // Returns the number of lines written so far (all categories, summaries excluded).
  uint64_t written() const { return written_total_; }

 private:
  struct Category {
    Clock::time_point window_end;
    int lines = 0;            // written in the current window
    uint64_t suppressed = 0;  // in the current window
  };
  // Ends `c`'s window: reports what it suppressed.
  void EndWindow(const std::string& name, Category* c);

  // Constant after construction.
  const std::chrono::milliseconds window_;
  const int burst_;

  std::map<std::string, Category> categories_;
  uint64_t suppressed_total_ = 0;
  uint64_t written_total_ = 0;
};

}  // namespace headlab
