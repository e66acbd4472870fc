// The scheduler's view of the runs table: experiment and demand of each run id. Reads
// only the `resources` object and `priority` of the stored config (SQLite's json_extract),
// not the whole config, so looking up a large queue costs one indexed row read per run.
#include "coordinator/scheduler_lookup.h"

#include "common/log.h"

namespace headlab::coord {

DemandLookup DbDemandLookup(Db* db) {
  return [db](const std::vector<int64_t>& ids) {
    std::map<int64_t, RunDemand> out;
    auto stmt = db->Prepare(
        "SELECT experiment_id, json_extract(config_json, '$.resources'), "
        "json_extract(config_json, '$.priority') FROM runs WHERE id = ?1");
    if (!stmt.ok()) {
      LogError("scheduler: " + stmt.status().message());
      return out;
    }
    for (int64_t id : ids) {
      stmt->Reset();
      stmt->Bind(1, id);
      Status st;
      if (!stmt->Step(&st)) {
        if (st.ok())
          out[id] = RunDemand{};  // no such row
        else
          LogError("scheduler: run " + std::to_string(id) + ": " + st.message());
        continue;
      }
      Json config = Json::object();
      if (!stmt->IsNull(1)) {
        auto res = ParseJson(stmt->Text(1), "runs.config_json $.resources");
        if (res.ok()) config["resources"] = *res;
      }
      if (!stmt->IsNull(2)) config["priority"] = stmt->Real(2);
      out[id] = RunDemand{stmt->Int(0), DemandFromConfig(config)};
    }
    return out;
  };
}

std::optional<std::vector<int>> AttemptDevices(Db* db, const AttemptRef& ref) {
  auto stmt = db->Prepare("SELECT devices_json FROM attempts WHERE run_id = ?1 AND attempt = ?2");
  if (!stmt.ok()) return std::nullopt;
  stmt->Bind(1, ref.run).Bind(2, ref.attempt);
  if (!stmt->Step()) return std::nullopt;
  std::vector<int> out;
  auto devices = ParseJson(stmt->Text(0), "attempts.devices_json");
  if (devices.ok() && devices->is_array())
    for (const Json& d : *devices)
      if (d.is_number_integer()) out.push_back(d.get<int>());
  return out;
}

}  // namespace headlab::coord
