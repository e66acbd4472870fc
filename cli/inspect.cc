// Read commands: `status` (coordinator and fleet), `runs [EXP]` (one line per run, or a
// search across experiments) and `show RUN` (one run in full).
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "cli/commands.h"
#include "cli/resolve.h"
#include "cli/table.h"
#include "common/config_view.h"
#include "common/run_config.h"

namespace headlab {

namespace {

// Summary metrics shown as columns in `runs` when present, in this order.
const char* const kRunColumns[] = {"eval.ppl", "eval.loss", "train.loss", "time.elapsed_s"};
// Lines of an attempt's stderr that `show` quotes as the cause of a failure.
constexpr size_t kCauseLines = 3;

std::string Str(const Json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) ? Cell(obj[key]) : "";
}

void PrintSection(const std::string& title) { std::printf("\n%s\n", title.c_str()); }

// Prints an object as "  key  value" lines (flattened; bytes with a unit).
void PrintKeyValues(const Json& obj) {
  Json flat = FlattenObject(obj);
  std::vector<TableRow> rows;
  for (auto& [k, v] : flat.items()) rows.push_back({"  " + k, KeyedCell(k, v)});
  if (rows.empty()) std::printf("  (none)\n");
  std::printf("%s", FormatTable({}, rows).c_str());
}

// Prints an array of objects as a table with `cols` (missing fields blank).
void PrintObjects(const Json& arr, const std::vector<std::string>& cols,
                  const std::vector<std::string>& headers = {}) {
  if (!arr.is_array() || arr.empty()) {
    std::printf("  (none)\n");
    return;
  }
  std::vector<TableRow> rows;
  for (const Json& o : arr) {
    TableRow row;
    for (const auto& c : cols)
      row.push_back(o.is_object() && o.contains(c) ? KeyedCell(c, o[c]) : "");
    rows.push_back(row);
  }
  std::printf("%s", FormatTable(headers.empty() ? cols : headers, rows).c_str());
}

// The worker's name, else its id (older coordinators send only the id).
std::string WorkerName(const Json& o) {
  std::string name = Str(o, "worker_name");
  return name.empty() ? Str(o, "worker") : name;
}

std::string Tags(const Json& o) {
  std::string s;
  if (o.is_object() && o.contains("tags") && o["tags"].is_array())
    for (const Json& t : o["tags"]) s += (s.empty() ? "" : " ") + Cell(t);
  return s;
}

// The last non-empty lines of `text`, joined with " | ".
std::string LastLines(const std::string& text, size_t n) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) lines.push_back(line);
    start = end + 1;
  }
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : "\n       ") + lines[i];
  return out;
}

// The summary metric columns present in `runs`, in kRunColumns order.
std::vector<std::string> MetricColumns(const Json& runs) {
  std::vector<std::string> out;
  for (const char* m : kRunColumns)
    for (const Json& r : runs)
      if (r.contains("summary") && r["summary"].is_object() && r["summary"].contains(m)) {
        out.push_back(m);
        break;
      }
  return out;
}

// The keys of runs' "params" objects, in first-seen order.
std::vector<std::string> ParamColumns(const Json& runs) {
  std::vector<std::string> out;
  for (const Json& r : runs)
    if (r.contains("params") && r["params"].is_object())
      for (auto& [k, v] : r["params"].items())
        if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  // A key every run has at one value does not tell the runs apart.
  std::vector<std::string> varying;
  for (const std::string& k : out) {
    Json first;
    bool seen = false, differs = false;
    for (const Json& r : runs) {
      Json v =
          r.contains("params") && r["params"].is_object() ? r["params"].value(k, Json()) : Json();
      if (!seen)
        first = v, seen = true;
      else
        differs = differs || v != first;
    }
    if (differs) varying.push_back(k);
  }
  return varying;
}

int PrintRunsTable(const Json& runs, bool across_experiments) {
  TableRow header = {"id"};
  if (across_experiments) header.push_back("experiment");
  for (const char* c : {"arm", "status", "attempts", "worker"}) header.push_back(c);
  std::vector<std::string> params =
      across_experiments ? std::vector<std::string>{} : ParamColumns(runs);
  for (const auto& p : params) header.push_back(p);
  std::vector<std::string> metrics = MetricColumns(runs);
  for (const auto& m : metrics) header.push_back(m);
  bool any_tags = false;
  for (const Json& r : runs) any_tags = any_tags || !Tags(r).empty();
  if (any_tags) header.push_back("tags");
  std::vector<TableRow> rows;
  for (const Json& r : runs) {
    TableRow row = {Str(r, "id")};
    if (across_experiments)
      row.push_back(Str(r, "experiment_id") + " " + Str(r, "experiment_name"));
    for (const std::string& v :
         {Str(r, "arm"), Str(r, "status"), Str(r, "attempts"), WorkerName(r)})
      row.push_back(v);
    for (const auto& p : params) row.push_back(Cell(r["params"].value(p, Json())));
    for (const auto& m : metrics)
      row.push_back(r.contains("summary") ? KeyedCell(m, r["summary"].value(m, Json())) : "");
    if (any_tags) row.push_back(Tags(r));
    rows.push_back(row);
  }
  if (rows.empty())
    std::printf("(no runs)\n");
  else
    std::printf("%s", FormatTable(header, rows).c_str());
  return kExitOk;
}

// "status=failed,lost&tag=x&where=train.lr%3D0.001" from the filter options.
std::string SearchQuery(const ParsedArgs& args, int64_t experiment) {
  std::string q;
  auto add = [&](const std::string& k, const std::string& v) {
    if (!v.empty()) q += (q.empty() ? "" : "&") + k + "=" + UrlQueryEscape(v);
  };
  if (experiment) add("experiment", std::to_string(experiment));
  std::string statuses, tags, where;
  for (const auto& s : args.All("--status")) statuses += (statuses.empty() ? "" : ",") + s;
  for (const auto& t : args.All("--tag")) tags += (tags.empty() ? "" : ",") + t;
  for (const auto& w : args.All("--where")) where += (where.empty() ? "" : ";") + w;
  add("status", statuses);
  add("tag", tags);
  add("where", where);
  add("limit", args.Get("--limit"));
  return q;
}

}  // namespace

void PrintJson(const Json& j) { std::printf("%s\n", j.dump(2).c_str()); }

int RunStatus(const CliContext& ctx, const ParsedArgs& args) {
  // Whether the coordinator is up is the question here: no offline reads of its database.
  HttpClient client = ctx.OnlineClient();
  auto status = client.Call("GET", "/api/v1/status");
  if (!status.ok()) return Fail(ctx, status.status());
  if (args.Has("--json")) {
    PrintJson(status.value());
    return kExitOk;
  }
  const Json& s = status.value();
  std::printf("coordinator %s: up%s\n", ctx.url.c_str(),
              ctx.url_source == "default" || ctx.url_source == "--url"
                  ? ""
                  : (" (address from " + ctx.url_source + ")").c_str());
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
                          ? std::to_string(w["devices"].size())
                          : Str(w, "devices"),
                      Str(w, "last_heartbeat_age_s"), running});
    }
  if (rows.empty())
    std::printf("  (none)\n");
  else
    std::printf(
        "%s", FormatTable({"name", "host", "state", "devices", "heartbeat_age_s", "running"}, rows)
                  .c_str());
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
                       Str(c, "succeeded"), Str(c, "failed"), Str(c, "running"), Str(c, "queued"),
                       Tags(e)});
    }
    if (erows.empty())
      std::printf("  (none)\n");
    else
      std::printf("%s", FormatTable({"id", "name", "created_at", "total", "succeeded", "failed",
                                     "running", "queued", "tags"},
                                    erows)
                            .c_str());
  }
  return kExitOk;
}

int RunRuns(const CliContext& ctx, const ParsedArgs& args) {
  int64_t experiment = 0;
  if (!args.positional().empty()) {
    auto id = ResolveExperiment(ctx, args.positional()[0]);
    if (!id.ok()) return Fail(ctx, id.status());
    experiment = id.value();
  }
  const bool search = experiment == 0 || args.Has("--status") || args.Has("--tag") ||
                      args.Has("--where") || args.Has("--limit");
  Json runs;
  if (search) {
    auto found = ctx.Client().Call("GET", "/api/v1/runs?" + SearchQuery(args, experiment));
    if (!found.ok()) return Fail(ctx, found.status());
    if (!found->is_object() || !(*found)["runs"].is_array())
      return Fail(ctx, Status::Internal("unexpected response: " + found->dump().substr(0, 200)));
    if (args.Has("--json")) {
      PrintJson(found.value());
      return kExitOk;
    }
    runs = (*found)["runs"];
    if (found->value("truncated", false))
      std::fprintf(stderr, "headlab runs: showing the first %zu matches (--limit N for more)\n",
                   runs.size());
  } else {
    auto list =
        ctx.Client().Call("GET", "/api/v1/experiments/" + std::to_string(experiment) + "/runs");
    if (!list.ok()) return Fail(ctx, list.status());
    if (!list->is_array())
      return Fail(ctx, Status::Internal("unexpected response: " + list->dump().substr(0, 200)));
    if (args.Has("--json")) {
      PrintJson(list.value());
      return kExitOk;
    }
    runs = list.value();
  }
  return PrintRunsTable(runs, experiment == 0);
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
  const Json attempts = r.value("attempts", Json::array());
  std::printf(
      "run %s  experiment %s%s  arm %s  status %s  attempt %zu of %s\n", Str(r, "id").c_str(),
      Str(r, "experiment_id").c_str(),
      Str(r, "experiment_name").empty() ? "" : (" (" + Str(r, "experiment_name") + ")").c_str(),
      Str(r, "arm").c_str(), Str(r, "status").c_str(),
      attempts.is_array() ? attempts.size() : size_t(0), Str(r, "max_attempts").c_str());
  std::printf("worker %s  config_hash %s  pair %s\n",
              WorkerName(r).empty() ? "-" : WorkerName(r).c_str(), Str(r, "config_hash").c_str(),
              Str(r, "pair_key").c_str());
  if (!Tags(r).empty()) std::printf("tags: %s\n", Tags(r).c_str());
  if (!Str(r, "note").empty()) std::printf("note: %s\n", Str(r, "note").c_str());
  if (!Str(r, "error").empty()) {
    std::printf("error: %s\n", Str(r, "error").c_str());
    // Why it failed is in the failed attempt's stderr, not in its exit status.
    for (auto it = attempts.rbegin(); attempts.is_array() && it != attempts.rend(); ++it) {
      std::string cause = LastLines(Str(*it, "stderr_tail"), kCauseLines);
      if (cause.empty()) continue;
      std::printf("cause: %s\n       (attempt %s's stderr; all of it: headlab logs %s)\n",
                  cause.c_str(), Str(*it, "attempt").c_str(), Str(r, "id").c_str());
      break;
    }
  }
  const Json config = r.value("config", Json::object());
  const size_t all_keys = FlattenObject(config).size();
  if (args.Has("--all") || !r.contains("config_notable")) {
    PrintSection("config (all " + std::to_string(all_keys) + " keys)");
    PrintKeyValues(config);
  } else {
    Json notable = r["config_notable"];
    PrintSection("config (" + std::to_string(notable.size()) + " of " + std::to_string(all_keys) +
                 " keys: the run's kind, seed, its own sections and values changed from the "
                 "defaults; --all for every key)");
    PrintKeyValues(notable);
  }
  PrintSection("attempts");
  Json rows = Json::array();
  for (const Json& a : attempts) {
    Json row = a;
    row["worker"] = WorkerName(a);
    rows.push_back(row);
  }
  PrintObjects(rows,
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
  PrintObjects(r.value("artifacts", Json::array()),
               {"attempt", "seq", "kind", "step", "bytes", "sha256", "path", "deleted_at"});
  return kExitOk;
}

}  // namespace headlab
