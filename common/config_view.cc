// Notable config keys and a grid's varying keys.
#include "common/config_view.h"

#include <algorithm>

#include "common/method_schema.h"
#include "common/run_config.h"

namespace headlab {
namespace {

std::string Str(const Json& config, const char* section, const char* key) {
  auto s = config.find(section);
  if (s == config.end() || !s->is_object()) return "";
  auto k = s->find(key);
  return k != s->end() && k->is_string() ? k->get<std::string>() : "";
}

int64_t Int(const Json& config, const char* section, const char* key) {
  auto s = config.find(section);
  if (s == config.end() || !s->is_object()) return 0;
  auto k = s->find(key);
  return k != s->end() && k->is_number() ? k->get<int64_t>() : 0;
}

void Add(std::vector<std::string>* out, const std::string& s) {
  if (std::find(out->begin(), out->end(), s) == out->end()) out->push_back(s);
}

void FlattenInto(const Json& v, const std::string& prefix, Json* out) {
  if (v.is_object()) {
    for (auto& [k, child] : v.items())
      FlattenInto(child, prefix.empty() ? k : prefix + "." + k, out);
  } else {
    (*out)[prefix] = v;
  }
}

}  // namespace

std::vector<std::string> ActiveSections(const Json& config) {
  std::vector<std::string> out;
  const std::string kind = config.value("kind", "train");
  if (kind == "command") {
    Add(&out, "command");
    Add(&out, kParamsSection);
  } else if (kind == "noop") {
    Add(&out, "noop");
  } else {
    Add(&out, "model");
    Add(&out, "train");
    if (kind.rfind("bench-", 0) == 0) Add(&out, "bench");
    if (kind == "mqar" || kind == "passkey" || kind == "flops") Add(&out, kind);
  }
  for (const MethodSchema& m : MethodSchemas()) {
    const std::string on = Str(config, m.section.c_str(), m.on_key.c_str());
    if (!on.empty() && on != m.off_value) Add(&out, m.section);
  }
  if (Int(config, "parent", "run") != 0) Add(&out, "parent");
  if (!Str(config, "pair", "group").empty()) Add(&out, "pair");
  return out;
}

Json NotableConfig(const Json& config) {
  Json flat = Json::object(), defaults = Json::object(), out = Json::object();
  FlattenInto(config, "", &flat);
  FlattenInto(DefaultRunConfig(), "", &defaults);
  const std::vector<std::string> active = ActiveSections(config);
  for (auto& [key, value] : flat.items()) {
    const std::string section = key.substr(0, key.find('.'));
    const bool always = key == "kind" || key == "seed" ||
                        std::find(active.begin(), active.end(), section) != active.end();
    auto d = defaults.find(key);
    if (always || d == defaults.end() || *d != value) out[key] = value;
  }
  return out;
}

std::vector<std::string> GridVaryingKeys(const Json& grid) {
  std::vector<std::string> out;
  if (!grid.is_object()) return out;
  auto axes = grid.find("axes");
  if (axes != grid.end() && axes->is_object())
    for (auto& [k, v] : axes->items()) Add(&out, k);
  auto arms = grid.find("arms");
  if (arms != grid.end() && arms->is_object())
    for (auto& [arm, overrides] : arms->items()) {
      Json flat = Json::object();
      FlattenInto(overrides, "", &flat);
      for (auto& [k, v] : flat.items()) Add(&out, k);
    }
  return out;
}

}  // namespace headlab
