// Report lines of a `command` run -> exec events. Strict: a line is used whole or not at all.
#include "worker/command_report.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "common/sha256.h"

namespace headlab {
namespace {

constexpr size_t kMaxKeyBytes = 128;

Status Bad(const std::string& what) { return Status::InvalidArgument(what); }

bool IsInteger(const Json& j) { return j.is_number_integer() || j.is_number_unsigned(); }

StatusOr<int64_t> Step(const Json& j, const std::string& ev) {
  auto it = j.find("step");
  if (it == j.end() || !IsInteger(*it) || it->get<int64_t>() < 0)
    return Bad(ev + ".step: expected an integer >= 0");
  return it->get<int64_t>();
}

}  // namespace

bool IsReportKey(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyBytes) return false;
  for (char c : key)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
      return false;
  return true;
}

ReportTranslator::ReportTranslator(std::string run_dir, std::function<double()> now)
    : run_dir_(std::move(run_dir)), now_(std::move(now)) {}

StatusOr<std::vector<Json>> ReportTranslator::Translate(const std::string& line) {
  Json j;
  try {
    j = Json::parse(line);
  } catch (const Json::exception&) {
    return Bad("not a JSON line");
  }
  if (!j.is_object()) return Bad("not a JSON object");
  auto ev_it = j.find("ev");
  if (ev_it == j.end() || !ev_it->is_string())
    return Bad("missing \"ev\" (metric, metrics, summary, artifact, provenance or log)");
  const std::string ev = *ev_it;
  if (ev == "metric") {
    auto step = Step(j, ev);
    if (!step.ok()) return step.status();
    auto key = j.find("key");
    if (key == j.end() || !key->is_string() || !IsReportKey(*key))
      return Bad("metric.key: expected a name matching [A-Za-z0-9_.-]{1,128}");
    if (!j.contains("value")) return Bad("metric.value: expected a number");
    return Metrics(j, *step, Json{{key->get<std::string>(), j["value"]}});
  }
  if (ev == "metrics") {
    auto step = Step(j, ev);
    if (!step.ok()) return step.status();
    auto values = j.find("values");
    if (values == j.end() || !values->is_object())
      return Bad("metrics.values: expected an object of name -> number");
    return Metrics(j, *step, *values);
  }
  if (ev == "summary") {
    auto values = j.find("values");
    if (values == j.end() || !values->is_object())
      return Bad("summary.values: expected an object of name -> number");
    for (auto& [k, v] : values->items()) {
      if (!IsReportKey(k))
        return Bad("summary.values." + k + ": expected a name matching [A-Za-z0-9_.-]{1,128}");
      if (!v.is_number() || !std::isfinite(v.get<double>()))
        return Bad("summary.values." + k + ": expected a finite number");
    }
    for (auto& [k, v] : values->items()) summary_[k] = v;
    return std::vector<Json>{};  // sent once, at the end (FinalSummary)
  }
  if (ev == "artifact") {
    auto a = Artifact(j);
    if (!a.ok()) return a.status();
    return std::vector<Json>{*a};
  }
  if (ev == "provenance") {
    auto fields = j.find("fields");
    if (fields == j.end() || !fields->is_object())
      return Bad("provenance.fields: expected an object");
    return std::vector<Json>{Json{{"ev", "provenance"}, {"fields", *fields}}};
  }
  if (ev == "log") {
    auto msg = j.find("msg");
    if (msg == j.end() || !msg->is_string()) return Bad("log.msg: expected a string");
    return std::vector<Json>{Json{{"ev", "log"}, {"msg", *msg}}};
  }
  return Bad("unknown ev \"" + ev + "\" (metric, metrics, summary, artifact, provenance or log)");
}

StatusOr<std::vector<Json>> ReportTranslator::Metrics(const Json& j, int64_t step,
                                                      const Json& values) {
  double t = now_();
  if (j.contains("t")) {
    if (!j["t"].is_number()) return Bad(j["ev"].get<std::string>() + ".t: expected unix seconds");
    t = j["t"].get<double>();
  }
  std::vector<Json> out;
  for (auto& [k, v] : values.items()) {
    if (!IsReportKey(k))
      return Bad("metric key \"" + k + "\": expected a name matching [A-Za-z0-9_.-]{1,128}");
    if (!v.is_number() && !v.is_null())
      return Bad("metric " + k + ": expected a number, got " + v.dump());
  }
  for (auto& [k, v] : values.items()) {
    if (v.is_null() || !std::isfinite(v.get<double>())) {
      // JSON has no NaN: a diverged value arrives as null. It is said, not stored.
      out.push_back(Json{
          {"ev", "log"},
          {"msg", "metric " + k + " at step " + std::to_string(step) + " is not a finite number"}});
      continue;
    }
    last_metric_[k] = v.get<double>();
    out.push_back(Json{{"ev", "metric"}, {"step", step}, {"key", k}, {"value", v}, {"t", t}});
  }
  return out;
}

StatusOr<Json> ReportTranslator::Artifact(const Json& j) {
  auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string() || !IsReportKey(*kind))
    return Bad("artifact.kind: expected a name such as \"checkpoint\"");
  auto path = j.find("path");
  if (path == j.end() || !path->is_string() || path->get<std::string>().empty())
    return Bad("artifact.path: expected a file path (relative to the run directory)");
  auto step = Step(j, "artifact");
  if (!step.ok()) return step.status();
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = path->get<std::string>();
  if (p.is_relative()) p = fs::path(run_dir_) / p;
  fs::path real = fs::canonical(p, ec);
  if (ec) return Bad("artifact.path: " + p.string() + ": " + ec.message());
  fs::path dir = fs::canonical(run_dir_, ec);
  if (ec) return Bad("artifact.path: run directory " + run_dir_ + ": " + ec.message());
  std::string r = real.string(), d = dir.string() + "/";
  if (r.compare(0, d.size(), d) != 0)
    return Bad("artifact.path: " + r + " is outside the run directory " + dir.string());
  if (!fs::is_regular_file(real, ec)) return Bad("artifact.path: " + r + " is not a regular file");
  auto size = fs::file_size(real, ec);
  if (ec) return Bad("artifact.path: " + r + ": " + ec.message());
  auto sha = Sha256File(r);
  if (!sha.ok()) return Bad("artifact.path: " + sha.status().message());
  return Json{{"ev", "artifact"}, {"kind", *kind},           {"path", r},
              {"sha256", *sha},   {"bytes", uint64_t(size)}, {"step", *step}};
}

Json ReportTranslator::FinalSummary() const {
  if (last_metric_.empty() && summary_.empty()) return nullptr;
  Json values = Json::object();
  for (const auto& [k, v] : last_metric_) values[k] = v;
  for (auto& [k, v] : summary_.items()) values[k] = v;
  return Json{{"ev", "summary"}, {"values", values}};
}

}  // namespace headlab
