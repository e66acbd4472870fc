// `headlab export EXP`: every run of an experiment with its config and summary, as JSON or
// as CSV (one row per run, config keys and summary metrics flattened into columns), or
// with --history every metric point of every run as JSON lines (a notebook's curves).
#include "cli/export.h"

#include <cstdio>
#include <set>

#include "cli/commands.h"
#include "cli/resolve.h"
#include "common/files.h"
#include "common/run_config.h"

namespace headlab {

namespace {

const char* const kRunFields[] = {"id", "arm", "status", "attempts", "config_hash", "pair_key"};

}  // namespace

void ExportTable(const Json& runs, TableRow* header, std::vector<TableRow>* rows) {
  std::vector<Json> configs;
  std::set<std::string> extra_config, summary_keys;
  const std::set<std::string> schema(RunConfigKeys().begin(), RunConfigKeys().end());
  for (const Json& r : runs) {
    configs.push_back(FlattenObject(r.value("config", Json::object())));
    for (auto& [k, v] : configs.back().items())
      if (!schema.count(k)) extra_config.insert(k);
    Json s = r.value("summary", Json::object());
    if (s.is_object())
      for (auto& [k, v] : s.items()) summary_keys.insert(k);
  }
  std::vector<std::string> config_cols = RunConfigKeys();
  config_cols.insert(config_cols.end(), extra_config.begin(), extra_config.end());
  header->clear();
  for (const char* f : kRunFields) header->push_back(f);
  for (const auto& k : config_cols) header->push_back("config." + k);
  for (const auto& k : summary_keys) header->push_back("summary." + k);
  rows->clear();
  for (size_t i = 0; i < runs.size(); ++i) {
    const Json& r = runs[i];
    TableRow row;
    for (const char* f : kRunFields) row.push_back(r.contains(f) ? Cell(r[f]) : "");
    for (const auto& k : config_cols)
      row.push_back(configs[i].contains(k) ? Cell(configs[i][k]) : "");
    Json s = r.value("summary", Json::object());
    for (const auto& k : summary_keys)
      // Full precision: an export is data, not a display.
      row.push_back(s.is_object() && s.contains(k)
                        ? (s[k].is_number_float() ? s[k].dump() : Cell(s[k]))
                        : "");
    rows->push_back(std::move(row));
  }
}

void AppendHistoryLines(int64_t experiment, const Json& run, const Json& points, std::string* out) {
  for (const Json& p : points) {
    if (!p.is_array() || p.size() < 6) continue;
    Json line = {{"experiment", experiment},
                 {"run", run.value("id", Json())},
                 {"arm", run.value("arm", Json())},
                 {"attempt", p[0]},
                 {"step", p[2]},
                 {"key", p[3]},
                 {"value", p[4]},
                 {"time_s", p[5]},
                 {"params", run.value("params", Json::object())}};
    *out += line.dump() + "\n";
  }
}

namespace {

constexpr int64_t kHistoryPage = 100000;

// The per-step history of every run as JSON lines: the points of each run's current
// attempt (every attempt with --all-attempts); a reused run's come from the run it reuses.
Status History(HttpClient& client, int64_t experiment, const Json& runs, bool all_attempts,
               std::string* out) {
  for (const Json& r : runs) {
    Json source = r.value("reused_from", Json());
    const std::string run_id = Cell(source.is_number() ? source : r.value("id", Json()));
    auto full = client.Call("GET", "/api/v1/runs/" + run_id);
    if (!full.ok()) return full.status();
    const int64_t n = int64_t(full->value("attempts", Json::array()).size());
    for (int64_t attempt = all_attempts ? 1 : n; attempt >= 1 && attempt <= n; ++attempt) {
      for (int64_t after = -1;;) {
        auto page = client.Call("GET", "/api/v1/runs/" + run_id +
                                           "/metrics?attempt=" + std::to_string(attempt) +
                                           "&after=" + std::to_string(after) +
                                           "&limit=" + std::to_string(kHistoryPage));
        if (!page.ok()) return page.status();
        const Json points = page->value("points", Json::array());
        AppendHistoryLines(experiment, r, points, out);
        if (int64_t(points.size()) < kHistoryPage) break;
        after = points.back()[1].get<int64_t>();
      }
    }
  }
  return Status::Ok();
}

// Writes the export to --output (saying what went where) or stdout.
int WriteExport(const CliContext& ctx, const ParsedArgs& args, const std::string& out,
                const std::string& what) {
  if (!args.Has("--output")) {
    std::fwrite(out.data(), 1, out.size(), stdout);
    return kExitOk;
  }
  Status st = WriteFileAtomic(args.Get("--output"), out);
  if (!st.ok()) return Fail(ctx, st);
  std::fprintf(stderr, "wrote %s to %s\n", what.c_str(), args.Get("--output").c_str());
  return kExitOk;
}

}  // namespace

int RunExport(const CliContext& ctx, const ParsedArgs& args) {
  std::string format = args.Get("--format", "json");
  if (format != "json" && format != "csv")
    return Fail(ctx,
                Status::InvalidArgument("--format: expected json or csv, got \"" + format + "\""));
  if (args.Has("--history") && args.Has("--format"))
    return Fail(ctx,
                Status::InvalidArgument("--history writes JSON lines; give no --format with it"));
  auto id = ResolveExperiment(ctx, args.positional()[0]);
  if (!id.ok()) return Fail(ctx, id.status());
  std::string exp_path = "/api/v1/experiments/" + std::to_string(id.value());
  HttpClient client = ctx.Client();
  auto exp = client.Call("GET", exp_path);
  if (!exp.ok()) return Fail(ctx, exp.status());
  auto list = client.Call("GET", exp_path + "/runs");
  if (!list.ok()) return Fail(ctx, list.status());
  if (!list->is_array())
    return Fail(ctx, Status::Internal("unexpected response: " + list->dump().substr(0, 200)));
  std::string out;
  if (args.Has("--history")) {
    Status st = History(client, id.value(), list.value(), args.Has("--all-attempts"), &out);
    if (!st.ok()) return Fail(ctx, st);
    return WriteExport(ctx, args, out, std::to_string(list->size()) + " runs' metric points");
  }
  // The runs list has no configs: fetch each run (one request per run keeps the CLI on
  // the documented API rather than on the database layout).
  Json runs = Json::array();
  for (const Json& brief : list.value()) {
    Json run = brief;
    auto full = client.Call("GET", "/api/v1/runs/" + Cell(brief.value("id", Json())));
    if (!full.ok()) return Fail(ctx, full.status());
    for (const char* k : {"config", "summary", "provenance", "artifacts"})
      if (full->contains(k)) run[k] = (*full)[k];
    // "attempts" stays the count of the runs list; the attempt rows go beside it.
    if (full->contains("attempts") && (*full)["attempts"].is_array())
      run["attempt_history"] = (*full)["attempts"];
    runs.push_back(std::move(run));
  }
  if (format == "json") {
    out = Json({{"experiment", exp.value()}, {"runs", runs}}).dump(2) + "\n";
  } else {
    TableRow header;
    std::vector<TableRow> rows;
    ExportTable(runs, &header, &rows);
    out = FormatCsv(header, rows);
  }
  return WriteExport(ctx, args, out, std::to_string(runs.size()) + " runs");
}

}  // namespace headlab
