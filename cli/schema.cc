// `headlab schema`: the run-config schema as Markdown or JSON, and the generated blocks of
// the documentation (schema_doc.h) written or checked.
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "cli/schema_doc.h"
#include "common/files.h"
#include "common/run_config_schema.h"
#include "common/source_dir.h"

namespace headlab {
namespace {

Json KeyJson(const ConfigKey& k) {
  Json j = {{"key", k.key}, {"doc", k.doc}};
  switch (k.type) {
    case ConfigKeyType::kInt:
    case ConfigKeyType::kNumber: {
      const bool is_int = k.type == ConfigKeyType::kInt;
      auto number = [is_int](double v) { return is_int ? Json(int64_t(v)) : Json(v); };
      j["type"] = is_int ? "int" : "number";
      j["default"] = number(k.num_default);
      j["min"] = number(k.min);
      j["min_open"] = k.min_open;
      if (!std::isinf(k.max)) j["max"] = number(k.max);  // JSON has no infinity: absent = unbounded
      j["max_open"] = k.max_open;
      break;
    }
    case ConfigKeyType::kString:
      j["type"] = "string";
      j["default"] = k.str_default;
      if (!k.any_string) j["allowed"] = k.allowed;
      break;
  }
  return j;
}

// Writes (or, with `check`, compares) each generated block under `root`; returns the exit code.
int UpdateDocs(const std::string& root, bool check) {
  int rc = kExitOk;
  for (const GeneratedDoc& doc : GeneratedDocs()) {
    const std::string path = root + "/" + doc.path;
    StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) {
      std::fprintf(stderr, "headlab schema: %s\n", text.status().message().c_str());
      return kExitFailed;
    }
    StatusOr<std::string> updated = ReplaceGeneratedBlock(*text, doc.body, path);
    if (!updated.ok()) {
      std::fprintf(stderr, "headlab schema: %s\n", updated.status().message().c_str());
      return kExitFailed;
    }
    if (*updated == *text) continue;
    if (check) {
      std::fprintf(stderr,
                   "headlab schema: %s: the generated key table differs from the schema; run "
                   "`headlab schema --write`\n",
                   path.c_str());
      rc = kExitFailed;
      continue;
    }
    if (Status s = WriteFileAtomic(path, *updated); !s.ok()) {
      std::fprintf(stderr, "headlab schema: %s\n", s.message().c_str());
      return kExitFailed;
    }
    std::printf("wrote %s\n", path.c_str());
  }
  return rc;
}

}  // namespace

int RunSchema(const CliContext&, const ParsedArgs& args) {
  const std::string root = args.Get("--root", SourceDir());
  if (args.Has("--write") || args.Has("--check")) return UpdateDocs(root, args.Has("--check"));
  if (args.Has("--json")) {
    Json keys = Json::array();
    for (const ConfigKey& k : RunConfigSchema()) keys.push_back(KeyJson(k));
    PrintJson(keys);
    return kExitOk;
  }
  std::fputs(RunConfigReference().c_str(), stdout);
  return kExitOk;
}

}  // namespace headlab
