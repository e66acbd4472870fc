// Named measurement ranges ("step", "forward", "attention", ...): the interface the code
// being measured calls, and the process-wide slot that says who listens. Torch-free.
//
// A RangeMarker turns Push/Pop into whatever its measurement needs (a CUPTI range profiler
// range, host timestamps for the Activity API join, CUDA events). With no marker installed,
// ScopedRange does nothing, so production code can mark ranges at no cost.
#pragma once

#include <string>
#include <vector>

namespace headlab::measure {

class RangeMarker {
 public:
  virtual ~RangeMarker() = default;
  // Opens a range named `name` nested in the innermost open range. Ranges close in LIFO
  // order; Push and Pop may be called from different threads (autograd's backward runs on
  // its own thread) as long as the calls are ordered.
  virtual void Push(const std::string& name) = 0;
  // Closes the innermost open range.
  virtual void Pop() = 0;
};

// Forwards every call to each marker in turn (Pop in reverse order).
class TeeMarker : public RangeMarker {
 public:
  explicit TeeMarker(std::vector<RangeMarker*> markers) : markers_(std::move(markers)) {}
  void Push(const std::string& name) override;
  void Pop() override;

 private:
  std::vector<RangeMarker*> markers_;  // Constant after construction; not owned.
};

// Returns the installed marker, or nullptr (the usual case: nothing is being measured).
RangeMarker* ActiveMarker();
// Installs `marker` (nullptr uninstalls); the caller keeps it alive while installed.
void SetActiveMarker(RangeMarker* marker);

// Pushes `name` on the active marker for the scope's lifetime (no-op without one).
class ScopedRange {
 public:
  explicit ScopedRange(const std::string& name) : marker_(ActiveMarker()) {
    if (marker_) marker_->Push(name);
  }
  ~ScopedRange() {
    if (marker_) marker_->Pop();
  }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;

 private:
  RangeMarker* marker_;
};

// Joins a range stack into a path: {"step","forward"} -> "step/forward".
std::string RangePath(const std::vector<std::string>& stack);

}  // namespace headlab::measure
