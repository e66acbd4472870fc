// Whole-region timing with CUDA events on the legacy default stream (which orders all
// blocking streams, LibTorch's default among them). Torch-free.
//
// As a RangeMarker it records an event pair per range occurrence; Elapsed() syncs and sums
// the milliseconds per range path. Without CUDA it is a no-op and Elapsed says why.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "payload/measure/range_marker.h"

namespace headlab::measure {

class RegionTimer : public RangeMarker {
 public:
  RegionTimer() = default;
  ~RegionTimer() override;  // destroys the events
  RegionTimer(const RegionTimer&) = delete;
  RegionTimer& operator=(const RegionTimer&) = delete;

  void Push(const std::string& name) override;
  void Pop() override;

  // Waits for the recorded events and returns total milliseconds per range path (all
  // occurrences summed); Unavailable without a GPU or after a CUDA error.
  StatusOr<std::map<std::string, double>> Elapsed();
  // Forgets the recorded occurrences (events are reused).
  void Clear();

 private:
  struct Occurrence {
    std::string path;
    void* begin = nullptr;  // cudaEvent_t (kept opaque: this header is CUDA-free)
    void* end = nullptr;
  };
  void* NewEvent();
  // Keeps the first failure for Elapsed to return.
  void Note(Status s);

  std::mutex mu_;
  std::vector<std::string> stack_;  // Guarded by mu_
  std::vector<size_t> open_;        // indexes into done_ of open occurrences; Guarded by mu_
  std::vector<Occurrence> done_;    // Guarded by mu_
  std::vector<void*> pool_;         // every event created; Guarded by mu_
  size_t pool_used_ = 0;            // Guarded by mu_
  Status error_;                    // first CUDA error; Guarded by mu_
};

}  // namespace headlab::measure
