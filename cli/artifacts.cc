// `headlab artifacts RUN`: a run's artifacts (checkpoints, logprobs, head maps, logs) with
// their hashes, and `--get ATTEMPT/SEQ` to download one through the API, its SHA-256
// checked against the one recorded when the run reported it.
#include <cstdio>

#include "cli/commands.h"
#include "cli/table.h"
#include "common/files.h"
#include "common/sha256.h"

namespace headlab {

namespace {

std::string Str(const Json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) ? Cell(obj[key]) : "";
}

}  // namespace

int RunArtifacts(const CliContext& ctx, const ParsedArgs& args) {
  auto id = ParseId(args.positional()[0], "run");
  if (!id.ok()) return Fail(ctx, id.status());
  const std::string base = "/api/v1/runs/" + std::to_string(id.value()) + "/artifacts";
  HttpClient client = ctx.Client();
  auto list = client.Call("GET", base);
  if (!list.ok()) return Fail(ctx, list.status());
  if (!list->is_array())
    return Fail(ctx, Status::Internal("unexpected response: " + list->dump().substr(0, 200)));
  if (!args.Has("--get")) {
    if (args.Has("--json")) {
      PrintJson(list.value());
      return kExitOk;
    }
    std::vector<TableRow> rows;
    for (const Json& a : list.value())
      rows.push_back({Str(a, "attempt") + "/" + Str(a, "seq"), Str(a, "kind"), Str(a, "step"),
                      KeyedCell("bytes", a.value("bytes", Json())), Str(a, "sha256").substr(0, 16),
                      !a.value("deleted_at", Json()).is_null() ? "deleted (retention)"
                      : a.value("download", Json()).is_null()  ? "too big for the API"
                                                               : Str(a, "name"),
                      Str(a, "path")});
    if (rows.empty()) {
      std::printf("run %lld has no artifacts\n", static_cast<long long>(id.value()));
      return kExitOk;
    }
    std::printf("%s", FormatTable({"id", "kind", "step", "bytes", "sha256", "download as",
                                   "path on its worker"},
                                  rows)
                          .c_str());
    std::printf("\ndownload one: headlab artifacts %lld --get ID [-o FILE]\n",
                static_cast<long long>(id.value()));
    return kExitOk;
  }
  const std::string want = args.Get("--get");
  const Json* found = nullptr;
  for (const Json& a : list.value())
    if (Str(a, "attempt") + "/" + Str(a, "seq") == want) found = &a;
  if (!found)
    return Fail(ctx, Status::NotFound("run " + std::to_string(id.value()) + " has no artifact " +
                                      want + " (ids are ATTEMPT/SEQ; see headlab artifacts " +
                                      std::to_string(id.value()) + ")"));
  if (!found->value("deleted_at", Json()).is_null())
    return Fail(ctx, Status::NotFound("artifact " + want + " (" + Str(*found, "path") +
                                      ") was deleted at " + Str(*found, "deleted_at") +
                                      " by checkpoint retention"));
  if ((*found)["download"].is_null())
    return Fail(ctx,
                Status::InvalidArgument("artifact " + want + " is too big for the API; it is " +
                                        Str(*found, "path") + " on the worker's host"));
  client.set_timeout(std::chrono::minutes(10));
  auto resp = client.Request("GET", (*found)["download"].get<std::string>());
  if (!resp.ok()) return Fail(ctx, resp.status());
  if (resp->status != 200) {
    auto err = ParseJson(resp->body, "response");
    return Fail(ctx, Status::Unavailable(err.ok() && err->is_object() && (*err)["error"].is_string()
                                             ? (*err)["error"].get<std::string>()
                                             : "HTTP " + std::to_string(resp->status)));
  }
  const std::string sha = Sha256Hex(resp->body);
  if (sha != Str(*found, "sha256"))
    return Fail(ctx, Status::Corruption("artifact " + want + ": the download has SHA-256 " + sha +
                                        ", not the recorded " + Str(*found, "sha256")));
  const std::string out = args.Get("--output", Str(*found, "name"));
  Status st = WriteFileAtomic(out, resp->body);
  if (!st.ok()) return Fail(ctx, st);
  std::printf("wrote %s (%s, %s) to %s; SHA-256 %s verified\n", want.c_str(),
              Str(*found, "kind").c_str(), FormatBytes(double(resp->body.size())).c_str(),
              out.c_str(), sha.c_str());
  return kExitOk;
}

}  // namespace headlab
