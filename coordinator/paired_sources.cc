// Reads devices, logprobs artifacts, FLOPs reasons and execution (precision, attention
// paths) of runs for results. Each runs once per run of a result (up to 4 times per run), so
// the statements are the connection's cached ones (Db::Cached).
#include "coordinator/paired_sources.h"

#include <cstring>

#include "common/files.h"
#include "common/metric_names.h"
#include "common/sha256.h"

namespace headlab::coord {
namespace {

// Returns the provenance fields of run `run`'s latest attempt, or {}.
Json LatestProvenance(Db* db, int64_t run) {
  Stmt s =
      db->Cached("SELECT fields_json FROM provenance WHERE run_id=? ORDER BY attempt DESC LIMIT 1");
  s.Bind(1, run);
  if (!s.Step()) return Json::object();
  auto j = ParseJson(s.Text(0), "provenance.fields_json");
  return j.ok() && j->is_object() ? *j : Json::object();
}

}  // namespace

RunPlacement LoadRunPlacement(Db* db, int64_t run) {
  RunPlacement p;
  Json prov = LatestProvenance(db, run);
  if (prov.contains("device") && prov["device"].is_string())
    p.device = prov["device"].get<std::string>();
  Stmt a =
      db->Cached("SELECT devices_json FROM attempts WHERE run_id=? ORDER BY attempt DESC LIMIT 1");
  a.Bind(1, run);
  if (a.Step()) {
    auto d = ParseJson(a.Text(0), "attempts.devices_json");
    if (d.ok() && d->is_array()) p.device_count = int(d->size());
  }
  return p;
}

StatusOr<std::vector<float>> LoadLogProbs(Db* db, int64_t run) {
  Stmt s = db->Cached(
      "SELECT path, sha256 FROM artifacts WHERE run_id=? AND kind='logprobs' "
      "ORDER BY attempt DESC, step DESC LIMIT 1");
  s.Bind(1, run);
  if (!s.Step())
    return Status::NotFound("run " + std::to_string(run) + " has no logprobs artifact");
  const std::string path = s.Text(0), sha = s.Text(1);
  StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  if (Sha256Hex(*bytes) != sha)
    return Status::Corruption(path + ": SHA-256 differs from the artifact record");
  if (bytes->size() % sizeof(float))
    return Status::Corruption(path + ": " + std::to_string(bytes->size()) +
                              " bytes is not a whole number of float32 values");
  std::vector<float> out(bytes->size() / sizeof(float));
  std::memcpy(out.data(), bytes->data(), bytes->size());
  return out;
}

std::string LoadFlopsReason(Db* db, int64_t run) {
  Json prov = LatestProvenance(db, run);
  auto it = prov.find(metric::kFlopsReason);
  return it != prov.end() && it->is_string() ? it->get<std::string>() : "";
}

RunExecution LoadRunExecution(Db* db, int64_t run) {
  RunExecution e;
  Json prov = LatestProvenance(db, run);
  if (prov.contains("precision") && prov["precision"].is_string()) e.precision = prov["precision"];
  if (prov.contains("attention_paths") && prov["attention_paths"].is_object())
    for (auto it = prov["attention_paths"].begin(); it != prov["attention_paths"].end(); ++it)
      e.attention_paths.push_back(it.key());
  return e;
}

}  // namespace headlab::coord
