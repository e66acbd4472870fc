// `headlab logs RUN`: why a run did what it did: its event trail (assigned, lost, done,
// cancelled, retried, ...) and each attempt's end with the tail of its stderr.
#include <cstdio>

#include "cli/commands.h"
#include "cli/table.h"

namespace headlab {

namespace {

std::string Str(const Json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) ? Cell(obj[key]) : "";
}

// "2026-12-01T15:03:04.123Z" -> "2026-12-01 15:03:04".
std::string Time(const std::string& iso) {
  std::string t = iso.substr(0, 19);
  if (t.size() > 10 && t[10] == 'T') t[10] = ' ';
  return t;
}

}  // namespace

int RunLogs(const CliContext& ctx, const ParsedArgs& args) {
  auto id = ParseId(args.positional()[0], "run");
  if (!id.ok()) return Fail(ctx, id.status());
  int64_t only = 0;
  if (args.Has("--attempt")) {
    auto a = ParseId(args.Get("--attempt"), "attempt");
    if (!a.ok()) return Fail(ctx, a.status());
    only = a.value();
  }
  auto run = ctx.Client().Call("GET", "/api/v1/runs/" + std::to_string(id.value()));
  if (!run.ok()) return Fail(ctx, run.status());
  const Json& r = run.value();
  Json attempts = r.value("attempts", Json::array());
  if (only && (!attempts.is_array() || only > int64_t(attempts.size())))
    return Fail(ctx, Status::NotFound("run " + std::to_string(id.value()) + " has no attempt " +
                                      std::to_string(only)));
  if (args.Has("--json")) {
    Json out = {{"run", id.value()},
                {"events", r.value("events", Json::array())},
                {"attempts", Json::array()}};
    for (const Json& a : attempts)
      if (!only || a.value("attempt", int64_t(0)) == only)
        out["attempts"].push_back({{"attempt", a.value("attempt", Json())},
                                   {"worker", a.value("worker_name", a.value("worker", Json()))},
                                   {"status", a.value("status", Json())},
                                   {"exit_code", a.value("exit_code", Json())},
                                   {"error", a.value("error", Json())},
                                   {"stderr_tail", a.value("stderr_tail", Json())}});
    PrintJson(out);
    return kExitOk;
  }
  std::printf("run %s (experiment %s, arm %s): %s\n", Str(r, "id").c_str(),
              Str(r, "experiment_id").c_str(), Str(r, "arm").c_str(), Str(r, "status").c_str());
  const Json events = r.value("events", Json::array());
  if (!only && events.is_array() && !events.empty()) {
    std::printf("\nevents\n");
    std::vector<TableRow> rows;
    for (const Json& e : events) {
      Json detail = e.value("detail", Json::object());
      std::string d;
      if (detail.is_object())
        for (auto& [k, v] : detail.items()) d += (d.empty() ? "" : "  ") + k + "=" + Cell(v);
      rows.push_back({"  " + Time(Str(e, "at")), Str(e, "kind"), Str(e, "attempt"), d});
    }
    std::printf("%s", FormatTable({}, rows).c_str());
  }
  if (!attempts.is_array() || attempts.empty()) {
    std::printf("\nno attempt has started yet\n");
    return kExitOk;
  }
  for (const Json& a : attempts) {
    if (only && a.value("attempt", int64_t(0)) != only) continue;
    std::string worker = Str(a, "worker_name").empty() ? Str(a, "worker") : Str(a, "worker_name");
    std::string end = Str(a, "status");
    if (!Str(a, "exit_code").empty()) end += ", exit " + Str(a, "exit_code");
    if (!Str(a, "error").empty() && Str(a, "error") != "exit " + Str(a, "exit_code"))
      end += ", " + Str(a, "error");
    std::printf("\nattempt %s on %s: %s (%s .. %s)\n", Str(a, "attempt").c_str(),
                worker.empty() ? "?" : worker.c_str(), end.c_str(),
                Time(Str(a, "assigned_at")).c_str(),
                Str(a, "finished_at").empty() ? "now" : Time(Str(a, "finished_at")).c_str());
    std::string tail = Str(a, "stderr_tail");
    if (tail.empty()) {
      std::printf("  (nothing on stderr%s)\n", Str(a, "finished_at").empty() ? " yet" : "");
      continue;
    }
    std::printf("--- stderr (the last %zu bytes the worker kept) ---\n%s%s", tail.size(),
                tail.c_str(), tail.back() == '\n' ? "" : "\n");
  }
  for (const Json& art : r.value("artifacts", Json::array()))
    if (Str(art, "kind") == "log")
      std::printf("\nfull output of attempt %s: headlab artifacts %s --get %s/%s -o %s\n",
                  Str(art, "attempt").c_str(), Str(r, "id").c_str(), Str(art, "attempt").c_str(),
                  Str(art, "seq").c_str(), "output.log");
  return kExitOk;
}

}  // namespace headlab
