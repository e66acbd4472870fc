// `headlab submit FILE`: read the grid, POST it to the coordinator (which expands and
// stores it), or with --dry-run expand it locally with the same ExpandGrid.
#include <sys/stat.h>

#include <cstdio>
#include <map>
#include <set>

#include "cli/commands.h"
#include "cli/table.h"
#include "common/files.h"
#include "common/grid.h"
#include "common/utf8.h"
#include "data/epoch_guard.h"

namespace headlab {

namespace {

StatusOr<std::string> ReadGridFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Status::InvalidArgument(path + ": cannot read the grid file (it is a directory)");
  auto text = ReadFile(path);
  if (!text.ok()) return Status::InvalidArgument(text.status().message());
  return text;
}

// "comparisons ... within each level of train.lr" for a grid with strata keys (common/
// grid.h StrataKeys): a grid that varies an axis pair_by leaves out is not accepted
// without a word.
void PrintStrataNote(const Json& strata) {
  if (!strata.is_array() || strata.empty()) return;
  std::string keys;
  for (const Json& k : strata) keys += (keys.empty() ? "" : ", ") + Cell(k);
  std::printf(
      "note: comparisons (and arm means) are made within each level of %s, which "
      "pair_by does not pair on: never pooled across them\n",
      keys.c_str());
}

// The config keys whose values differ between runs: what tells the runs apart.
std::vector<std::string> VaryingKeys(const std::vector<Json>& flat) {
  std::vector<std::string> keys;
  if (flat.empty()) return keys;
  for (auto& [k, v] : flat[0].items()) {
    for (const Json& f : flat) {
      if (f[k] == v) continue;
      keys.push_back(k);
      break;
    }
  }
  return keys;
}

int DryRun(const CliContext& ctx, const ParsedArgs& args, const std::string& file,
           const std::string& text) {
  auto grid = ExpandGrid(text, file, args.All("--set"));
  if (!grid.ok()) return Fail(ctx, grid.status());
  if (args.Has("--json")) {
    Json configs = Json::array();
    for (const auto& r : grid->runs)
      configs.push_back({{"index", r.index},
                         {"arm", r.arm},
                         {"config_hash", r.config_hash},
                         {"pair_key", r.pair_key},
                         {"config", r.config}});
    PrintJson({{"runs", grid->runs.size()}, {"configs", configs}});
    return kExitOk;
  }
  std::vector<Json> flat;
  for (const auto& r : grid->runs) flat.push_back(FlattenObject(r.config));
  std::vector<std::string> varying = VaryingKeys(flat);
  std::printf("%s: grid \"%s\" expands to %zu runs (%zu arms; nothing submitted)\n", file.c_str(),
              grid->name.c_str(), grid->runs.size(), grid->arms.size());
  std::vector<TableRow> rows;
  for (size_t i = 0; i < grid->runs.size(); ++i) {
    const auto& r = grid->runs[i];
    std::string summary;
    for (const auto& k : varying)
      summary += (summary.empty() ? "" : " ") + k + "=" + Cell(flat[i][k]);
    rows.push_back(
        {std::to_string(r.index), r.arm, r.config_hash.substr(0, 12), r.pair_key, summary});
  }
  std::printf("%s", FormatTable({"#", "arm", "config_hash", "pair", "config"}, rows).c_str());
  PrintStrataNote(Json(StrataKeys(grid->source, grid->pair_by)));
  return kExitOk;
}

// Warns on stderr when the grid's runs would pass over their corpus more than a few times
// (data/epoch_guard.h); a grid that does not expand is left to the error paths below.
void WarnAboutPasses(const std::string& file, const std::string& text, const ParsedArgs& args) {
  auto grid = ExpandGrid(text, file, args.All("--set"));
  if (!grid.ok()) return;
  std::vector<Json> configs;
  for (const auto& r : grid->runs) configs.push_back(r.config);
  for (const std::string& w : EpochWarnings(configs))
    std::fprintf(stderr, "headlab submit: warning: %s: %s\n", file.c_str(), w.c_str());
}

}  // namespace

int RunSubmit(const CliContext& ctx, const ParsedArgs& args) {
  const std::string file = args.positional()[0];
  auto text = ReadGridFile(file);
  if (!text.ok()) return Fail(ctx, text.status());
  // Bytes a JSON string cannot carry are refused here, naming the file (exit 2).
  Status encoding = ValidateGridEncoding(text.value(), file, args.All("--set"));
  if (!encoding.ok()) return Fail(ctx, encoding);
  WarnAboutPasses(file, text.value(), args);
  if (args.Has("--dry-run")) return DryRun(ctx, args, file, text.value());
  Json body = {{"file", EscapeForMessage(file)},
               {"text", text.value()},
               {"sets", args.All("--set")},
               {"rerun", args.Has("--rerun")}};
  auto resp = ctx.Client().Call("POST", "/api/v1/experiments", &body);
  if (!resp.ok()) return Fail(ctx, resp.status());
  const Json& r = resp.value();
  if (!r.is_object() || !r.contains("experiment") || !r.contains("runs"))
    return Fail(ctx, Status::Internal("unexpected response from the coordinator: " + r.dump()));
  if (args.Has("--json")) {
    Json out = {{"experiment", r["experiment"]}, {"runs", r["runs"]}};
    if (r.contains("reused")) out["reused"] = r["reused"];
    std::printf("%s\n", out.dump().c_str());
    return kExitOk;
  }
  std::string exp = Cell(r["experiment"]);
  std::printf("experiment %s: %s runs", exp.c_str(), Cell(r["runs"]).c_str());
  if (r.value("reused", Json(0)) != Json(0))
    std::printf(" (%s reused from earlier experiments)", Cell(r["reused"]).c_str());
  std::printf("\n");
  PrintStrataNote(r.value("strata", Json::array()));
  std::printf("next: headlab wait %s && headlab results %s\n", exp.c_str(), exp.c_str());
  return kExitOk;
}

}  // namespace headlab
