// The checkpoint thread.
#include "coordinator/wal_checkpointer.h"

#include "common/log.h"
#include "coordinator/db.h"

namespace headlab::coord {

WalCheckpointer::WalCheckpointer(std::string db_path)
    : db_path_(std::move(db_path)), thread_([this] { Loop(); }) {}

WalCheckpointer::~WalCheckpointer() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WalCheckpointer::Loop() {
  Db db;
  Status st = db.Open(db_path_, Db::Mode::kReadWrite);
  if (!st.ok()) {
    LogError("WAL checkpoints: " + st.message());
    return;
  }
  std::unique_lock<std::mutex> l(mu_);
  while (!cv_.wait_for(l, kPeriod, [this] { return stop_; })) {
    l.unlock();
    int log_frames = 0, copied = 0;
    int rc = sqlite3_wal_checkpoint_v2(db.raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
                                       &copied);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
      LogWarn(std::string("WAL checkpoint: ") + sqlite3_errmsg(db.raw()));
    l.lock();
  }
}

}  // namespace headlab::coord
