// Tags, notes, run search and artifact files over HTTP.
#include "coordinator/http_api_research.h"

#include "coordinator/annotations.h"
#include "coordinator/artifact_files.h"
#include "coordinator/run_search.h"

namespace headlab::coord {
namespace {

int64_t ParsePositive(const std::string& s) {
  if (s.empty() || s.size() > 15) return 0;
  for (char c : s)
    if (c < '0' || c > '9') return 0;
  return std::strtoll(s.c_str(), nullptr, 10);
}

HttpResponse Render(const StatusOr<Json>& r) {
  HttpResponse out;
  if (r.ok()) {
    out.body = r.value().dump();
    return out;
  }
  out.status = HttpStatusFor(r.status());
  out.body = Json{{"error", r.status().message()}}.dump();
  return out;
}

HttpResponse FileResponse(const StatusOr<ArtifactFile>& f) {
  if (f.ok()) {
    HttpResponse out;
    out.content_type = "application/octet-stream";
    out.body = f.value().bytes;
    return out;
  }
  HttpResponse out = Render(f.status());
  // Too big to send: 413; bytes changed since they were recorded: 409.
  if (f.status().code() == Status::Code::kUnavailable) out.status = 413;
  if (f.status().code() == Status::Code::kCorruption) out.status = 409;
  return out;
}

}  // namespace

std::optional<HttpResponse> ResearchGet(Db* db, const std::vector<std::string>& p,
                                        const std::string& query) {
  if (p.size() == 3 && p[2] == "runs") {
    auto filter = ParseRunFilter(query);
    if (!filter.ok()) return Render(filter.status());
    return Render(SearchRunsView(db, *filter));
  }
  if (p.size() >= 5 && p[2] == "runs" && p[4] == "artifacts") {
    int64_t run = ParsePositive(p[3]);
    if (!run) return Render(Status::InvalidArgument("bad run id '" + p[3] + "'"));
    if (p.size() == 5) return Render(ArtifactsView(db, run));
    if (p.size() == 7) {
      int64_t attempt = ParsePositive(p[5]), seq = p[6] == "0" ? 0 : ParsePositive(p[6]);
      if (!attempt || (!seq && p[6] != "0"))
        return Render(Status::InvalidArgument("expected /runs/ID/artifacts/ATTEMPT/SEQ"));
      return FileResponse(ReadArtifactFile(db, run, attempt, seq));
    }
  }
  return std::nullopt;
}

std::optional<StatusOr<WriteFn>> ResearchWrite(const std::vector<std::string>& p,
                                               const std::string& body) {
  if (p.size() != 5 || (p[4] != "tags" && p[4] != "note") ||
      (p[2] != "experiments" && p[2] != "runs"))
    return std::nullopt;
  const std::string target = p[2] == "runs" ? "run" : "experiment";
  int64_t id = ParsePositive(p[3]);
  if (!id)
    return StatusOr<WriteFn>(Status::InvalidArgument("bad " + target + " id '" + p[3] + "'"));
  auto parsed = ParseJson(body.empty() ? "{}" : body, "request body");
  if (!parsed.ok()) return StatusOr<WriteFn>(parsed.status());
  Json b = *parsed;
  if (p[4] == "tags")
    return StatusOr<WriteFn>(
        WriteFn([target, id, b](Core& c) { return UpdateTags(c.store(), target, id, b); }));
  return StatusOr<WriteFn>(
      WriteFn([target, id, b](Core& c) { return SetNote(c.store(), target, id, b); }));
}

}  // namespace headlab::coord
