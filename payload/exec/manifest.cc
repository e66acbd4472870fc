// Manifest parsing and validation.
#include "payload/exec/manifest.h"

namespace headlab {
namespace {

Status FieldError(const std::string& file, const std::string& field, const std::string& what,
                  const Json* got) {
  std::string msg = file + ": $." + field + ": " + what;
  if (got) msg += ", got " + got->dump();
  return Status::InvalidArgument(msg);
}

bool IsId(const Json& j) { return j.is_number_integer() || j.is_string(); }

// Reads {path, sha256, step} at `field` (resume or parent).
Status ParseCheckpointRef(const Json& r, const std::string& file, const std::string& field,
                          ResumePoint* out) {
  if (!r.is_object()) return FieldError(file, field, "expected null or an object", &r);
  if (!r.contains("path") || !r["path"].is_string() || r["path"].get<std::string>().empty())
    return FieldError(file, field + ".path", "expected a non-empty string",
                      r.contains("path") ? &r["path"] : nullptr);
  out->path = r["path"].get<std::string>();
  const Json* sha = r.contains("sha256") ? &r["sha256"] : nullptr;
  bool sha_ok = sha && sha->is_string() && sha->get<std::string>().size() == 64 &&
                sha->get<std::string>().find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!sha_ok) return FieldError(file, field + ".sha256", "expected 64 lowercase hex digits", sha);
  out->sha256 = sha->get<std::string>();
  const Json* step = r.contains("step") ? &r["step"] : nullptr;
  if (!step || !step->is_number_integer() || step->get<int64_t>() < 0)
    return FieldError(file, field + ".step", "expected an integer >= 0", step);
  out->step = step->get<int64_t>();
  return Status::Ok();
}

}  // namespace

StatusOr<Manifest> ParseManifest(const std::string& text, const std::string& file) {
  StatusOr<Json> parsed = ParseJson(text, file);
  if (!parsed.ok()) return parsed.status();
  const Json& j = parsed.value();
  if (!j.is_object()) return FieldError(file, "", "expected an object", &j);
  static const char* const kKnown[] = {"run",     "attempt", "experiment", "config",
                                       "out_dir", "resume",  "parent"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const char* k : kKnown) known = known || it.key() == k;
    if (!known)
      return FieldError(
          file, it.key(),
          "unknown key (known: run, attempt, experiment, config, out_dir, resume, parent)",
          nullptr);
  }
  for (const char* k : {"run", "attempt", "config", "out_dir"})
    if (!j.contains(k)) return FieldError(file, k, "missing", nullptr);

  Manifest m;
  if (!IsId(j["run"])) return FieldError(file, "run", "expected an integer or string", &j["run"]);
  m.run = j["run"];
  const Json& attempt = j["attempt"];
  if (!attempt.is_number_integer() || attempt.get<int64_t>() < 0)
    return FieldError(file, "attempt", "expected an integer >= 0", &attempt);
  m.attempt = attempt.get<int64_t>();
  if (j.contains("experiment")) {
    if (!IsId(j["experiment"]) && !j["experiment"].is_null())
      return FieldError(file, "experiment", "expected an integer or string", &j["experiment"]);
    m.experiment = j["experiment"];
  }
  if (!j["config"].is_object())
    return FieldError(file, "config", "expected an object", &j["config"]);
  m.config = j["config"];
  const Json& out = j["out_dir"];
  if (!out.is_string() || out.get<std::string>().empty() || out.get<std::string>()[0] != '/')
    return FieldError(file, "out_dir", "expected an absolute path", &out);
  m.out_dir = out.get<std::string>();

  if (j.contains("resume") && !j["resume"].is_null()) {
    ResumePoint rp;
    HEADLAB_RETURN_IF_ERROR(ParseCheckpointRef(j["resume"], file, "resume", &rp));
    m.resume = rp;
  }
  if (j.contains("parent") && !j["parent"].is_null()) {
    const Json& p = j["parent"];
    ResumePoint rp;
    HEADLAB_RETURN_IF_ERROR(ParseCheckpointRef(p, file, "parent", &rp));
    if (!p.contains("run") || !IsId(p["run"]))
      return FieldError(file, "parent.run", "expected an integer or string",
                        p.contains("run") ? &p["run"] : nullptr);
    m.parent = rp;
    m.parent_run = p["run"];
  }
  return m;
}

}  // namespace headlab
