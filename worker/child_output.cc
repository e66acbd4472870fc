// LineSplitter and TailBuffer.
#include "worker/child_output.h"

namespace headlab {

void LineSplitter::Append(const char* data, size_t n,
                          const std::function<void(const std::string&)>& on_line) {
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    if (data[i] != '\n') continue;
    if (!skipping_) {
      partial_.append(data + start, i - start);
      if (partial_.size() <= max_line_)
        on_line(partial_);
      else
        ++discarded_;
    }
    partial_.clear();
    skipping_ = false;
    start = i + 1;
  }
  if (skipping_ || start == n) return;
  partial_.append(data + start, n - start);
  if (partial_.size() > max_line_) {
    partial_.clear();
    skipping_ = true;
    ++discarded_;
  }
}

void LineSplitter::Finish(const std::function<void(const std::string&)>& on_line) {
  if (!skipping_ && !partial_.empty()) on_line(partial_);
  partial_.clear();
  skipping_ = false;
}

void TailBuffer::Append(const char* data, size_t n) {
  if (n >= capacity_) {
    buf_.assign(data + (n - capacity_), capacity_);
    return;
  }
  buf_.append(data, n);
  if (buf_.size() > capacity_) buf_.erase(0, buf_.size() - capacity_);
}

}  // namespace headlab
