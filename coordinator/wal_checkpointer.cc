// The checkpoint thread.
#include "coordinator/wal_checkpointer.h"

#include "common/log.h"
#include "coordinator/db.h"

namespace headlab::coord {

WalCheckpointer::WalCheckpointer(std::string db_path, size_t drain_bytes)
    : db_path_(std::move(db_path)), drain_bytes_(drain_bytes), thread_([this] { Loop(); }) {}

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
  const int64_t page = [&] {
    Stmt s = db.MustPrepare("PRAGMA page_size");
    return s.Step() ? s.Int(0) : 4096;
  }();
  std::unique_lock<std::mutex> l(mu_);
  while (!cv_.wait_for(l, kPeriod, [this] { return stop_; })) {
    l.unlock();
    int log_frames = 0, copied = 0;
    int rc = sqlite3_wal_checkpoint_v2(db.raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
                                       &copied);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
      LogWarn(std::string("WAL checkpoint: ") + sqlite3_errmsg(db.raw()));
    if (copied < log_frames && size_t(log_frames) * size_t(page) > drain_bytes_) {
      // Long reads hold frames back: let those inside finish (new ones wait at the gate).
      ++drains_;
      gate_.Drain(kDrainTimeout);
      // With the long reads out, RESTART copies the rest and makes the next write start
      // the log over. It holds writers back while it waits for other readers (short
      // ones), so it waits at most kRestartWait.
      sqlite3_busy_timeout(db.raw(), int(kRestartWait.count()));
      rc = sqlite3_wal_checkpoint_v2(db.raw(), nullptr, SQLITE_CHECKPOINT_RESTART, &log_frames,
                                     &copied);
      sqlite3_busy_timeout(db.raw(), 5000);
      if (rc != SQLITE_OK && rc != SQLITE_BUSY)
        LogWarn(std::string("WAL checkpoint (restart): ") + sqlite3_errmsg(db.raw()));
      gate_.Open();
    }
    l.lock();
  }
}

}  // namespace headlab::coord
