// The experiment page's panels as bounded, parameterised reads.
#include "coordinator/experiment_panels.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "coordinator/query_string.h"
#include "coordinator/views.h"

namespace headlab::coord {
namespace {

// The statuses in the order an overlay takes its runs: those that move first.
constexpr const char* kOverlayOrder[] = {"running", "succeeded", "failed",
                                         "lost",    "cancelled", "queued"};

// Keys as the panels take them, at most 128 bytes; bound as parameters either way, so
// these only turn a typo into a clear 400. A config key is dotted names of [A-Za-z0-9_-]
// (what grid keys are made of, and what a JSON path can quote); a metric key any
// printable ASCII but spaces (free-form commands name their own).
bool IsConfigKeyText(const std::string& k) {
  if (k.empty() || k.size() > 128 || k.front() == '.' || k.back() == '.') return false;
  for (size_t i = 0; i < k.size(); ++i) {
    const char c = k[i];
    if (c == '.' && k[i + 1] == '.') return false;
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
      return false;
  }
  return true;
}

bool IsMetricKeyText(const std::string& k) {
  if (k.empty() || k.size() > 128) return false;
  for (char c : k)
    if (c <= ' ' || c > '~') return false;
  return true;
}

// Reads key parameter `name` into *out.
Status KeyParam(const std::string& query, const char* name, bool metric, std::string* out) {
  *out = QueryParam(query, name);
  if (!(metric ? IsMetricKeyText(*out) : IsConfigKeyText(*out)))
    return Status::InvalidArgument(
        std::string(name) + ": expected a " +
        (metric ? "metric key like train.loss" : "config key like train.lr") + ", got \"" + *out +
        "\"");
  return Status::Ok();
}

Status SizeParam(const std::string& query, const char* name, int64_t def, int64_t max,
                 int64_t* out) {
  const std::string s = QueryParam(query, name);
  *out = def;
  if (s.empty()) return Status::Ok();
  char* end = nullptr;
  const long long v = s.size() > 9 ? -1 : std::strtoll(s.c_str(), &end, 10);
  if (v < 1 || v > max || (end && *end))
    return Status::InvalidArgument(std::string(name) + ": expected 1.." + std::to_string(max) +
                                   ", got \"" + s + "\"");
  *out = v;
  return Status::Ok();
}

// One past the experiment's largest grid position; NotFound for an unknown experiment.
StatusOr<int64_t> PositionCount(Db* db, int64_t experiment) {
  Stmt s = db->Cached(
      "SELECT (SELECT count(*) FROM experiments WHERE id = ?1), "
      "(SELECT coalesce(max(idx), -1) + 1 FROM runs WHERE experiment_id = ?1)");
  s.Bind(1, experiment);
  Status st;
  if (!s.Step(&st)) return st.ok() ? Status::Internal("no row") : st;
  if (s.Int(0) == 0) return Status::NotFound("no experiment " + std::to_string(experiment));
  return s.Int(1);
}

// The sampled positions as a JSON array text (bound to json_each). The queries read them
// first, materialised, CROSS JOIN runs (SQLite keeps that order): the planner knows nothing
// of a table-valued function's size, and with runs outside it scanned 10^5 runs against
// the whole sample (20 s at 10^5 runs, against 20 ms).
std::string PositionsJson(const std::vector<int64_t>& pos) {
  std::string out = "[";
  for (size_t i = 0; i < pos.size(); ++i) out += (i ? "," : "") + std::to_string(pos[i]);
  return out + "]";
}

// ", json_extract(r.config_json, ?F) AS g0, ..." with parameters from `first`.
std::string GroupColumns(size_t n, int first) {
  std::string out;
  for (size_t i = 0; i < n; ++i)
    out += ", json_extract(r.config_json, ?" + std::to_string(first + int(i)) + ") AS g" +
           std::to_string(i);
  return out;
}

// Steps `s` into rows of objects named by its columns, at most `max_rows` (*more set when
// there were more).
StatusOr<Json> Rows(Stmt& s, int64_t max_rows, bool* more) {
  Json rows = Json::array();
  const int n = s.Columns();
  Status st;
  *more = false;
  while (s.Step(&st)) {
    if (int64_t(rows.size()) == max_rows) {
      *more = true;
      break;
    }
    Json row = Json::object();
    for (int i = 0; i < n; ++i) row[sqlite3_column_name(s.raw(), i)] = ColumnJson(s, i);
    rows.push_back(std::move(row));
  }
  if (!st.ok()) return st;
  return rows;
}

StatusOr<Json> OverlayPanel(Db* db, int64_t experiment, const PanelRequest& req) {
  // Each status is an index range of (experiment_id, status) with its own LIMIT: ordering
  // 10^5 runs by a CASE over their status reads every one of them.
  std::string ranges;
  int order = 0;
  for (const char* st : kOverlayOrder) {
    ranges += std::string(order ? " UNION ALL " : "") + "SELECT * FROM (SELECT id, " +
              std::to_string(order) + " AS o FROM runs WHERE experiment_id = ?1 AND status = '" +
              st + "' ORDER BY id LIMIT ?2)";
    ++order;
  }
  // A run's keys from at most kMaxArmPoints of its points: a bound on a long series.
  auto s =
      db->Prepare("WITH o AS (" + ranges +
                  ") SELECT r.id AS id, r.arm AS arm, r.status AS status, r.attempts AS attempts, "
                  "r.reused_from AS reused_from, r.config_json AS config, "
                  "(SELECT json_group_array(DISTINCT key) FROM (SELECT key FROM metrics "
                  "WHERE run_id = coalesce(r.reused_from, r.id) LIMIT ?3)) AS keys "
                  "FROM o JOIN runs r ON r.id = o.id ORDER BY o.o, o.id LIMIT ?2");
  if (!s.ok()) return s.status();
  s->Bind(1, experiment).Bind(2, req.n).Bind(3, kMaxArmPoints);
  bool more = false;
  auto rows = Rows(*s, req.n, &more);
  if (!rows.ok()) return rows.status();
  for (Json& r : *rows)
    for (const char* k : {"config", "keys"}) {
      auto parsed = ParseJson(r[k].is_string() ? r[k].get<std::string>() : "null", k);
      r[k] = parsed.ok() ? *parsed : Json(nullptr);
    }
  return Json{{"rows", std::move(*rows)}, {"truncated", false}};
}

StatusOr<Json> ArmsPanel(Db* db, int64_t experiment, const PanelRequest& req,
                         const std::string& positions) {
  const size_t k = req.by.size();
  std::string gsel, ggrp;
  for (size_t i = 0; i < k; ++i) {
    gsel += ", p.g" + std::to_string(i) + " AS g" + std::to_string(i);
    ggrp += ", g" + std::to_string(i);
  }
  // The points read stop at kMaxArmPoints + 1: past kMaxArmPoints the answer says so.
  auto s = db->Prepare(
      "WITH sample_idx(idx) AS MATERIALIZED (SELECT value FROM json_each(?1)), "
      "picked AS MATERIALIZED (SELECT r.id AS id, r.arm AS arm, r.reused_from AS reused_from" +
      GroupColumns(k, 6) +
      " FROM sample_idx CROSS JOIN runs r ON r.experiment_id = ?2 AND r.idx = sample_idx.idx), "
      "pts AS (SELECT p.arm AS arm" +
      gsel +
      ", m.step AS step, m.value AS value FROM picked p "
      "JOIN runs src ON src.id = coalesce(p.reused_from, p.id) "
      "JOIN metrics m ON m.run_id = src.id AND m.attempt = src.attempts "
      "WHERE m.key = ?3 AND m.value IS NOT NULL LIMIT ?4) "
      "SELECT arm" +
      ggrp +
      ", step, avg(value) AS mean, avg(value * value) AS sq, count(*) AS n "
      "FROM pts GROUP BY arm" +
      ggrp + ", step ORDER BY arm" + ggrp + ", step LIMIT ?5");
  if (!s.ok()) return s.status();
  s->Bind(1, positions)
      .Bind(2, experiment)
      .Bind(3, req.key)
      .Bind(4, kMaxArmPoints + 1)
      .Bind(5, kMaxPanelRows + 1);
  for (size_t i = 0; i < k; ++i) s->Bind(int(6 + i), ConfigJsonPath(req.by[i]));
  bool more = false;
  auto rows = Rows(*s, kMaxPanelRows, &more);
  if (!rows.ok()) return rows.status();
  int64_t points = 0;
  for (const Json& r : *rows) points += r["n"].get<int64_t>();
  return Json{{"rows", std::move(*rows)}, {"truncated", more || points > kMaxArmPoints}};
}

StatusOr<Json> ScatterPanel(Db* db, int64_t experiment, const PanelRequest& req,
                            const std::string& positions) {
  auto s = db->Prepare(
      "WITH sample_idx(idx) AS MATERIALIZED (SELECT value FROM json_each(?1)) "
      "SELECT r.arm AS arm, json_extract(r.config_json, ?3) AS x" +
      GroupColumns(req.by.size(), 5) +
      ", s.value AS y FROM sample_idx CROSS JOIN runs r ON r.experiment_id = ?2 AND r.idx = "
      "sample_idx.idx "
      "JOIN summaries s ON s.run_id = r.id AND s.key = ?4 WHERE s.value IS NOT NULL");
  if (!s.ok()) return s.status();
  s->Bind(1, positions).Bind(2, experiment).Bind(3, ConfigJsonPath(req.x)).Bind(4, req.y);
  for (size_t i = 0; i < req.by.size(); ++i) s->Bind(int(5 + i), ConfigJsonPath(req.by[i]));
  bool more = false;
  auto rows = Rows(*s, kMaxPanelSample, &more);
  if (!rows.ok()) return rows.status();
  return Json{{"rows", std::move(*rows)}, {"truncated", more}};
}

}  // namespace

std::vector<int64_t> SampledPositions(int64_t n_idx, int64_t n) {
  std::vector<int64_t> out;
  const int64_t m = std::min(n, n_idx);
  out.reserve(size_t(std::max<int64_t>(0, m)));
  // k < kMaxPanelSample keeps k * kSamplePrime within int64 (about 1.3e13).
  for (int64_t k = 0; k < m; ++k) out.push_back((k * kSamplePrime) % n_idx);
  return out;
}

std::string PanelRequest::CacheKey() const {
  std::string out = panel + "?n=" + std::to_string(n) + "&key=" + key + "&x=" + x + "&y=" + y;
  for (const std::string& b : by) out += "&by=" + b;
  return out;
}

StatusOr<PanelRequest> ParsePanelRequest(const std::string& panel, const std::string& query) {
  PanelRequest r;
  r.panel = panel;
  if (panel != "overlay" && panel != "arms" && panel != "scatter")
    return Status::InvalidArgument("panel: expected overlay, arms or scatter, got \"" + panel +
                                   "\"");
  if (panel == "overlay") {
    Status st = SizeParam(query, "n", 8, kMaxOverlayRuns, &r.n);
    if (!st.ok()) return st;
    return r;
  }
  for (const std::string& b : SplitParamList(QueryParam(query, "by"), ',')) {
    if (!IsConfigKeyText(b))
      return Status::InvalidArgument("by: expected config keys like train.lr, got \"" + b + "\"");
    if (std::find(r.by.begin(), r.by.end(), b) == r.by.end()) r.by.push_back(b);
  }
  if (r.by.size() > kMaxPanelByKeys)
    return Status::InvalidArgument("by: at most " + std::to_string(kMaxPanelByKeys) +
                                   " keys, got " + std::to_string(r.by.size()));
  Status st =
      panel == "arms" ? KeyParam(query, "key", true, &r.key) : KeyParam(query, "x", false, &r.x);
  if (st.ok() && panel == "scatter") st = KeyParam(query, "y", true, &r.y);
  if (st.ok()) st = SizeParam(query, panel == "arms" ? "runs" : "n", 600, kMaxPanelSample, &r.n);
  if (!st.ok()) return st;
  return r;
}

StatusOr<Json> PanelView(Db* db, int64_t experiment, const PanelRequest& req) {
  auto n_idx = PositionCount(db, experiment);
  if (!n_idx.ok()) return n_idx.status();
  StatusOr<Json> out = Status::Internal("panel");
  int64_t sampled = 0;
  if (req.panel == "overlay") {
    out = OverlayPanel(db, experiment, req);
  } else {
    const std::vector<int64_t> pos = SampledPositions(*n_idx, req.n);
    sampled = int64_t(pos.size());
    const std::string text = PositionsJson(pos);
    out = req.panel == "arms" ? ArmsPanel(db, experiment, req, text)
                              : ScatterPanel(db, experiment, req, text);
  }
  if (!out.ok()) return out;
  (*out)["experiment"] = experiment;
  (*out)["panel"] = req.panel;
  if (req.panel != "overlay") {
    (*out)["sampled"] = sampled;  // grid positions read
    (*out)["positions"] = *n_idx;
    (*out)["by"] = req.by;
  }
  return out;
}

}  // namespace headlab::coord
