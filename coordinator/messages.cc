// Field-by-field validation of worker messages.
#include "coordinator/messages.h"

#include <cmath>

namespace headlab::coord {
namespace {

Status Bad(const char* cmd, const std::string& field, const char* expected) {
  return Status::InvalidArgument(std::string(cmd) + "." + field + ": expected " + expected);
}

// Reads body[field] as an integer in [lo, hi].
Status GetInt(const Json& b, const char* cmd, const char* field, int64_t lo, int64_t hi,
              int64_t* out) {
  auto it = b.find(field);
  if (it == b.end() || !it->is_number_integer()) return Bad(cmd, field, "an integer");
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return Bad(cmd, field, "an integer in range");
  *out = v;
  return Status::Ok();
}

Status GetString(const Json& b, const char* cmd, const char* field, std::string* out,
                 bool optional = false) {
  auto it = b.find(field);
  if (it == b.end() || it->is_null()) {
    if (optional) return Status::Ok();
    return Bad(cmd, field, "a string");
  }
  if (!it->is_string()) return Bad(cmd, field, "a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

constexpr int64_t kMaxId = int64_t(1) << 53;

Status GetRef(const Json& b, const char* cmd, AttemptRef* ref) {
  int64_t run = 0, attempt = 0;
  HEADLAB_RETURN_IF_ERROR(GetInt(b, cmd, "run", 1, kMaxId, &run));
  HEADLAB_RETURN_IF_ERROR(GetInt(b, cmd, "attempt", 1, 1 << 20, &attempt));
  *ref = {run, int(attempt)};
  return Status::Ok();
}

Status GetRefList(const Json& b, const char* cmd, std::vector<AttemptRef>* out) {
  auto it = b.find("running");
  if (it == b.end() || !it->is_array()) return Bad(cmd, "running", "an array of {run, attempt}");
  for (const Json& r : *it) {
    if (!r.is_object()) return Bad(cmd, "running[]", "an object {run, attempt}");
    AttemptRef ref;
    HEADLAB_RETURN_IF_ERROR(GetRef(r, cmd, &ref));
    out->push_back(ref);
  }
  return Status::Ok();
}

Status CheckObject(const Json& b, const char* cmd) {
  if (!b.is_object()) return Status::InvalidArgument(std::string(cmd) + ": body is not an object");
  return Status::Ok();
}

}  // namespace

Json RefJson(const AttemptRef& ref) { return {{"run", ref.run}, {"attempt", ref.attempt}}; }

StatusOr<ReadyMsg> ParseReady(const Json& b) {
  const char* c = "READY";
  HEADLAB_RETURN_IF_ERROR(CheckObject(b, c));
  ReadyMsg m;
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "token", &m.token));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "name", &m.name));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "host", &m.host));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "version", &m.version));
  int64_t slots = 0;
  HEADLAB_RETURN_IF_ERROR(GetInt(b, c, "pid", 0, kMaxId, &m.pid));
  HEADLAB_RETURN_IF_ERROR(GetInt(b, c, "slots", 0, 4096, &slots));
  m.slots = int(slots);
  auto d = b.find("devices");
  if (d == b.end() || !d->is_array()) return Bad(c, "devices", "an array of devices");
  m.devices = *d;
  for (const Json& dev : *d) {
    if (!dev.is_object()) return Bad(c, "devices[]", "an object");
    int64_t index = 0;
    HEADLAB_RETURN_IF_ERROR(GetInt(dev, "READY.devices[]", "index", 0, 1 << 16, &index));
    std::string kind;
    HEADLAB_RETURN_IF_ERROR(GetString(dev, "READY.devices[]", "kind", &kind));
    if (kind != "cuda" && kind != "cpu") return Bad(c, "devices[].kind", "\"cuda\" or \"cpu\"");
    if (kind == "cuda") m.cuda_devices.push_back(int(index));
  }
  HEADLAB_RETURN_IF_ERROR(GetRefList(b, c, &m.running));
  return m;
}

StatusOr<std::vector<AttemptRef>> ParseHeartbeat(const Json& b) {
  HEADLAB_RETURN_IF_ERROR(CheckObject(b, "HEARTBEAT"));
  std::vector<AttemptRef> refs;
  // `running` is required by the spec; an empty HEARTBEAT {} is tolerated as "nothing".
  if (b.find("running") == b.end()) return refs;
  HEADLAB_RETURN_IF_ERROR(GetRefList(b, "HEARTBEAT", &refs));
  return refs;
}

StatusOr<AttemptRef> ParseRef(const Json& b, const char* command) {
  HEADLAB_RETURN_IF_ERROR(CheckObject(b, command));
  AttemptRef ref;
  HEADLAB_RETURN_IF_ERROR(GetRef(b, command, &ref));
  return ref;
}

StatusOr<RejectMsg> ParseReject(const Json& b) {
  const char* c = "REJECT";
  HEADLAB_RETURN_IF_ERROR(CheckObject(b, c));
  RejectMsg m;
  HEADLAB_RETURN_IF_ERROR(GetRef(b, c, &m.ref));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "reason", &m.reason));
  return m;
}

StatusOr<MetricsMsg> ParseMetrics(const Json& b) {
  const char* c = "METRICS";
  HEADLAB_RETURN_IF_ERROR(CheckObject(b, c));
  MetricsMsg m;
  HEADLAB_RETURN_IF_ERROR(GetRef(b, c, &m.ref));
  auto pts = b.find("points");
  if (pts == b.end() || !pts->is_array()) return Bad(c, "points", "an array");
  m.points.reserve(pts->size());
  for (const Json& p : *pts) {
    if (!p.is_array() || p.size() != 5 || !p[0].is_number_integer() ||
        !p[1].is_number_integer() || !p[2].is_string() ||
        !(p[3].is_number() || p[3].is_null()) || !p[4].is_number())
      return Bad(c, "points[]", "[seq, step, key, value, time_s]");
    MetricPoint mp;
    mp.seq = p[0].get<int64_t>();
    if (mp.seq < 0) return Bad(c, "points[].seq", "an integer >= 0");
    mp.step = p[1].get<int64_t>();
    mp.key = p[2].get<std::string>();
    if (mp.key.empty() || mp.key.size() > 200) return Bad(c, "points[].key", "a metric name");
    if (p[3].is_number()) mp.value = p[3].get<double>();
    mp.time_s = p[4].get<double>();
    if (mp.seq > m.max_seq) m.max_seq = mp.seq;
    m.points.push_back(std::move(mp));
  }
  return m;
}

StatusOr<ArtifactMsg> ParseArtifact(const Json& b) {
  const char* c = "ARTIFACT";
  HEADLAB_RETURN_IF_ERROR(CheckObject(b, c));
  ArtifactMsg m;
  HEADLAB_RETURN_IF_ERROR(GetRef(b, c, &m.ref));
  HEADLAB_RETURN_IF_ERROR(GetInt(b, c, "seq", 0, kMaxId, &m.seq));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "kind", &m.kind));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "path", &m.path));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "sha256", &m.sha256));
  HEADLAB_RETURN_IF_ERROR(GetInt(b, c, "bytes", 0, INT64_MAX, &m.bytes));
  HEADLAB_RETURN_IF_ERROR(GetInt(b, c, "step", INT64_MIN, INT64_MAX, &m.step));
  if (m.kind.empty()) return Bad(c, "kind", "a non-empty string");
  return m;
}

StatusOr<AttemptRef> ParseProvenance(const Json& b) {
  const char* c = "PROVENANCE";
  HEADLAB_RETURN_IF_ERROR(CheckObject(b, c));
  AttemptRef ref;
  HEADLAB_RETURN_IF_ERROR(GetRef(b, c, &ref));
  auto f = b.find("fields");
  if (f == b.end() || !f->is_object()) return Bad(c, "fields", "an object");
  return ref;
}

StatusOr<DoneMsg> ParseDone(const Json& b) {
  const char* c = "DONE";
  HEADLAB_RETURN_IF_ERROR(CheckObject(b, c));
  DoneMsg m;
  HEADLAB_RETURN_IF_ERROR(GetRef(b, c, &m.ref));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "status", &m.status));
  if (m.status != "succeeded" && m.status != "failed" && m.status != "cancelled")
    return Bad(c, "status", "succeeded, failed or cancelled");
  int64_t exit_code = 0;
  HEADLAB_RETURN_IF_ERROR(GetInt(b, c, "exit_code", -1000, 1000, &exit_code));
  m.exit_code = int(exit_code);
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "error", &m.error, /*optional=*/true));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "stderr_tail", &m.stderr_tail, /*optional=*/true));
  auto s = b.find("summary");
  if (s == b.end() || s->is_null()) {
    m.summary = Json::object();
  } else if (!s->is_object()) {
    return Bad(c, "summary", "an object of key -> number");
  } else {
    for (auto it = s->begin(); it != s->end(); ++it)
      if (!it->is_number() && !it->is_null()) return Bad(c, "summary." + it.key(), "a number");
    m.summary = *s;
  }
  return m;
}

}  // namespace headlab::coord
