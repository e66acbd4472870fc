// MetricFeed: live metric points for server-sent events (the dashboard's live curves).
// The Store publishes each batch's metric points after its transaction commits, so a
// subscriber sees a point exactly when it is durable; subscribers (HTTP SSE sessions)
// choose the runs they follow. Publishing costs nothing while nobody subscribes.
// Thread-safe: the loop thread publishes, HTTP threads subscribe and unsubscribe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace headlab::coord {

// One stored metric point of one attempt, as GET /runs/ID/metrics returns it.
struct LivePoint {
  int64_t run = 0;
  int attempt = 0;
  int64_t seq = 0;
  int64_t step = 0;
  std::string key;
  Json value;  // number or null
  double time_s = 0;
};

class MetricFeed {
 public:
  // Called on the publishing thread with the points of the followed runs, in commit
  // order; must be quick (format and hand over to the subscriber's own thread).
  using Callback = std::function<void(const std::vector<LivePoint>&)>;

  // Follows `runs` (at least one); returns the id for Unsubscribe.
  int64_t Subscribe(std::set<int64_t> runs, Callback callback);
  void Unsubscribe(int64_t id);

  // True iff someone subscribes (the Store skips collecting points otherwise).
  bool active() const { return subscribers_count_.load(std::memory_order_relaxed) > 0; }
  // Delivers `points` to every subscriber that follows their runs.
  void Publish(const std::vector<LivePoint>& points);

 private:
  struct Subscriber {
    std::set<int64_t> runs;
    Callback callback;
  };
  std::mutex mu_;
  std::map<int64_t, Subscriber> subscribers_;
  int64_t next_id_ = 1;
  std::atomic<int> subscribers_count_{0};
};

// Most runs one stream may follow (the dashboard overlays a few dozen).
inline constexpr size_t kMaxStreamRuns = 1000;

// Parses the query of GET /api/v1/stream: "runs=1,2,3" (required). InvalidArgument names
// the parameter.
StatusOr<std::set<int64_t>> ParseStreamRuns(const std::string& query);

// Returns one server-sent-events frame: "event: <event>\ndata: <json>\n\n".
std::string SseFrame(const std::string& event, const Json& data);

// Returns the "points" frame of `points`: {"points": [[run, attempt, seq, step, key, value,
// time_s], ...]} (the row layout of GET /runs/ID/metrics with the run in front).
std::string PointsFrame(const std::vector<LivePoint>& points);

}  // namespace headlab::coord
