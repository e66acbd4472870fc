// Read commands: `status` (coordinator and fleet), `runs EXP` (one line per run) and
// `show RUN` (one run in full).
#include <cstdio>

#include "cli/commands.h"
#include "cli/table.h"

namespace headlab {

namespace {

// Summary metrics shown as columns in `runs` when present, in this order.
const char* const kRunColumns[] = {"eval.ppl", "eval.loss", "train.loss", "time.elapsed_s"};

std::string Str(const Json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) ? Cell(obj[key]) : "";
}

void PrintSection(const char* title) { std::printf("\n%s\n", title); }

// Prints an object as "  key  value" lines (flattened).
void PrintKeyValues(const Json& obj) {
  Json flat = FlattenObject(obj);
  std::vector<TableRow> rows;
  for (auto& [k, v] : flat.items()) rows.push_back({"  " + k, Cell(v)});
  if (rows.empty()) std::printf("  (none)\n");
  std::printf("%s", FormatTable({}, rows).c_str());
}

// Prints an array of objects as a table with `cols` (missing fields blank).
void PrintObjects(const Json& arr, const std::vector<std::string>& cols) {
  if (!arr.is_array() || arr.empty()) {
    std::printf("  (none)\n");
    return;
  }
  std::vector<TableRow> rows;
  for (const Json& o : arr) {
    TableRow row;
    for (const auto& c : cols) row.push_back(Str(o, c.c_str()));
    rows.push_back(row);
  }
  std::printf("%s", FormatTable(cols, rows).c_str());
}

}  // namespace

void PrintJson(const Json& j) { std::printf("%s\n", j.dump(2).c_str()); }

int RunStatus(const CliContext& ctx, const ParsedArgs& args) {
  HttpClient client = ctx.Client();
  auto status = client.Call("GET", "/api/v1/status");
  if (!status.ok()) return Fail(ctx, status.status());
  if (args.Has("--json")) {
    PrintJson(status.value());
    return kExitOk;
  }
  const Json& s = status.value();
  std::printf("coordinator %s: up\n", ctx.url.c_str());
  std::string counts;
  if (s.contains("runs_by_status") && s["runs_by_status"].is_object())
    for (auto& [k, v] : s["runs_by_status"].items()) counts += "  " + k + " " + Cell(v);
  std::printf("runs:%s\n", counts.empty() ? "  none" : counts.c_str());
  PrintSection("workers");
  Json workers = s.value("workers", Json::array());
  std::vector<TableRow> rows;
  if (workers.is_array())
    for (const Json& w : workers) {
      std::string running = w.contains("running") ? Cell(w["running"]) : "";
      rows.push_back({Str(w, "name"), Str(w, "host"), Str(w, "state"),
                      w.contains("devices") && w["devices"].is_array()
                          ? std::to_string(w["devices"].size()) : Str(w, "devices"),
                      Str(w, "last_heartbeat_age_s"), running});
    }
  if (rows.empty()) std::printf("  (none)\n");
  else std::printf("%s", FormatTable({"name", "host", "state", "devices", "heartbeat_age_s",
                                      "running"}, rows).c_str());
  // Recent experiments with their progress.
  auto exps = client.Call("GET", "/api/v1/experiments");
  if (exps.ok() && exps->is_array()) {
    PrintSection("experiments");
    std::vector<TableRow> erows;
    size_t n = exps->size(), first = n > 20 ? n - 20 : 0;
    for (size_t i = first; i < n; ++i) {
      const Json& e = (*exps)[i];
      Json c = e.value("counts", Json::object());
      erows.push_back({Str(e, "id"), Str(e, "name"), Str(e, "created_at"), Str(e, "total"),
                       Str(c, "succeeded"), Str(c, "failed"), Str(c, "running"),
                       Str(c, "queued")});
    }
    if (erows.empty()) std::printf("  (none)\n");
    else std::printf("%s", FormatTable({"id", "name", "created_at", "total", "succeeded",
                                        "failed", "running", "queued"}, erows).c_str());
  }
  return kExitOk;
}

int RunRuns(const CliContext& ctx, const ParsedArgs& args) {
  auto id = ParseId(args.positional()[0], "experiment");
  if (!id.ok()) return Fail(ctx, id.status());
  auto runs = ctx.Client().Call("GET", "/api/v1/experiments/" + std::to_string(id.value()) + "/runs");
  if (!runs.ok()) return Fail(ctx, runs.status());
  if (!runs->is_array())
    return Fail(ctx, Status::Internal("unexpected response: " + runs->dump().substr(0, 200)));
  if (args.Has("--json")) {
    PrintJson(runs.value());
    return kExitOk;
  }
  TableRow header = {"id", "arm", "status", "attempts", "worker", "pair", "config_hash"};
  std::vector<std::string> metrics;
  for (const char* m : kRunColumns)
    for (const Json& r : runs.value())
      if (r.contains("summary") && r["summary"].is_object() && r["summary"].contains(m)) {
        metrics.push_back(m);
        header.push_back(m);
        break;
      }
  std::vector<TableRow> rows;
  for (const Json& r : runs.value()) {
    TableRow row = {Str(r, "id"), Str(r, "arm"), Str(r, "status"), Str(r, "attempts"),
                    Str(r, "worker"), Str(r, "pair_key"), Str(r, "config_hash").substr(0, 12)};
    for (const auto& m : metrics) row.push_back(r.contains("summary") ? Str(r["summary"], m.c_str()) : "");
    rows.push_back(row);
  }
  std::printf("%s", FormatTable(header, rows).c_str());
  return kExitOk;
}

int RunShow(const CliContext& ctx, const ParsedArgs& args) {
  auto id = ParseId(args.positional()[0], "run");
  if (!id.ok()) return Fail(ctx, id.status());
  auto run = ctx.Client().Call("GET", "/api/v1/runs/" + std::to_string(id.value()));
  if (!run.ok()) return Fail(ctx, run.status());
  if (args.Has("--json")) {
    PrintJson(run.value());
    return kExitOk;
  }
  const Json& r = run.value();
  std::printf("run %s  experiment %s  arm %s  status %s  attempts %s\n", Str(r, "id").c_str(),
              Str(r, "experiment").empty() ? Str(r, "experiment_id").c_str()
                                           : Str(r, "experiment").c_str(),
              Str(r, "arm").c_str(), Str(r, "status").c_str(),
              r.contains("attempts") && r["attempts"].is_array()
                  ? std::to_string(r["attempts"].size()).c_str()
                  : Str(r, "attempts").c_str());
  std::printf("config_hash %s  pair %s\n", Str(r, "config_hash").c_str(), Str(r, "pair_key").c_str());
  if (!Str(r, "error").empty()) std::printf("error: %s\n", Str(r, "error").c_str());
  PrintSection("config");
  PrintKeyValues(r.value("config", Json::object()));
  PrintSection("attempts");
  PrintObjects(r.value("attempts", Json::array()),
               {"attempt", "worker", "status", "assigned_at", "finished_at", "exit_code", "error"});
  PrintSection("summary");
  PrintKeyValues(r.value("summary", Json::object()));
  PrintSection("provenance");
  Json prov = r.value("provenance", Json::object());
  if (prov.is_array()) {  // one entry per attempt: show the latest
    prov = prov.empty() ? Json::object() : prov.back();
  }
  PrintKeyValues(prov);
  PrintSection("artifacts");
  PrintObjects(r.value("artifacts", Json::array()), {"attempt", "kind", "step", "bytes", "sha256", "path"});
  return kExitOk;
}

}  // namespace headlab
