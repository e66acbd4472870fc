// The paired-statistics thread.
#include "coordinator/paired_stats_worker.h"

#include "common/log.h"
#include "coordinator/db.h"

namespace headlab::coord {

PairedStatsWorker::PairedStatsWorker(std::string db_path, std::function<void(ComputedResults)> save)
    : db_path_(std::move(db_path)), save_(std::move(save)), thread_([this] { Loop(); }) {}

PairedStatsWorker::~PairedStatsWorker() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void PairedStatsWorker::Enqueue(int64_t experiment) {
  {
    std::lock_guard<std::mutex> l(mu_);
    pending_.insert(experiment);
  }
  cv_.notify_one();
}

void PairedStatsWorker::Loop() {
  Db db;
  for (;;) {
    int64_t exp = 0;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || !pending_.empty(); });
      if (stop_) return;
      exp = *pending_.begin();
      pending_.erase(pending_.begin());
    }
    if (!db.is_open()) {
      Status st = db.Open(db_path_, Db::Mode::kReadOnly);
      if (!st.ok()) {
        LogError("paired stats: " + st.message());
        continue;
      }
    }
    // One snapshot for the whole computation (WAL: the loop keeps writing meanwhile).
    StatusOr<ComputedResults> res = Status::Internal("not computed");
    try {
      ReadSnapshot snapshot(&db);
      if (!snapshot.status().ok())
        res = snapshot.status();
      else if (HasCurrentResults(&db, exp))
        continue;  // e.g. a cancel that changed nothing
      else
        res = ComputeResultsAt(&db, exp);
      if (res.ok()) res->text = JsonText(res->results);  // the loop only writes it
    } catch (const std::exception& e) {
      res = Status::Internal(e.what());
    }
    if (res.ok())
      save_(std::move(*res));
    else
      LogError("paired stats of experiment " + std::to_string(exp) + ": " + res.status().message());
  }
}

}  // namespace headlab::coord
