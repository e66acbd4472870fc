// Write commands on runs: `cancel run RUN`, `cancel experiment EXP` (or --experiment EXP),
// `retry RUN`.
#include <cstdio>

#include "cli/commands.h"
#include "cli/resolve.h"
#include "cli/table.h"

namespace headlab {

namespace {

// POSTs to `target` and prints `done` (or the JSON response with --json).
int Post(const CliContext& ctx, const ParsedArgs& args, const std::string& target,
         const std::string& done) {
  Json empty = Json::object();
  auto resp = ctx.Client().Call("POST", target, &empty);
  if (!resp.ok()) return Fail(ctx, resp.status());
  if (args.Has("--json")) {
    PrintJson(resp.value());
    return kExitOk;
  }
  std::string detail;
  if (resp->is_object())
    for (auto& [k, v] : resp->items())
      if (v.is_primitive()) detail += (detail.empty() ? "" : ", ") + k + " " + Cell(v);
  std::printf("%s%s\n", done.c_str(), detail.empty() ? "" : (" (" + detail + ")").c_str());
  return kExitOk;
}

}  // namespace

int RunCancel(const CliContext& ctx, const ParsedArgs& args) {
  Target target;
  if (args.Has("--experiment")) {
    if (!args.positional().empty())
      return Fail(ctx, Status::InvalidArgument("give either TARGET or --experiment EXP, not both"));
    auto exp = ResolveExperiment(ctx, args.Get("--experiment"));
    if (!exp.ok()) return Fail(ctx, exp.status());
    target.kind = Target::Kind::kExperiment;
    target.id = exp.value();
  } else {
    size_t used = 0;
    auto t = ParseTarget(ctx, args.positional(), &used);
    if (!t.ok()) return Fail(ctx, t.status());
    if (used != args.positional().size())
      return Fail(
          ctx, Status::InvalidArgument("unexpected argument \"" + args.positional()[used] + "\""));
    target = t.value();
  }
  std::string id = std::to_string(target.id);
  if (target.kind == Target::Kind::kExperiment)
    return Post(ctx, args, target.ApiPath() + "/cancel",
                "experiment " + id + ": cancel requested for its queued and running runs");
  return Post(ctx, args, target.ApiPath() + "/cancel", "run " + id + ": cancel requested");
}

int RunRetry(const CliContext& ctx, const ParsedArgs& args) {
  auto run = ParseId(args.positional()[0], "run");
  if (!run.ok()) return Fail(ctx, run.status());
  std::string id = std::to_string(run.value());
  return Post(ctx, args, "/api/v1/runs/" + id + "/retry", "run " + id + ": requeued");
}

}  // namespace headlab
