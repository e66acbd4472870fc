// Buffers for a child's pipes: stdout split into event lines, the tail of stderr.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace headlab {

// Splits a byte stream into '\n'-terminated lines. A line longer than `max_line` bytes is
// discarded whole (an event line is small; an endless line must not grow memory).
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line = 1 << 20) : max_line_(max_line) {}
  // Appends bytes; calls `on_line` (without the '\n') for every completed line.
  void Append(const char* data, size_t n, const std::function<void(const std::string&)>& on_line);
  // Calls `on_line` for a final unterminated line, if any (at end of stream).
  void Finish(const std::function<void(const std::string&)>& on_line);
  // Returns how many over-long lines were discarded.
  size_t discarded() const { return discarded_; }

 private:
  const size_t max_line_;
  std::string partial_;
  bool skipping_ = false;  // inside an over-long line: drop bytes until '\n'
  size_t discarded_ = 0;
};

// Keeps the last `capacity` bytes written to it.
class TailBuffer {
 public:
  explicit TailBuffer(size_t capacity = 4096) : capacity_(capacity) {}
  void Append(const char* data, size_t n);
  // Returns the kept bytes, oldest first.
  const std::string& str() const { return buf_; }

 private:
  const size_t capacity_;
  std::string buf_;
};

}  // namespace headlab
