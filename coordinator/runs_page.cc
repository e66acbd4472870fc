// A page of an experiment's runs: one SELECT with the filter, sort, LIMIT and OFFSET, one
// count, then summaries, tags and notes of the page's runs only.
#include "coordinator/runs_page.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <set>

#include "common/config_view.h"
#include "common/run_config.h"
#include "coordinator/query_string.h"
#include "coordinator/views.h"

namespace headlab::coord {
namespace {

constexpr int kKeySampleRuns = 20;  // runs per arm whose summary keys are listed

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

StatusOr<int64_t> ParseCount(const std::string& name, const std::string& text, int64_t lo,
                             int64_t hi) {
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || v < lo || v > hi)
    return Status::InvalidArgument(name + ": expected " + std::to_string(lo) + ".." +
                                   std::to_string(hi) + ", got \"" + text + "\"");
  return int64_t(v);
}

// A TERM with an operator whose left side is a run-config key is a condition ("train.lr
// <= 1e-3" with the spaces dropped); anything else is text to look for.
bool IsConditionTerm(const std::string& term) {
  size_t at = term.find_first_of("=!<>");
  return at != std::string::npos && at > 0 && IsRunConfigKey(Trim(term.substr(0, at)));
}

std::string WithoutSpaces(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '\t') out += c;
  return out;
}

// Statement text with numbered parameters: Add(v) binds v and returns its "?N".
class Sql {
 public:
  std::string Add(Json v) {
    binds_.push_back(std::move(v));
    return "?" + std::to_string(binds_.size());
  }
  size_t next() const { return binds_.size() + 1; }
  void BindAll(Stmt& s) const {
    for (size_t i = 0; i < binds_.size(); ++i) BindJson(s, int(i + 1), binds_[i]);
  }

 private:
  std::vector<Json> binds_;
};

// What a TEXT term is looked for in: the run as the table shows it.
std::string Haystack(Sql* sql, const std::vector<std::string>& varying) {
  std::string h =
      "'#' || r.id || ' ' || r.arm || ' ' || r.status || ' ' || coalesce(r.worker_id, '') || "
      "' ' || coalesce(w.name, '') || ' ' || r.pair_key || ' ' || r.config_hash";
  for (const std::string& k : varying)
    h += " || ' ' || " + sql->Add(k) + " || '=' || coalesce(json_extract(r.config_json, " +
         sql->Add(ConfigJsonPath(k)) + "), '')";
  h += " || ' ' || coalesce((SELECT group_concat(t.tag, ' ') FROM tags t WHERE t.target = "
       "'run' AND t.target_id = r.id), '') || ' ' || coalesce((SELECT n.text FROM notes n "
       "WHERE n.target = 'run' AND n.target_id = r.id), '')";
  return "lower(" + h + ")";
}

// The ORDER BY expression of a sort key; "" if unknown. `join` gets any join it needs.
std::string SortExpr(const std::string& key, Sql* sql, std::string* join) {
  if (key == "id") return "r.id";
  if (key == "idx") return "r.idx";
  if (key == "arm") return "r.arm";
  if (key == "status") return "r.status";
  if (key == "attempts") return "r.attempts";
  if (key == "worker") return "coalesce(w.name, r.worker_id)";
  if (key == "pair") return "r.pair_key";
  if (key == "device") return "a.devices_json";
  if (key == "tags")
    return "(SELECT group_concat(t.tag, ' ') FROM tags t WHERE t.target = 'run' AND "
           "t.target_id = r.id)";
  if (key.rfind("param:", 0) == 0 && IsRunConfigKey(key.substr(6)))
    return "json_extract(r.config_json, " + sql->Add(ConfigJsonPath(key.substr(6))) + ")";
  if (key.rfind("summary:", 0) == 0 && key.size() > 8) {
    *join = " LEFT JOIN summaries sk ON sk.run_id = r.id AND sk.key = " + sql->Add(key.substr(8));
    return "sk.value";
  }
  return "";
}

std::string IdList(const std::map<int64_t, size_t>& pos) {
  std::string ids;
  for (const auto& [id, i] : pos) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  return ids;
}

}  // namespace

bool WantsRunsPage(const std::string& query) {
  return !QueryParam(query, "limit").empty() || !QueryParam(query, "offset").empty();
}

StatusOr<RunsPageRequest> ParseRunsPage(const std::string& query) {
  RunsPageRequest r;
  if (std::string v = QueryParam(query, "limit"); !v.empty()) {
    auto n = ParseCount("limit", v, 1, kMaxRunsPage);
    if (!n.ok()) return n.status();
    r.limit = *n;
  }
  if (std::string v = QueryParam(query, "offset"); !v.empty()) {
    auto n = ParseCount("offset", v, 0, int64_t(1) << 40);
    if (!n.ok()) return n.status();
    r.offset = *n;
  }
  if (std::string v = QueryParam(query, "sort"); !v.empty()) r.sort = v;
  Sql probe;
  std::string join;
  if (SortExpr(r.sort, &probe, &join).empty())
    return Status::InvalidArgument(
        "sort: expected id, idx, arm, status, attempts, worker, pair, device, tags, "
        "param:CONFIG_KEY or summary:METRIC_KEY, got \"" +
        r.sort + "\"");
  const std::string desc = QueryParam(query, "desc");
  if (!desc.empty() && desc != "0" && desc != "1")
    return Status::InvalidArgument("desc: expected 0 or 1, got \"" + desc + "\"");
  r.desc = desc == "1";
  const std::string keys = QueryParam(query, "keys");
  if (!keys.empty() && keys != "0" && keys != "1")
    return Status::InvalidArgument("keys: expected 0 or 1, got \"" + keys + "\"");
  r.keys = keys == "1";
  auto statuses = ParseStatusList(QueryParam(query, "status"));
  if (!statuses.ok()) return statuses.status();
  r.statuses = *statuses;
  for (const std::string& term : SplitParamList(QueryParam(query, "q"), ';')) {
    if (IsConditionTerm(term)) {
      auto c = ParseCondition(WithoutSpaces(term));
      if (!c.ok()) return Status::InvalidArgument("q: " + c.status().message());
      r.where.push_back(*c);
    } else {
      std::string lower = term;
      for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      r.text.push_back(lower);
    }
  }
  return r;
}

StatusOr<Json> RunsPageView(Db* db, int64_t experiment, const RunsPageRequest& req) {
  Stmt e = db->MustPrepare("SELECT grid_json FROM experiments WHERE id=?");
  e.Bind(1, experiment);
  if (!e.Step()) return Status::NotFound("experiment " + std::to_string(experiment) + " not found");
  auto grid = ParseJson(e.Text(0), "grid_json");
  const std::vector<std::string> varying =
      grid.ok() ? GridVaryingKeys(*grid) : std::vector<std::string>{};

  // The filter (shared by the count and the page).
  Sql sql;
  std::string where = "r.experiment_id = " + sql.Add(experiment);
  if (!req.statuses.empty()) {
    where += " AND r.status IN (";
    for (size_t i = 0; i < req.statuses.size(); ++i)
      where += (i ? "," : "") + sql.Add(req.statuses[i]);
    where += ")";
  }
  for (const ConfigCondition& c : req.where)
    where += " AND json_extract(r.config_json, " + sql.Add(ConfigJsonPath(c.key)) + ") " + c.op +
             " " + sql.Add(c.value);
  for (const std::string& t : req.text)
    where += " AND instr(" + Haystack(&sql, varying) + ", " + sql.Add(t) + ") > 0";
  const bool filtered = !req.statuses.empty() || !req.where.empty() || !req.text.empty();
  const std::string from =
      " FROM runs r LEFT JOIN workers w ON w.id = r.worker_id LEFT JOIN attempts a ON "
      "a.run_id = r.id AND a.attempt = r.attempts";

  int64_t total = 0, matched = 0;
  {
    Stmt t = db->MustPrepare("SELECT count(*) FROM runs WHERE experiment_id = ?");
    t.Bind(1, experiment);
    if (t.Step()) total = t.Int(0);
  }
  if (filtered) {
    auto c = db->Prepare("SELECT count(*)" + from + " WHERE " + where);
    if (!c.ok()) return c.status();
    sql.BindAll(*c);
    if (c->Step()) matched = c->Int(0);
  } else {
    matched = total;
  }

  // The page in two steps: the ids in order (only what the filter and the sort key need,
  // so 10^5 rows are sorted without reading their configs), then those rows in full.
  // Ties (and missing values, which go last either way) keep grid order.
  std::string join;
  const std::string key = SortExpr(req.sort, &sql, &join);
  const std::string dir = req.desc ? " DESC" : "";
  const bool never_null = req.sort == "id" || req.sort == "idx" || req.sort == "arm" ||
                          req.sort == "status" || req.sort == "attempts";
  std::string order = (never_null ? "" : "(" + key + ") IS NULL, ") + key + dir;
  if (req.sort != "idx" && req.sort != "id") order += ", r.idx" + dir;
  auto ids_stmt =
      db->Prepare("SELECT r.id" + from + join + " WHERE " + where + " ORDER BY " + order +
                  " LIMIT " + sql.Add(req.limit) + " OFFSET " + sql.Add(req.offset));
  if (!ids_stmt.ok()) return ids_stmt.status();
  sql.BindAll(*ids_stmt);
  std::vector<int64_t> order_ids;
  while (ids_stmt->Step()) order_ids.push_back(ids_stmt->Int(0));

  Json runs = Json::array();
  std::map<int64_t, size_t> pos;
  if (!order_ids.empty()) {
    for (size_t i = 0; i < order_ids.size(); ++i) pos[order_ids[i]] = i;
    const std::string ids = IdList(pos);
    Sql rows_sql;
    for (const std::string& k : varying) rows_sql.Add(ConfigJsonPath(k));
    Stmt page = db->MustPrepare(
        "SELECT r.id, r.idx, r.arm, r.status, r.attempts, r.max_attempts, r.config_hash, "
        "r.pair_key, r.seed, r.worker_id AS worker, w.name AS worker_name, r.reused_from, "
        "r.error, r.updated_at, a.devices_json AS devices, " +
        VaryingValuesSql(varying.size(), 1) + " AS params" + from + " WHERE r.id IN (" + ids + ")");
    rows_sql.BindAll(page);
    runs = Json::array();
    for (size_t i = 0; i < order_ids.size(); ++i) runs.push_back(nullptr);
    for (Json& r : RowsJson(page)) {
      const size_t at = pos[r["id"].get<int64_t>()];  // before the move (C++17: the right
      runs[at] = std::move(r);                        // side of = is evaluated first)
    }
    for (Json& r : runs) {
      r["params"] = VaryingParams(r["params"], varying);
      auto devices = r["devices"].is_string()
                         ? ParseJson(r["devices"].get<std::string>(), "devices")
                         : StatusOr<Json>(Json::array());
      r["devices"] = devices.ok() ? *devices : Json::array();
      r["summary"] = Json::object();
      r["tags"] = Json::array();
    }
    Stmt m =
        db->MustPrepare("SELECT run_id, key, value FROM summaries WHERE run_id IN (" + ids + ")");
    while (m.Step()) runs[pos[m.Int(0)]]["summary"][m.Text(1)] = ColumnJson(m, 2);
    Stmt t =
        db->MustPrepare("SELECT target_id, tag FROM tags WHERE target = 'run' AND target_id IN (" +
                        ids + ") ORDER BY tag");
    while (t.Step()) runs[pos[t.Int(0)]]["tags"].push_back(t.Text(1));
    Stmt n = db->MustPrepare(
        "SELECT target_id, text FROM notes WHERE target = 'run' AND target_id IN (" + ids + ")");
    while (n.Step()) runs[pos[n.Int(0)]]["note"] = n.Text(1);
  }
  Json out = {{"runs", runs},         {"total", total},     {"matched", matched},
              {"offset", req.offset}, {"limit", req.limit}, {"varying", varying}};
  if (req.keys) {
    // The keys of any kKeySampleRuns succeeded runs of each arm (every run of an arm
    // reports the same keys): an index range each, where reading 10^5 runs' summaries
    // took 0.35 s.
    Stmt a = db->MustPrepare("SELECT arms_json FROM experiments WHERE id = ?");
    a.Bind(1, experiment);
    auto arms = a.Step() ? ParseJson(a.Text(0), "arms_json") : StatusOr<Json>(Json::array());
    std::set<std::string> keys;
    Stmt k = db->MustPrepare(
        "SELECT DISTINCT s.key FROM summaries s WHERE s.run_id IN (SELECT id FROM runs WHERE "
        "experiment_id = ?1 AND status = 'succeeded' AND arm = ?2 LIMIT " +
        std::to_string(kKeySampleRuns) + ")");
    for (const Json& arm : arms.ok() && arms->is_array() ? *arms : Json::array()) {
      if (!arm.is_string()) continue;
      k.Reset();
      k.Bind(1, experiment).Bind(2, arm.get<std::string>());
      while (k.Step()) keys.insert(k.Text(0));
    }
    out["summary_keys"] = Json(std::vector<std::string>(keys.begin(), keys.end()));
  }
  return out;
}

}  // namespace headlab::coord
