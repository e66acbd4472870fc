// Store's writes of workers: registration (READY), state changes, and the repair of ids
// stored by older versions.
#include "coordinator/store.h"

#include "common/log.h"

namespace headlab::coord {

Status Store::UpsertWorker(const std::string& id, const Json& ready) {
  std::string now = NowIso();
  Stmt s = db_.MustPrepare(
      "INSERT INTO workers(id, name, host, pid, version, slots, devices_json, state, "
      "first_seen_at, last_seen_at) VALUES (?,?,?,?,?,?,?,'alive',?,?) "
      "ON CONFLICT(id) DO UPDATE SET name=excluded.name, host=excluded.host, "
      "pid=excluded.pid, version=excluded.version, slots=excluded.slots, "
      "devices_json=excluded.devices_json, state='alive', last_seen_at=excluded.last_seen_at");
  s.Bind(1, id)
      .Bind(2, ready.value("name", ""))
      .Bind(3, ready.value("host", ""))
      .Bind(4, ready.value("pid", int64_t(0)))
      .Bind(5, ready.value("version", ""))
      .Bind(6, ready.value("slots", 0))
      .Bind(7, CanonicalJson(ready.value("devices", Json::array())))
      .Bind(8, now)
      .Bind(9, now);
  HEADLAB_RETURN_IF_ERROR(s.Exec());
  return AddEvent("worker_ready", 0, 0, 0, id, {{"slots", ready.value("slots", 0)}});
}

Status Store::SetWorkerState(const std::string& id, const std::string& state) {
  Stmt s = db_.MustPrepare("UPDATE workers SET state=?, last_seen_at=? WHERE id=?");
  s.Bind(1, state).Bind(2, NowIso()).Bind(3, id);
  HEADLAB_RETURN_IF_ERROR(s.Exec());
  return AddEvent("worker_" + state, 0, 0, 0, id, Json::object());
}

Status Store::RepairWorkerIds() {
  std::vector<std::string> bad;
  {
    Stmt s = db_.MustPrepare("SELECT id FROM workers");
    while (s.Step()) {
      std::string id = s.Text(0);
      bool printable = !id.empty();
      for (unsigned char c : id) printable = printable && c > ' ' && c <= '~';
      if (!printable) bad.push_back(id);
    }
  }
  if (bad.empty()) return Status::Ok();
  static const char kHex[] = "0123456789abcdef";
  Transaction txn(&db_);
  HEADLAB_RETURN_IF_ERROR(txn.begin_status());
  for (const std::string& id : bad) {
    std::string fixed = "0x";
    for (unsigned char c : id) {
      fixed += kHex[c >> 4];
      fixed += kHex[c & 15];
    }
    for (const char* sql : {"UPDATE OR REPLACE workers SET id=?1 WHERE id=?2",
                            "UPDATE attempts SET worker_id=?1 WHERE worker_id=?2",
                            "UPDATE runs SET worker_id=?1 WHERE worker_id=?2",
                            "UPDATE events SET worker_id=?1 WHERE worker_id=?2"}) {
      Stmt u = db_.MustPrepare(sql);
      sqlite3_bind_text(u.raw(), 1, fixed.data(), int(fixed.size()), SQLITE_TRANSIENT);
      sqlite3_bind_blob(u.raw(), 2, id.data(), int(id.size()), SQLITE_TRANSIENT);
      HEADLAB_RETURN_IF_ERROR(u.Exec());
      // Stored as TEXT by older versions: match that too.
      Stmt t = db_.MustPrepare(sql);
      t.Bind(1, fixed).Bind(2, id);
      HEADLAB_RETURN_IF_ERROR(t.Exec());
    }
    LogWarn("worker id " + fixed +
            " was not printable (a ZeroMQ-generated identity); stored as hex");
  }
  return txn.Commit();
}

}  // namespace headlab::coord
