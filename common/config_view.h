// What of a run config a person needs to see: a full config has some 150 keys, most of
// them defaults of methods the run does not use. Used by `headlab show`, the run page and
// the runs tables (the keys that vary across an experiment's grid).
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace headlab {

// Returns the sections (first key component) that describe how the run works: the ones
// its kind reads ("train" and "model" for training kinds, "command" and "params" for a
// command run, "bench" for bench-*, ...), those of the methods it turns on (saf.* when
// saf.method is not "none", aah.* when aah.regime is not "off": MethodSchema::on_key),
// parent.* for a continuation and pair.* for a paired leg.
std::vector<std::string> ActiveSections(const Json& config);

// Returns the flattened {"dotted.key": value} of `config` (a complete run config) that is
// worth showing: "kind", "seed", every key of an ActiveSections section, and any other key
// whose value differs from its default.
Json NotableConfig(const Json& config);

// Returns the dotted config keys that a grid (after --set) varies: its axes' keys, then
// every key an arm overrides, in that order, without repeats.
std::vector<std::string> GridVaryingKeys(const Json& grid);

}  // namespace headlab
