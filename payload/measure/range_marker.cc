// The process-wide marker slot and the tee.
#include "payload/measure/range_marker.h"

#include <atomic>

namespace headlab::measure {
namespace {
std::atomic<RangeMarker*> g_active{nullptr};
}  // namespace

void TeeMarker::Push(const std::string& name) {
  for (RangeMarker* m : markers_) m->Push(name);
}

void TeeMarker::Pop() {
  for (auto it = markers_.rbegin(); it != markers_.rend(); ++it) (*it)->Pop();
}

RangeMarker* ActiveMarker() { return g_active.load(std::memory_order_acquire); }

void SetActiveMarker(RangeMarker* marker) { g_active.store(marker, std::memory_order_release); }

std::string RangePath(const std::vector<std::string>& stack) {
  std::string path;
  for (const std::string& s : stack) {
    if (!path.empty()) path += '/';
    path += s;
  }
  return path;
}

}  // namespace headlab::measure
