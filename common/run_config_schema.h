// The run-config schema itself, key by key, for those that describe it rather than check a
// config with it (`headlab schema`, cli/schema_doc.h); defined in run_config.cc. Apart from
// run_config.h so that its users alone see ConfigKey.
#pragma once

#include <vector>

#include "common/config_key.h"

namespace headlab {

// Returns every leaf key's ConfigKey in schema order: the core sections with the methods'
// sections spliced in after their anchors (common/method_schema.h).
const std::vector<ConfigKey>& RunConfigSchema();

}  // namespace headlab
