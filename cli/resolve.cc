// Experiment names and run/experiment targets.
#include "cli/resolve.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "common/suggest.h"

namespace headlab {

namespace {

bool AllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// Grid names match [A-Za-z0-9_.-]{1,64} (schema/grid.md) and do not start with '-'.
bool IsGridName(const std::string& s) {
  if (s.empty() || s.size() > 64 || s[0] == '-') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
      return false;
  return true;
}

}  // namespace

std::string Target::ApiPath() const {
  return std::string(kind == Kind::kRun ? "/api/v1/runs/" : "/api/v1/experiments/") +
         std::to_string(id);
}

StatusOr<int64_t> FindExperiment(const Json& experiments, const std::string& text,
                                 std::string* note) {
  if (AllDigits(text)) return ParseId(text, "experiment");
  if (!experiments.is_array())
    return Status::Internal("unexpected experiments list: " + experiments.dump().substr(0, 200));
  int64_t best = 0;
  int same = 0;
  std::vector<std::string> names;
  for (const Json& e : experiments) {
    if (!e.is_object() || !e["name"].is_string() || !e["id"].is_number_integer()) continue;
    const std::string name = e["name"];
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    if (name != text) continue;
    ++same;
    best = std::max(best, e["id"].get<int64_t>());
  }
  if (best == 0) {
    if (text.empty() || text[0] == '-')
      return Status::InvalidArgument("expected an experiment id or name, got \"" + text + "\"");
    return Status::NotFound("no experiment named \"" + text + "\"" + DidYouMean(text, names) +
                            "; `headlab status` lists the experiments");
  }
  if (note && same > 1)
    *note = "\"" + text + "\" is experiment " + std::to_string(best) + ", the newest of " +
            std::to_string(same) + " with that name";
  return best;
}

StatusOr<int64_t> ResolveExperiment(const CliContext& ctx, const std::string& text) {
  if (AllDigits(text)) return ParseId(text, "experiment");
  if (!IsGridName(text))
    return Status::InvalidArgument(
        "expected an experiment id or a grid name ([A-Za-z0-9_.-]{1,64}), got \"" + text + "\"");
  auto list = ctx.Client().Call("GET", "/api/v1/experiments");
  if (!list.ok()) return list.status();
  std::string note;
  auto id = FindExperiment(list.value(), text, &note);
  if (id.ok() && !note.empty())
    std::fprintf(stderr, "headlab %s: %s\n", ctx.command.c_str(), note.c_str());
  return id;
}

StatusOr<Target> ParseTarget(const CliContext& ctx, const std::vector<std::string>& args,
                             size_t* used) {
  *used = 0;
  if (args.empty())
    return Status::InvalidArgument("missing what to act on: run ID or experiment EXP");
  Target t;
  const std::string& first = args[0];
  if (first == "run" || first == "experiment") {
    if (args.size() < 2)
      return Status::InvalidArgument("missing the " + first + " after \"" + first + "\"");
    *used = 2;
    if (first == "run") {
      auto id = ParseId(args[1], "run");
      if (!id.ok()) return id.status();
      t.id = *id;
      return t;
    }
    auto id = ResolveExperiment(ctx, args[1]);
    if (!id.ok()) return id.status();
    t.kind = Target::Kind::kExperiment;
    t.id = *id;
    return t;
  }
  if (AllDigits(first))
    return Status::InvalidArgument("\"" + first + "\" could be run " + first + " or experiment " +
                                   first + ": say `headlab " + ctx.command + " run " + first +
                                   " ...` or `headlab " + ctx.command + " experiment " + first +
                                   " ...`");
  // Runs have no names: a word names an experiment.
  auto id = ResolveExperiment(ctx, first);
  if (!id.ok()) return id.status();
  *used = 1;
  t.kind = Target::Kind::kExperiment;
  t.id = *id;
  return t;
}

}  // namespace headlab
