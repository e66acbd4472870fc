// `headlab diff RUN RUN`: the config keys (and summary metrics) that differ.
#include "cli/diff.h"

#include <cstdio>
#include <set>

#include "cli/commands.h"
#include "cli/table.h"

namespace headlab {

std::vector<KeyDiff> DiffObjects(const Json& a, const Json& b) {
  const Json fa = FlattenObject(a.is_object() ? a : Json::object());
  const Json fb = FlattenObject(b.is_object() ? b : Json::object());
  std::set<std::string> keys;
  for (auto& [k, v] : fa.items()) keys.insert(k);
  for (auto& [k, v] : fb.items()) keys.insert(k);
  std::vector<KeyDiff> out;
  for (const std::string& k : keys) {
    Json va = fa.contains(k) ? fa[k] : Json(), vb = fb.contains(k) ? fb[k] : Json();
    if (va != vb) out.push_back({k, va, vb});
  }
  return out;
}

namespace {

Json DiffJson(const std::vector<KeyDiff>& diffs) {
  Json out = Json::array();
  for (const KeyDiff& d : diffs) out.push_back({{"key", d.key}, {"a", d.a}, {"b", d.b}});
  return out;
}

void PrintDiff(const char* title, const std::vector<KeyDiff>& diffs, const std::string& a,
               const std::string& b, const char* same) {
  if (diffs.empty()) {
    std::printf("%s: %s\n", title, same);
    return;
  }
  std::vector<TableRow> rows;
  for (const KeyDiff& d : diffs)
    rows.push_back({d.key, d.a.is_null() ? "-" : KeyedCell(d.key, d.a),
                    d.b.is_null() ? "-" : KeyedCell(d.key, d.b)});
  std::printf("%s (%zu differ)\n%s", title, diffs.size(),
              FormatTable({"key", "run " + a, "run " + b}, rows).c_str());
}

}  // namespace

int RunDiff(const CliContext& ctx, const ParsedArgs& args) {
  Json runs[2];
  std::string ids[2];
  for (int i = 0; i < 2; ++i) {
    auto id = ParseId(args.positional()[size_t(i)], "run");
    if (!id.ok()) return Fail(ctx, id.status());
    ids[i] = std::to_string(*id);
    auto r = ctx.Client().Call("GET", "/api/v1/runs/" + ids[i]);
    if (!r.ok()) return Fail(ctx, r.status());
    runs[i] = std::move(r.value());
  }
  auto config =
      DiffObjects(runs[0].value("config", Json::object()), runs[1].value("config", Json::object()));
  auto summary = DiffObjects(runs[0].value("summary", Json::object()),
                             runs[1].value("summary", Json::object()));
  if (args.Has("--json")) {
    PrintJson({{"a", runs[0].value("id", Json())},
               {"b", runs[1].value("id", Json())},
               {"config", DiffJson(config)},
               {"summary", DiffJson(summary)}});
    return kExitOk;
  }
  for (int i = 0; i < 2; ++i)
    std::printf("run %s: experiment %s (%s), arm %s, %s\n", ids[i].c_str(),
                Cell(runs[i].value("experiment_id", Json())).c_str(),
                Cell(runs[i].value("experiment_name", Json())).c_str(),
                Cell(runs[i].value("arm", Json())).c_str(),
                Cell(runs[i].value("status", Json())).c_str());
  std::printf("\n");
  PrintDiff("config", config, ids[0], ids[1], "identical");
  std::printf("\n");
  PrintDiff("summary metrics", summary, ids[0], ids[1], "identical (or none reported)");
  return kExitOk;
}

}  // namespace headlab
