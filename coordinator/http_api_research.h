// The HTTP routes for what researchers add to and take from the database beyond runs and
// results (schema/http_api.md): tags and notes, run search across experiments, and
// artifact files. HttpApi (http_api.cc) tries these after its own routes.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/core.h"
#include "coordinator/db.h"
#include "coordinator/http_api.h"

namespace headlab::coord {

// A write for the loop thread (HttpApi::Write runs it inside a batch).
using WriteFn = std::function<StatusOr<Json>(Core&)>;

// GET routes (`path` split at '/': "api", "v1", ...): GET /runs (search), /runs/ID/artifacts
// and /runs/ID/artifacts/ATTEMPT/SEQ (the file). nullopt when the path is none of these.
std::optional<HttpResponse> ResearchGet(Db* db, const std::vector<std::string>& path,
                                        const std::string& query);

// POST routes /experiments/ID/tags, /runs/ID/tags, /experiments/ID/note, /runs/ID/note:
// the write to run, or the error of a bad id or body. nullopt when the path is none of these.
std::optional<StatusOr<WriteFn>> ResearchWrite(const std::vector<std::string>& path,
                                               const std::string& body);

}  // namespace headlab::coord
