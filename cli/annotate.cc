// `headlab tag` and `headlab note`: tags and notes on runs and experiments
// (coordinator/annotations.h). TARGET is "run ID", "experiment EXP" or an experiment name.
#include <cstdio>

#include "cli/commands.h"
#include "cli/resolve.h"
#include "cli/table.h"

namespace headlab {

int RunTag(const CliContext& ctx, const ParsedArgs& args) {
  size_t used = 0;
  auto target = ParseTarget(ctx, args.positional(), &used);
  if (!target.ok()) return Fail(ctx, target.status());
  std::vector<std::string> add(args.positional().begin() + long(used), args.positional().end());
  std::vector<std::string> remove = args.All("--remove");
  Json result;
  if (add.empty() && remove.empty()) {  // list
    auto cur = ctx.Client().Call("GET", target->ApiPath());
    if (!cur.ok()) return Fail(ctx, cur.status());
    result = {{"target", target->Noun()},
              {"id", target->id},
              {"tags", cur->value("tags", Json::array())}};
  } else {
    Json body = {{"add", add}, {"remove", remove}};
    auto r = ctx.Client().Call("POST", target->ApiPath() + "/tags", &body);
    if (!r.ok()) return Fail(ctx, r.status());
    result = r.value();
  }
  if (args.Has("--json")) {
    PrintJson(result);
    return kExitOk;
  }
  std::string tags;
  for (const Json& t : result.value("tags", Json::array()))
    tags += (tags.empty() ? "" : " ") + Cell(t);
  std::printf("%s %lld: %s\n", target->Noun().c_str(), static_cast<long long>(target->id),
              tags.empty() ? "(no tags)" : ("tags " + tags).c_str());
  return kExitOk;
}

int RunNote(const CliContext& ctx, const ParsedArgs& args) {
  size_t used = 0;
  auto target = ParseTarget(ctx, args.positional(), &used);
  if (!target.ok()) return Fail(ctx, target.status());
  const auto& rest = args.positional();
  if (rest.size() > used + 1)
    return Fail(ctx, Status::InvalidArgument("give the note as one argument (quote it), got " +
                                             std::to_string(rest.size() - used) + " words"));
  Json result;
  if (rest.size() == used) {  // show
    auto cur = ctx.Client().Call("GET", target->ApiPath());
    if (!cur.ok()) return Fail(ctx, cur.status());
    result = {{"target", target->Noun()}, {"id", target->id}, {"note", cur->value("note", "")}};
  } else {
    Json body = {{"text", rest[used]}};
    auto r = ctx.Client().Call("POST", target->ApiPath() + "/note", &body);
    if (!r.ok()) return Fail(ctx, r.status());
    result = r.value();
  }
  if (args.Has("--json")) {
    PrintJson(result);
    return kExitOk;
  }
  std::string note = result.value("note", "");
  std::printf("%s %lld: %s\n", target->Noun().c_str(), static_cast<long long>(target->id),
              note.empty() ? "(no note)" : note.c_str());
  return kExitOk;
}

}  // namespace headlab
