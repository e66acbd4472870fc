// SELECTs behind the HTTP GET routes.
#include "coordinator/views.h"

#include <cmath>
#include <map>

#include "common/config_view.h"
#include "coordinator/annotations.h"

namespace headlab::coord {
namespace {

const char* const kStatuses[] = {"queued", "running", "succeeded", "failed", "lost", "cancelled"};

Json ParsedOrText(const std::string& text) {
  auto j = ParseJson(text, "stored JSON");
  return j.ok() ? *j : Json(text);
}

}  // namespace

Json ColumnJson(const Stmt& s, int col) {
  switch (sqlite3_column_type(s.raw(), col)) {
    case SQLITE_NULL:
      return nullptr;
    case SQLITE_INTEGER:
      return s.Int(col);
    case SQLITE_FLOAT:
      return std::isfinite(s.Real(col)) ? Json(s.Real(col)) : Json(nullptr);
    default:
      return s.Text(col);
  }
}

Json RowsJson(Stmt& s) {
  Json out = Json::array();
  int n = s.Columns();
  while (s.Step()) {
    Json row = Json::object();
    for (int i = 0; i < n; ++i) row[sqlite3_column_name(s.raw(), i)] = ColumnJson(s, i);
    out.push_back(std::move(row));
  }
  return out;
}

void BindJson(Stmt& s, int at, const Json& v) {
  if (v.is_string())
    s.Bind(at, v.get<std::string>());
  else if (v.is_boolean())
    s.Bind(at, int64_t(v.get<bool>() ? 1 : 0));
  else if (v.is_number_integer())
    s.Bind(at, v.get<int64_t>());
  else if (v.is_number())
    s.Bind(at, v.get<double>());
  else
    s.BindNull(at);
}

std::string VaryingValuesSql(size_t n, int first_bind) {
  if (n == 0) return "NULL";
  std::string paths;
  for (size_t i = 0; i < n; ++i) paths += ", ?" + std::to_string(first_bind + int(i));
  return "json_extract(r.config_json" + paths + ")";
}

Json VaryingParams(const Json& extracted, const std::vector<std::string>& varying) {
  // One path gives the value itself, several a JSON array of the values.
  Json values = extracted.is_string() && varying.size() > 1
                    ? ParsedOrText(extracted.get<std::string>())
                    : Json::array({extracted});
  Json params = Json::object();
  for (size_t k = 0; k < varying.size() && values.is_array() && k < values.size(); ++k)
    params[varying[k]] = values[k];
  return params;
}

namespace {

Json EmptyCounts() {
  Json c = Json::object();
  for (const char* s : kStatuses) c[s] = 0;
  return c;
}

Status NotFound(const char* what, int64_t id) {
  return Status::NotFound(std::string(what) + " " + std::to_string(id) + " not found");
}

// counts and total of one experiment.
void AddCounts(Db* db, int64_t id, Json* e) {
  Json counts = EmptyCounts();
  int64_t total = 0;
  Stmt s =
      db->MustPrepare("SELECT status, count(*) FROM runs WHERE experiment_id=? GROUP BY status");
  s.Bind(1, id);
  while (s.Step()) {
    counts[s.Text(0)] = s.Int(1);
    total += s.Int(1);
  }
  (*e)["counts"] = counts;
  (*e)["total"] = total;
}

}  // namespace

std::string ConfigJsonPath(const std::string& dotted) {
  std::string out = "$";
  size_t start = 0;
  while (start <= dotted.size()) {
    size_t dot = dotted.find('.', start);
    if (dot == std::string::npos) dot = dotted.size();
    out += ".\"" + dotted.substr(start, dot - start) + "\"";
    start = dot + 1;
  }
  return out;
}

Json StatusView(Db* db) {
  Json by = EmptyCounts();
  Stmt s = db->MustPrepare("SELECT status, count(*) FROM runs GROUP BY status");
  while (s.Step()) by[s.Text(0)] = s.Int(1);
  Stmt e = db->MustPrepare("SELECT count(*) FROM experiments");
  int64_t n = e.Step() ? e.Int(0) : 0;
  return {{"experiments", n}, {"runs_by_status", by}};
}

Json WorkerRowsView(Db* db) {
  Stmt s = db->MustPrepare(
      "SELECT id, name, host, pid, version, slots, devices_json, state, first_seen_at, "
      "last_seen_at FROM workers ORDER BY id");
  Json rows = RowsJson(s);
  for (Json& r : rows) {
    r["devices"] = ParsedOrText(r["devices_json"].get<std::string>());
    r.erase("devices_json");
  }
  return rows;
}

Json ExperimentsView(Db* db) {
  Json out = Json::array();
  std::map<int64_t, size_t> pos;
  Stmt s = db->MustPrepare("SELECT id, name, description, created_at FROM experiments ORDER BY id");
  while (s.Step()) {
    pos[s.Int(0)] = out.size();
    out.push_back({{"id", s.Int(0)},
                   {"name", s.Text(1)},
                   {"description", s.Text(2)},
                   {"created_at", s.Text(3)},
                   {"counts", EmptyCounts()},
                   {"total", 0}});
  }
  Stmt c = db->MustPrepare(
      "SELECT experiment_id, status, count(*) FROM runs GROUP BY experiment_id, status");
  while (c.Step()) {
    auto it = pos.find(c.Int(0));
    if (it == pos.end()) continue;
    Json& e = out[it->second];
    e["counts"][c.Text(1)] = c.Int(2);
    e["total"] = e["total"].get<int64_t>() + c.Int(2);
  }
  for (Json& e : out) e["tags"] = Json::array();
  Stmt t =
      db->MustPrepare("SELECT target_id, tag FROM tags WHERE target = 'experiment' ORDER BY tag");
  while (t.Step()) {
    auto it = pos.find(t.Int(0));
    if (it != pos.end()) out[it->second]["tags"].push_back(t.Text(1));
  }
  return out;
}

StatusOr<Json> ExperimentView(Db* db, int64_t id) {
  Stmt s = db->MustPrepare(
      "SELECT id, name, description, file, grid_json, sets_json, arms_json, pair_by_json, "
      "comparisons_json, max_attempts, rerun, created_at FROM experiments WHERE id=?");
  s.Bind(1, id);
  if (!s.Step()) return NotFound("experiment", id);
  Json e = {{"id", s.Int(0)},
            {"name", s.Text(1)},
            {"description", s.Text(2)},
            {"file", s.Text(3)},
            {"grid", ParsedOrText(s.Text(4))},
            {"sets", ParsedOrText(s.Text(5))},
            {"arms", ParsedOrText(s.Text(6))},
            {"pair_by", ParsedOrText(s.Text(7))},
            {"comparisons", ParsedOrText(s.Text(8))},
            {"max_attempts", s.Int(9)},
            {"rerun", s.Int(10) != 0},
            {"created_at", s.Text(11)}};
  AddCounts(db, id, &e);
  e["varying"] = GridVaryingKeys(e["grid"]);
  e["tags"] = TagsOf(db, "experiment", id);
  e["note"] = NoteOf(db, "experiment", id);
  return e;
}

StatusOr<Json> ExperimentRunsView(Db* db, int64_t id) {
  Stmt e = db->MustPrepare("SELECT grid_json FROM experiments WHERE id=?");
  e.Bind(1, id);
  if (!e.Step()) return NotFound("experiment", id);
  // The keys the grid varies; one json_extract with every path parses each config once.
  std::vector<std::string> varying = GridVaryingKeys(ParsedOrText(e.Text(0)));
  Stmt s = db->MustPrepare(
      "SELECT r.id, r.idx, r.arm, r.status, r.attempts, r.max_attempts, r.config_hash, "
      "r.pair_key, r.seed, r.worker_id AS worker, w.name AS worker_name, r.reused_from, "
      "r.error, r.updated_at, " +
      VaryingValuesSql(varying.size(), 2) +
      " AS params FROM runs r LEFT JOIN workers w ON w.id = r.worker_id "
      "WHERE r.experiment_id=?1 ORDER BY r.idx");
  s.Bind(1, id);
  for (size_t i = 0; i < varying.size(); ++i) s.Bind(int(i + 2), ConfigJsonPath(varying[i]));
  Json runs = RowsJson(s);
  std::map<int64_t, size_t> pos;
  for (size_t i = 0; i < runs.size(); ++i) {
    Json& r = runs[i];
    pos[r["id"].get<int64_t>()] = i;
    r["summary"] = Json::object();
    r["tags"] = Json::array();
    r["params"] = VaryingParams(r["params"], varying);
  }
  Stmt m = db->MustPrepare(
      "SELECT s.run_id, s.key, s.value FROM summaries s JOIN runs r ON r.id = s.run_id "
      "WHERE r.experiment_id=?");
  m.Bind(1, id);
  while (m.Step()) runs[pos[m.Int(0)]]["summary"][m.Text(1)] = ColumnJson(m, 2);
  for (auto& [run, tags] : RunTagsOfExperiment(db, id)) runs[pos[run]]["tags"] = tags;
  for (auto& [run, note] : RunNotesOfExperiment(db, id)) runs[pos[run]]["note"] = note;
  return runs;
}

StatusOr<Json> RunView(Db* db, int64_t id) {
  Stmt s = db->MustPrepare(
      "SELECT r.id, r.experiment_id, e.name AS experiment_name, r.idx, r.arm, r.status, "
      "r.attempts, r.max_attempts, r.config_hash, r.pair_key, r.seed, r.worker_id AS worker, "
      "w.name AS worker_name, r.reused_from, r.error, r.created_at, r.updated_at, "
      "r.config_json FROM runs r JOIN experiments e ON e.id = r.experiment_id "
      "LEFT JOIN workers w ON w.id = r.worker_id WHERE r.id=?");
  s.Bind(1, id);
  Json rows = RowsJson(s);
  if (rows.empty()) return NotFound("run", id);
  Json run = rows[0];
  run["config"] = ParsedOrText(run["config_json"].get<std::string>());
  run.erase("config_json");
  run["config_notable"] = NotableConfig(run["config"]);
  run["tags"] = TagsOf(db, "run", id);
  run["note"] = NoteOf(db, "run", id);

  Stmt a = db->MustPrepare(
      "SELECT a.attempt, a.worker_id AS worker, w.name AS worker_name, a.devices_json, "
      "a.status, a.assigned_at, a.accepted_at, a.finished_at, a.exit_code, a.error, "
      "a.stderr_tail, a.resume_json FROM attempts a LEFT JOIN workers w ON w.id = a.worker_id "
      "WHERE a.run_id=? ORDER BY a.attempt");
  a.Bind(1, id);
  Json attempts = RowsJson(a);
  for (Json& at : attempts) {
    at["devices"] = ParsedOrText(at["devices_json"].get<std::string>());
    at["resume"] = ParsedOrText(at["resume_json"].get<std::string>());
    at.erase("devices_json");
    at.erase("resume_json");
  }
  run["attempts"] = attempts;

  Json summary = Json::object();
  Stmt m = db->MustPrepare("SELECT key, value FROM summaries WHERE run_id=? ORDER BY key");
  m.Bind(1, id);
  while (m.Step()) summary[m.Text(0)] = ColumnJson(m, 1);
  run["summary"] = summary;

  // Provenance of the latest attempt that reported any (the one behind the summary when
  // the run succeeded); every attempt's is in provenance_by_attempt.
  Json prov = nullptr, by_attempt = Json::object();
  Stmt p = db->MustPrepare(
      "SELECT attempt, fields_json FROM provenance WHERE run_id=? ORDER BY attempt");
  p.Bind(1, id);
  while (p.Step()) {
    prov = ParsedOrText(p.Text(1));
    by_attempt[std::to_string(p.Int(0))] = prov;
  }
  run["provenance"] = prov;
  run["provenance_by_attempt"] = by_attempt;

  Stmt art = db->MustPrepare(
      "SELECT attempt, seq, kind, path, sha256, bytes, step, created_at, deleted_at FROM artifacts "
      "WHERE run_id=? ORDER BY attempt, seq");
  art.Bind(1, id);
  run["artifacts"] = RowsJson(art);

  // The run's audit trail (assign, lost, done, cancel, retry, tag, ...), oldest first.
  Stmt ev = db->MustPrepare(
      "SELECT at, kind, attempt, worker_id AS worker, detail_json FROM events WHERE run_id=? "
      "ORDER BY id");
  ev.Bind(1, id);
  Json events = RowsJson(ev);
  for (Json& x : events) {
    x["detail"] = ParsedOrText(x["detail_json"].get<std::string>());
    x.erase("detail_json");
  }
  run["events"] = events;
  return run;
}

StatusOr<std::string> RunMetricsView(Db* db, int64_t id, const MetricsPage& page) {
  // A run that reuses an earlier run's result has that run's curves.
  Stmt r = db->MustPrepare("SELECT coalesce(reused_from, id) FROM runs WHERE id=?");
  r.Bind(1, id);
  if (!r.Step()) return NotFound("run", id);
  id = r.Int(0);
  Stmt s = db->MustPrepare(
      "SELECT attempt, seq, step, key, value, time_s FROM metrics WHERE run_id=?1 "
      "AND seq > ?2 AND (?3 = '' OR key = ?3) AND (?4 = 0 OR attempt = ?4) "
      "AND (attempt, seq) > (?6, ?7) ORDER BY attempt, seq LIMIT ?5");
  s.Bind(1, id)
      .Bind(2, page.after)
      .Bind(3, page.key)
      .Bind(4, page.attempt)
      .Bind(5, page.limit)
      .Bind(6, page.cursor_attempt)
      .Bind(7, page.cursor_seq);
  std::string out = "{\"points\":[";
  int64_t n = 0, last_attempt = 0, last_seq = 0;
  for (; s.Step(); ++n) {
    if (n) out += ',';
    last_attempt = s.Int(0);
    last_seq = s.Int(1);
    out += JsonText(Json{last_attempt, last_seq, s.Int(2), s.Text(3), ColumnJson(s, 4), s.Real(5)});
  }
  out += "],\"next\":";
  out += n == page.limit && n > 0
             ? "\"" + std::to_string(last_attempt) + ":" + std::to_string(last_seq) + "\""
             : std::string("null");
  return out + "}";
}

}  // namespace headlab::coord
