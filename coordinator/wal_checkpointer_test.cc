// Reads that overlap without pause cannot keep the write-ahead log growing.
#include "coordinator/wal_checkpointer.h"

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "common/testing/temp_dir.h"
#include "coordinator/db.h"

namespace headlab::coord {
namespace {

using std::chrono::milliseconds;

size_t FileBytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? size_t(st.st_size) : 0;
}

// Writes a 64 KiB row every 5 ms for `seconds` while two readers take turns holding read
// transactions of 300 ms that overlap (there is always one open), each through `gate`
// when not null; returns the largest WAL file seen.
size_t LargestWal(const std::string& path, ReadGate* gate, double seconds) {
  Db writer;
  REQUIRE(writer.Open(path, Db::Mode::kReadWrite).ok());
  REQUIRE(writer.Exec("PRAGMA wal_autocheckpoint=0").ok());
  REQUIRE(writer.Exec("CREATE TABLE IF NOT EXISTS t (x BLOB)").ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i)
    readers.emplace_back([&, i] {
      Db db;
      REQUIRE(db.Open(path, Db::Mode::kReadOnly).ok());
      std::this_thread::sleep_for(milliseconds(150 * i));
      while (!stop) {
        ReadGatePass pass(gate);
        REQUIRE(db.Exec("BEGIN").ok());
        Stmt s = db.MustPrepare("SELECT count(*) FROM t");
        s.Step();
        std::this_thread::sleep_for(milliseconds(300));
        s = Stmt();
        REQUIRE(db.Exec("COMMIT").ok());
      }
    });
  size_t largest = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    REQUIRE(writer.Exec("INSERT INTO t VALUES (randomblob(65536))").ok());
    largest = std::max(largest, FileBytes(path + "-wal"));
    std::this_thread::sleep_for(milliseconds(5));
  }
  stop = true;
  for (auto& t : readers) t.join();
  return largest;
}

}  // namespace

TEST_CASE("WalCheckpointer: overlapping reads are drained when the log grows") {
  testing::TempDir tmp("headlab-wal");
  // run GATED: one database under its own checkpointer (drains past 2 MiB of log), read
  // through its gate or around it; returns the largest WAL seen and the drains.
  auto run = [&](const std::string& name, bool gated) {
    const std::string path = tmp.path() + "/" + name + ".db";
    {
      Db db;
      REQUIRE(db.Open(path, Db::Mode::kReadWrite).ok());
    }
    WalCheckpointer checkpointer(path, /*drain_bytes=*/size_t(2) << 20);
    size_t largest = LargestWal(path, gated ? checkpointer.gate() : nullptr, 3);
    return std::make_pair(largest, checkpointer.drains());
  };
  auto [ungated, ungated_drains] = run("control", false);
  auto [gated, drains] = run("gated", true);
  INFO("largest WAL: " << ungated << " bytes around the gate (" << ungated_drains << " drains), "
                       << gated << " through it (" << drains << " drains)");
  CHECK(drains >= 1);
  // Around the gate every checkpoint stops at the oldest read and the log only grows.
  CHECK(gated < ungated / 2);
}

}  // namespace headlab::coord
