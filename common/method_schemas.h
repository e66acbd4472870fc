// The seam between the run-config schema (run_config.cc) and the methods: each method
// defines its section of run-config keys, and SAF its rules between keys, beside its code in
// payload/methods/<m>/<m>_schema.cc (torch-free; headlab_common compiles them). The schema
// composes the sections through these declarations, so common/ includes nothing of the
// methods, which sit above it. A method's own schema header (names of its enums) includes
// this one.
#pragma once

#include <string>
#include <vector>

#include "common/config_key.h"
#include "common/json.h"
#include "common/status.h"

namespace headlab {

// The prune.* keys in documentation order (payload/methods/pruning/prune_schema.cc).
const std::vector<ConfigKey>& PruneConfigKeys();

namespace aoh {
// The aoh.* keys in documentation order (payload/methods/aoh/aoh_schema.cc).
const std::vector<ConfigKey>& AohConfigKeys();
}  // namespace aoh

namespace saf {
// The saf.* keys in documentation order (payload/methods/saf/saf_schema.cc).
const std::vector<ConfigKey>& SafConfigKeys();
// The rules between saf.* keys, on a merged run config `c` (every key present); errors name
// "<file>: <prefix>.saf.<key>".
Status CheckSafConfig(const Json& c, const std::string& file, const std::string& prefix);
}  // namespace saf

namespace aah {
// The aah.* keys in documentation order (payload/methods/aah/aah_schema.cc).
const std::vector<ConfigKey>& AahConfigKeys();
}  // namespace aah

}  // namespace headlab
