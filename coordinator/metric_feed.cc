// MetricFeed and the SSE frame format.
#include "coordinator/metric_feed.h"

#include <cstdlib>

#include "coordinator/query_string.h"

namespace headlab::coord {

int64_t MetricFeed::Subscribe(std::set<int64_t> runs, Callback callback) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t id = next_id_++;
  subscribers_[id] = Subscriber{std::move(runs), std::move(callback)};
  subscribers_count_.store(int(subscribers_.size()), std::memory_order_relaxed);
  return id;
}

void MetricFeed::Unsubscribe(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  subscribers_.erase(id);
  subscribers_count_.store(int(subscribers_.size()), std::memory_order_relaxed);
}

void MetricFeed::Publish(const std::vector<LivePoint>& points) {
  if (points.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LivePoint> mine;
  for (auto& [id, sub] : subscribers_) {
    mine.clear();
    for (const LivePoint& p : points)
      if (sub.runs.count(p.run)) mine.push_back(p);
    if (!mine.empty()) sub.callback(mine);
  }
}

StatusOr<std::set<int64_t>> ParseStreamRuns(const std::string& query) {
  std::string list = QueryParam(query, "runs");  // URLSearchParams sends "," as %2C
  if (list.empty())
    return Status::InvalidArgument("stream: parameter runs is required, e.g. ?runs=1,2,3");
  std::set<int64_t> runs;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string item =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end || v <= 0)
      return Status::InvalidArgument("stream: runs: \"" + item.substr(0, 40) +
                                     "\" is not a run id");
    runs.insert(v);
    if (runs.size() > kMaxStreamRuns)
      return Status::InvalidArgument("stream: runs: at most " + std::to_string(kMaxStreamRuns) +
                                     " runs per stream");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return runs;
}

std::string SseFrame(const std::string& event, const Json& data) {
  // dump() escapes newlines inside strings, so the data is one line as SSE requires.
  return "event: " + event + "\ndata: " + JsonText(data) + "\n\n";
}

std::string PointsFrame(const std::vector<LivePoint>& points) {
  Json rows = Json::array();
  for (const LivePoint& p : points)
    rows.push_back(Json::array({p.run, p.attempt, p.seq, p.step, p.key, p.value, p.time_s}));
  return SseFrame("points", {{"points", rows}});
}

}  // namespace headlab::coord
