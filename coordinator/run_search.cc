// Run search: the filter grammar and one SELECT built from bound conditions.
#include "coordinator/run_search.h"

#include <cmath>
#include <map>

#include "common/run_config.h"
#include "common/suggest.h"
#include "coordinator/annotations.h"
#include "coordinator/query_string.h"
#include "coordinator/views.h"

namespace headlab::coord {
namespace {

const char* const kStatuses[] = {"queued", "running", "succeeded", "failed", "lost", "cancelled"};

Json ParseValue(const std::string& text) {
  auto j = ParseJson(text, "where");
  if (j.ok() && (j->is_number() || j->is_boolean() || j->is_string())) return *j;
  return Json(text);
}

}  // namespace

StatusOr<std::vector<std::string>> ParseStatusList(const std::string& list) {
  std::vector<std::string> out;
  for (const std::string& st : SplitParamList(list, ',')) {
    bool known = false;
    for (const char* k : kStatuses) known = known || st == k;
    if (!known)
      return Status::InvalidArgument(
          "status: expected queued, running, succeeded, failed, lost or "
          "cancelled, got \"" +
          st + "\"");
    out.push_back(st);
  }
  return out;
}

StatusOr<ConfigCondition> ParseCondition(const std::string& raw) {
  // Spaces around the key, the operator and the value are for the reader
  // ("train.lr <= 1e-3"); a string value keeps its inner spaces.
  const std::string text = TrimParam(raw);
  size_t at = text.find_first_of("=!<>");
  if (at == std::string::npos || at == 0)
    return Status::InvalidArgument("where \"" + text +
                                   "\": expected KEY OP VALUE with OP one of = != < <= > >=");
  ConfigCondition c;
  c.key = TrimParam(text.substr(0, at));
  size_t len = (at + 1 < text.size() && text[at + 1] == '=') ? 2 : 1;
  c.op = text.substr(at, len);
  if (c.op == "!" || c.op == "==") c.op = c.op == "==" ? "=" : "";
  if (c.op.empty() ||
      (c.op != "=" && c.op != "!=" && c.op != "<" && c.op != "<=" && c.op != ">" && c.op != ">="))
    return Status::InvalidArgument("where \"" + text +
                                   "\": expected KEY OP VALUE with OP one of = != < <= > >=");
  if (!IsRunConfigKey(c.key))
    return Status::InvalidArgument("where \"" + text + "\": unknown config key \"" + c.key + "\"" +
                                   DidYouMean(c.key, RunConfigKeys()));
  c.value = ParseValue(TrimParam(text.substr(at + len)));
  return c;
}

StatusOr<RunFilter> ParseRunFilter(const std::string& query) {
  RunFilter f;
  std::string exp = QueryParam(query, "experiment");
  if (!exp.empty()) {
    char* end = nullptr;
    long long v = std::strtoll(exp.c_str(), &end, 10);
    if (*end || v <= 0)
      return Status::InvalidArgument("experiment: expected an id, got \"" + exp + "\"");
    f.experiment = v;
  }
  auto statuses = ParseStatusList(QueryParam(query, "status"));
  if (!statuses.ok()) return statuses.status();
  f.statuses = *statuses;
  for (const std::string& t : SplitParamList(QueryParam(query, "tag"), ',')) {
    if (!IsTag(t))
      return Status::InvalidArgument("tag: expected [A-Za-z0-9_.:+-]{1,64}, got \"" + t + "\"");
    f.tags.push_back(t);
  }
  for (const std::string& w : SplitParamList(QueryParam(query, "where"), ';')) {
    auto c = ParseCondition(w);
    if (!c.ok()) return c.status();
    f.where.push_back(*c);
  }
  std::string limit = QueryParam(query, "limit");
  if (!limit.empty()) {
    char* end = nullptr;
    long long v = std::strtoll(limit.c_str(), &end, 10);
    if (*end || v <= 0 || v > kMaxSearchLimit)
      return Status::InvalidArgument("limit: expected 1.." + std::to_string(kMaxSearchLimit) +
                                     ", got \"" + limit + "\"");
    f.limit = v;
  }
  return f;
}

StatusOr<Json> SearchRunsView(Db* db, const RunFilter& f) {
  std::string sql =
      "SELECT r.id, r.experiment_id, e.name AS experiment_name, r.idx, r.arm, r.status, "
      "r.attempts, r.config_hash, r.pair_key, r.seed, r.worker_id AS worker, w.name AS "
      "worker_name, r.error, r.updated_at FROM runs r JOIN experiments e ON e.id = "
      "r.experiment_id LEFT JOIN workers w ON w.id = r.worker_id WHERE 1";
  std::vector<Json> binds;
  if (f.experiment) {
    sql += " AND r.experiment_id = ?";
    binds.push_back(f.experiment);
  }
  if (!f.statuses.empty()) {
    sql += " AND r.status IN (";
    for (size_t i = 0; i < f.statuses.size(); ++i) {
      sql += i ? ",?" : "?";
      binds.push_back(f.statuses[i]);
    }
    sql += ")";
  }
  for (const std::string& t : f.tags) {
    sql +=
        " AND EXISTS (SELECT 1 FROM tags t WHERE t.tag = ? AND ((t.target = 'run' AND "
        "t.target_id = r.id) OR (t.target = 'experiment' AND t.target_id = r.experiment_id)))";
    binds.push_back(t);
  }
  for (const ConfigCondition& c : f.where) {
    sql += " AND json_extract(r.config_json, ?) " + c.op + " ?";
    binds.push_back(ConfigJsonPath(c.key));
    binds.push_back(c.value.is_boolean() ? Json(c.value.get<bool>() ? 1 : 0) : c.value);
  }
  sql += " ORDER BY r.id LIMIT ?";
  binds.push_back(f.limit + 1);
  auto stmt = db->Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  Stmt& s = *stmt;
  for (size_t i = 0; i < binds.size(); ++i) BindJson(s, int(i + 1), binds[i]);
  Json runs = Json::array();
  std::map<int64_t, size_t> pos;
  bool truncated = false;
  int n = s.Columns();
  while (s.Step()) {
    if (int64_t(runs.size()) == f.limit) {
      truncated = true;
      break;
    }
    Json row = Json::object();
    for (int i = 0; i < n; ++i) {
      switch (sqlite3_column_type(s.raw(), i)) {
        case SQLITE_NULL:
          row[sqlite3_column_name(s.raw(), i)] = nullptr;
          break;
        case SQLITE_INTEGER:
          row[sqlite3_column_name(s.raw(), i)] = s.Int(i);
          break;
        case SQLITE_FLOAT:
          row[sqlite3_column_name(s.raw(), i)] = s.Real(i);
          break;
        default:
          row[sqlite3_column_name(s.raw(), i)] = s.Text(i);
      }
    }
    row["summary"] = Json::object();
    row["tags"] = Json::array();
    pos[row["id"].get<int64_t>()] = runs.size();
    runs.push_back(std::move(row));
  }
  if (!runs.empty()) {
    std::string ids;
    for (const auto& [id, i] : pos) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    Stmt m =
        db->MustPrepare("SELECT run_id, key, value FROM summaries WHERE run_id IN (" + ids + ")");
    while (m.Step())
      if (!m.IsNull(2) && std::isfinite(m.Real(2)))
        runs[pos[m.Int(0)]]["summary"][m.Text(1)] = m.Real(2);
    Stmt t =
        db->MustPrepare("SELECT target_id, tag FROM tags WHERE target = 'run' AND target_id IN (" +
                        ids + ") ORDER BY tag");
    while (t.Step()) runs[pos[t.Int(0)]]["tags"].push_back(t.Text(1));
  }
  return Json{{"runs", runs}, {"truncated", truncated}};
}

}  // namespace headlab::coord
