// A method's section of the run-config schema (its aoh.* keys, say) and the table of them
// that the schema (run_config.cc) composes. Each method registers its section from its own
// folder (payload/methods/<m>/<m>_schema.cc) at static initialisation, so common/ names no
// method; a program has the methods whose registration objects it links
// (CMakeLists.txt, headlab_link_methods). Torch-free.
#pragma once

#include <string>
#include <vector>

#include "common/config_key.h"
#include "common/json.h"
#include "common/status.h"

namespace headlab {

struct MethodSchema {
  std::string section;  // "aoh": the keys are aoh.*
  // Documentation and export order: the section's keys follow those of section `after` (a
  // core section or another method's); the schema appends sections with no such anchor.
  std::string after;
  // The leaf of the section whose value turns the method on, and the value that leaves it
  // off ("method", "none"): a run that turns it on shows the whole section
  // (common/config_view.h ActiveSections).
  std::string on_key;
  std::string off_value;
  std::vector<ConfigKey> keys;  // documentation order; each key starts with section + "."
  // The rules between the section's keys on a merged run config `c` (every key present),
  // or nullptr; errors name "<file>: <prefix>.<section>.<key>".
  Status (*check)(const Json& c, const std::string& file, const std::string& prefix) = nullptr;
  // The method's README (repository-relative), whose key table is generated from `keys`
  // (headlab schema --markdown); "" for none.
  std::string readme;
};

// Adds `schema` to the table; returns true (for a namespace-scope initialiser). Call only
// from static initialisation: the schema reads the table once, at its first use.
bool RegisterMethodSchema(MethodSchema schema);

// Returns the registered sections ordered by section name (registration order across
// translation units is unspecified).
const std::vector<MethodSchema>& MethodSchemas();

}  // namespace headlab
