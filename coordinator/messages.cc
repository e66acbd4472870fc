// Field-by-field validation of worker messages.
#include "coordinator/messages.h"

#include <cmath>
#include <filesystem>

#include "common/wire.h"
#include "common/wire_body.h"

#include "common/utf8.h"

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

std::string RefString(const AttemptRef& ref) {
  return "run " + std::to_string(ref.run) + " attempt " + std::to_string(ref.attempt);
}

StatusOr<Json> ParseBody(const std::string& command, const std::string& text) {
  return ParseWireBody(command, text, wire::MaxBodyBytes(command));
}

bool ValidWorkerId(const std::string& id) {
  if (id.empty() || id.size() > wire::kMaxWorkerIdBytes) return false;
  for (unsigned char c : id)
    if (c <= ' ' || c > '~') return false;
  return true;
}

bool PathInside(const std::string& path, const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path p = fs::path(path), d = fs::path(dir);
  if (!p.is_absolute() || !d.is_absolute()) return false;
  std::string ps = p.lexically_normal().string(), ds = d.lexically_normal().string();
  if (ds.empty() || ds.back() != '/') ds += '/';
  return ps.size() > ds.size() && ps.compare(0, ds.size(), ds) == 0;
}

bool ResolvesInside(const std::string& path, const std::string& dir) {
  std::error_code ec1, ec2;
  auto p = std::filesystem::canonical(path, ec1);
  auto d = std::filesystem::canonical(dir, ec2);
  return !ec1 && !ec2 && PathInside(p.string(), d.string());
}

std::string PrintableBytes(const std::string& bytes, size_t max) {
  bool printable = !bytes.empty();
  for (unsigned char c : bytes) printable = printable && c >= ' ' && c <= '~';
  if (printable) return bytes.size() <= max ? bytes : bytes.substr(0, max) + "...";
  static const char kHex[] = "0123456789abcdef";
  std::string out = "0x";
  for (unsigned char c : bytes) {
    if (out.size() + 2 > max) return out + "...";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

StatusOr<ReadyMsg> ParseReady(const Json& b) {
  const char* c = "READY";
  HEADLAB_RETURN_IF_ERROR(CheckObject(b, c));
  ReadyMsg m;
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "id", &m.id));
  if (!ValidWorkerId(m.id))
    return Bad(c, "id", "1 to 128 printable ASCII characters without spaces");
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "name", &m.name));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "host", &m.host));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "version", &m.version));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "work_dir", &m.work_dir));
  if (m.work_dir.empty() || m.work_dir[0] != '/') return Bad(c, "work_dir", "an absolute path");
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "session", &m.session, /*optional=*/true));
  if (m.name.size() > 256 || m.host.size() > 256 || m.version.size() > 64 ||
      m.work_dir.size() > 4096 || m.session.size() > 64)
    return Status::InvalidArgument("READY: name, host, version, work_dir or session too long");
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

StatusOr<AcceptMsg> ParseAccept(const Json& b) {
  const char* c = "ACCEPT";
  HEADLAB_RETURN_IF_ERROR(CheckObject(b, c));
  AcceptMsg m;
  HEADLAB_RETURN_IF_ERROR(GetRef(b, c, &m.ref));
  auto r = b.find("resume");
  if (r == b.end() || r->is_null()) return m;
  if (!r->is_object()) return Bad(c, "resume", "null or {path, sha256, step}");
  std::string path, sha;
  int64_t step = 0;
  HEADLAB_RETURN_IF_ERROR(GetString(*r, "ACCEPT.resume", "path", &path));
  HEADLAB_RETURN_IF_ERROR(GetString(*r, "ACCEPT.resume", "sha256", &sha));
  HEADLAB_RETURN_IF_ERROR(GetInt(*r, "ACCEPT.resume", "step", INT64_MIN, INT64_MAX, &step));
  m.resume = {{"path", path}, {"sha256", sha}, {"step", step}};
  return m;
}

StatusOr<RejectMsg> ParseReject(const Json& b) {
  const char* c = "REJECT";
  HEADLAB_RETURN_IF_ERROR(CheckObject(b, c));
  RejectMsg m;
  HEADLAB_RETURN_IF_ERROR(GetRef(b, c, &m.ref));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "reason", &m.reason));
  auto busy = b.find("busy");
  if (busy != b.end() && !busy->is_null()) {
    if (!busy->is_boolean()) return Bad(c, "busy", "a boolean");
    m.busy = busy->get<bool>();
  }
  return m;
}

namespace {

// SAX handler for METRICS {run, attempt, points: [[seq, step, key, value, time_s], ...]}.
// Other top-level keys are skipped. Returns false (stops the parse) on the first error.
class MetricsSax : public nlohmann::json_sax<Json> {
 public:
  explicit MetricsSax(MetricsMsg* m) : m_(m) {}
  std::string error;
  bool have_run = false, have_attempt = false, have_points = false;

  bool null() override {
    if (in_point()) {
      if (field_ == 3) return Next();  // value: null allowed
      return Fail("points[]: expected [seq, step, key, value, time_s]");
    }
    return Scalar();
  }
  bool boolean(bool) override { return in_point() ? Fail(kPointShape) : Scalar(); }
  bool number_integer(number_integer_t v) override { return Number(double(v), true, v); }
  bool number_unsigned(number_unsigned_t v) override {
    if (v > uint64_t(INT64_MAX)) return Fail("integer out of range");
    return Number(double(v), true, int64_t(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return Number(v, false, 0); }
  bool string(string_t& s) override {
    if (in_point()) {
      if (field_ != 2 || s.empty() || s.size() > 200) return Fail(kPointShape);
      point_.key = std::move(s);
      return Next();
    }
    return Scalar();
  }
  bool binary(binary_t&) override { return Fail("binary values are not JSON"); }
  bool start_object(std::size_t) override {
    if (depth_ == 0) return Enter();
    if (in_points_array() || in_point()) return Fail(kPointShape);
    return Enter();
  }
  bool end_object() override { return Leave(); }
  bool key(string_t& k) override {
    if (depth_ == 1) key_ = k;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0) return Fail("body is not an object");
    if (depth_ == 1 && key_ == "points") {
      have_points = true;
      points_depth_ = 2;
      return Enter();
    }
    if (in_points_array()) {
      point_ = MetricPoint();
      field_ = 0;
      return Enter();
    }
    if (in_point()) return Fail(kPointShape);
    return Enter();
  }
  bool end_array() override {
    if (in_point()) {
      if (field_ != 5) return Fail(kPointShape);
      if (point_.seq > m_->max_seq) m_->max_seq = point_.seq;
      m_->points.push_back(std::move(point_));
    }
    return Leave();
  }
  bool parse_error(std::size_t pos, const std::string&,
                   const nlohmann::detail::exception& e) override {
    // e.what() quotes the offending bytes, which need not be UTF-8.
    return Fail("invalid JSON at byte " + std::to_string(pos) + ": " + EscapeForMessage(e.what()));
  }

 private:
  static constexpr const char* kPointShape = "points[]: expected [seq, step, key, value, time_s]";
  bool in_points_array() const { return points_depth_ && depth_ == points_depth_; }
  bool in_point() const { return points_depth_ && depth_ == points_depth_ + 1; }
  bool Enter() {
    if (++depth_ > wire::kMaxBodyDepth)
      return Fail("body nested deeper than " + std::to_string(wire::kMaxBodyDepth) + " levels");
    return true;
  }
  bool Leave() {
    --depth_;
    if (points_depth_ && depth_ < points_depth_) points_depth_ = 0;
    return true;
  }
  bool Fail(const std::string& msg) {
    if (error.empty()) error = "METRICS." + msg;
    return false;
  }
  bool Next() {
    ++field_;
    return true;
  }
  // A scalar outside the points: run and attempt matter, anything else is skipped.
  bool Scalar() {
    if (depth_ == 0) return Fail("body is not an object");
    if (in_points_array()) return Fail(kPointShape);
    if (depth_ == 1 && (key_ == "run" || key_ == "attempt"))
      return Fail(key_ + ": expected an integer");
    return true;
  }
  bool Number(double d, bool is_int, int64_t i) {
    if (in_point()) {
      switch (field_) {
        case 0:
          if (!is_int || i < 0) return Fail("points[].seq: expected an integer >= 0");
          point_.seq = i;
          break;
        case 1:
          if (!is_int) return Fail("points[].step: expected an integer");
          point_.step = i;
          break;
        case 3:
          point_.value = d;
          break;
        case 4:
          point_.time_s = d;
          break;
        default:
          return Fail(kPointShape);
      }
      return Next();
    }
    if (depth_ == 1 && key_ == "run") {
      if (!is_int || i < 1 || i > (int64_t(1) << 53))
        return Fail("run: expected an integer in range");
      m_->ref.run = i;
      have_run = true;
      return true;
    }
    if (depth_ == 1 && key_ == "attempt") {
      if (!is_int || i < 1 || i > (1 << 20)) return Fail("attempt: expected an integer in range");
      m_->ref.attempt = int(i);
      have_attempt = true;
      return true;
    }
    return Scalar();
  }

  MetricsMsg* m_;
  int depth_ = 0;
  int points_depth_ = 0;  // depth inside the points array (0 = not in it)
  int field_ = 0;
  std::string key_;
  MetricPoint point_;
};

}  // namespace

StatusOr<MetricsMsg> ParseMetricsText(const std::string& text) {
  if (text.size() > wire::kMaxMetricsBytes)
    return Status::InvalidArgument("METRICS: body of " + std::to_string(text.size()) +
                                   " bytes is over the limit of " +
                                   std::to_string(wire::kMaxMetricsBytes));
  MetricsMsg m;
  MetricsSax sax(&m);
  bool ok = Json::sax_parse(text, &sax, nlohmann::detail::input_format_t::json,
                            /*strict=*/true, /*ignore_comments=*/true);
  if (!ok || !sax.error.empty())
    return Status::InvalidArgument(sax.error.empty() ? "METRICS: invalid JSON" : sax.error);
  if (!sax.have_run) return Bad("METRICS", "run", "an integer");
  if (!sax.have_attempt) return Bad("METRICS", "attempt", "an integer");
  if (!sax.have_points) return Bad("METRICS", "points", "an array");
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

StatusOr<ArtifactDeletedMsg> ParseArtifactDeleted(const Json& b) {
  const char* c = "ARTIFACT_DELETED";
  HEADLAB_RETURN_IF_ERROR(CheckObject(b, c));
  ArtifactDeletedMsg m;
  HEADLAB_RETURN_IF_ERROR(GetRef(b, c, &m.ref));
  HEADLAB_RETURN_IF_ERROR(GetInt(b, c, "seq", 0, kMaxId, &m.seq));
  HEADLAB_RETURN_IF_ERROR(GetString(b, c, "path", &m.path));
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
