// Store's writes of what a running attempt reports besides its artifacts: metric points
// (also handed to live subscribers after the batch commits), provenance, head maps.
#include "coordinator/store.h"

namespace headlab::coord {
namespace {

// Provenance fields copied into named columns (column, then accepted field names).
struct ProvColumn {
  const char* column;
  std::vector<const char*> fields;
};
const std::vector<ProvColumn>& ProvColumns() {
  static const std::vector<ProvColumn> k = {
      {"git_commit", {"git_commit"}},
      {"git_dirty", {"git_dirty"}},
      {"git_diff_sha256", {"git_diff_sha256"}},
      {"binary_sha256", {"binary_sha256"}},
      {"host", {"host"}},
      {"devices", {"devices", "device"}},
      {"driver_version", {"driver_version"}},
      {"cuda_version", {"cuda_version"}},
      {"libtorch_version", {"libtorch_version"}},
      {"dataset_path", {"dataset_path"}},
      {"dataset_sha256", {"dataset_sha256"}},
      {"parent_run", {"parent_run"}},
      {"parent_checkpoint_sha256", {"parent_checkpoint_sha256", "resume_sha256"}},
  };
  return k;
}

// Rows per multi-row metrics INSERT (7 parameters each; SQLite allows 32766).
constexpr int kMetricRowsPerInsert = 64;

}  // namespace

void Store::PrepareMetrics() {
  const std::string insert =
      "INSERT OR IGNORE INTO metrics(run_id, attempt, seq, step, key, value, time_s) VALUES ";
  std::string chunk = insert;
  for (int k = 0; k < kMetricRowsPerInsert; ++k)
    chunk += k ? ",(?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?)";
  metric_sql_.insert_chunk = db_.MustPrepare(chunk);
  metric_sql_.insert_one = db_.MustPrepare(insert + "(?,?,?,?,?,?,?)");
  metric_sql_.upsert_provenance = db_.MustPrepare(
      "INSERT OR REPLACE INTO provenance(run_id, attempt, git_commit, git_dirty, "
      "git_diff_sha256, binary_sha256, host, devices, driver_version, cuda_version, "
      "libtorch_version, dataset_path, dataset_sha256, parent_run, parent_checkpoint_sha256, "
      "fields_json, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
}

Status Store::InsertMetrics(const AttemptRef& ref, const std::vector<MetricPoint>& points) {
  // Full chunks go through one multi-row INSERT (one statement execution per
  // kMetricRowsPerInsert points: about 3x faster than one per point); the rest one by one.
  size_t i = 0;
  for (; i + kMetricRowsPerInsert <= points.size(); i += kMetricRowsPerInsert) {
    Stmt& s = metric_sql_.insert_chunk;
    int col = 1;
    for (size_t k = i; k < i + kMetricRowsPerInsert; ++k) {
      const MetricPoint& p = points[k];
      sqlite3_bind_int64(s.raw(), col++, ref.run);
      sqlite3_bind_int64(s.raw(), col++, ref.attempt);
      sqlite3_bind_int64(s.raw(), col++, p.seq);
      sqlite3_bind_int64(s.raw(), col++, p.step);
      sqlite3_bind_text(s.raw(), col++, p.key.data(), int(p.key.size()), SQLITE_STATIC);
      if (p.value)
        sqlite3_bind_double(s.raw(), col++, *p.value);
      else
        sqlite3_bind_null(s.raw(), col++);
      sqlite3_bind_double(s.raw(), col++, p.time_s);
    }
    HEADLAB_RETURN_IF_ERROR(s.Exec());
  }
  for (; i < points.size(); ++i) {
    const MetricPoint& p = points[i];
    Stmt& s = metric_sql_.insert_one;
    s.Bind(1, ref.run).Bind(2, ref.attempt).Bind(3, p.seq).Bind(4, p.step).Bind(5, p.key);
    if (p.value)
      s.Bind(6, *p.value);
    else
      s.BindNull(6);
    s.Bind(7, p.time_s);
    HEADLAB_RETURN_IF_ERROR(s.Exec());
  }
  if (feed_ && feed_->active())
    for (const MetricPoint& p : points)
      live_.push_back({ref.run, ref.attempt, p.seq, p.step, p.key,
                       p.value ? Json(*p.value) : Json(), p.time_s});
  return Status::Ok();
}

Status Store::UpsertProvenance(const AttemptRef& ref, const Json& fields) {
  // The worker and exec each send some fields for the same attempt: merge, newest wins.
  Json merged = Json::object();
  {
    Stmt old = db_.MustPrepare("SELECT fields_json FROM provenance WHERE run_id=? AND attempt=?");
    old.Bind(1, ref.run).Bind(2, ref.attempt);
    if (old.Step()) {
      auto j = ParseJson(old.Text(0), "provenance.fields_json");
      if (j.ok() && j->is_object()) merged = *j;
    }
  }
  for (auto it = fields.begin(); it != fields.end(); ++it) merged[it.key()] = it.value();
  Stmt& s = metric_sql_.upsert_provenance;
  s.Bind(1, ref.run).Bind(2, ref.attempt);
  int col = 3;
  for (const ProvColumn& c : ProvColumns()) {
    const Json* v = nullptr;
    for (const char* f : c.fields) {
      auto it = merged.find(f);
      if (it != merged.end() && !it->is_null()) {
        v = &*it;
        break;
      }
    }
    if (!v)
      s.BindNull(col);
    else if (v->is_string())
      s.Bind(col, v->get<std::string>());
    else if (v->is_boolean())
      s.Bind(col, v->get<bool>() ? 1 : 0);
    else if (v->is_number_integer())
      s.Bind(col, v->get<int64_t>());
    else if (v->is_number())
      s.Bind(col, v->get<double>());
    else
      s.Bind(col, CanonicalJson(*v));
    ++col;
  }
  s.Bind(col, CanonicalJson(merged)).Bind(col + 1, NowIso());
  return s.Exec();
}

Status Store::InsertHeadMaps(const AttemptRef& ref, const std::vector<HeadMapRow>& rows) {
  Stmt s = db_.MustPrepare(
      "INSERT OR REPLACE INTO head_maps(run_id, attempt, layer, head, role, score, window) "
      "VALUES (?,?,?,?,?,?,?)");
  for (const HeadMapRow& r : rows) {
    s.Bind(1, ref.run).Bind(2, ref.attempt).Bind(3, r.layer).Bind(4, r.head).Bind(5, r.role);
    if (r.score)
      s.Bind(6, *r.score);
    else
      s.BindNull(6);
    if (r.window)
      s.Bind(7, *r.window);
    else
      s.BindNull(7);
    HEADLAB_RETURN_IF_ERROR(s.Exec());
  }
  return Status::Ok();
}

}  // namespace headlab::coord
