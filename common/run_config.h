// The run-config schema (schema/grid.md, "Run config"): every key with its type, range and
// default, defined once: the core sections in run_config.cc, each method's keys in
// payload/methods/<m>/<m>_schema.cc (docs/DESIGN.md, "Config keys").
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

// The allowed names of the core keys that the payload parses into enums, in the enums'
// order: one array each, read by the schema (run_config.cc) and by the parser.
inline constexpr const char* kAllreduceDtypeNames[] = {"fp32",
                                                       "bf16"};  // ReduceDtype, grad_reducer.h
inline constexpr const char* kAttentionModeNames[] = {"auto", "fused",
                                                      "dense"};  // AttentionMode, attention_cuda.h
// train.precision takes "auto" (bf16 on CUDA, fp32 on the CPU) or one of these.
inline constexpr const char* kPrecisionNames[] = {"fp32", "bf16",
                                                  "fp16"};  // Precision, precision.h

// Returns the complete default run config.
Json DefaultRunConfig();

// Returns defaults <- preset <- `config`, validated. Errors are InvalidArgument with the
// message "<file>: <path_prefix>.<key>: expected ..., got ..." (unknown keys, wrong types,
// out-of-range values).
StatusOr<Json> NormalizeRunConfig(const Json& config, const std::string& file,
                                  const std::string& path_prefix = "$");

// Validates the leaves of `config` (nested sections, or dotted keys such as "model.width"
// at the top level) without defaults or cross-field rules, and returns them flattened:
// {"model.width": 256, ...}. Grid bases and arm overrides are partial configs like this.
StatusOr<Json> FlattenRunConfig(const Json& config, const std::string& file,
                                const std::string& path_prefix);

// Returns defaults <- preset <- `flat` (validated leaves from FlattenRunConfig), after the
// cross-field rules (width divisible by heads, ...); errors name `file` and path_prefix.
StatusOr<Json> BuildRunConfig(const Json& flat, const std::string& file,
                              const std::string& path_prefix = "$");

// Returns the JSON pointer of a dotted key ("/model/layers" for "model.layers").
Json::json_pointer RunConfigPointer(const std::string& dotted_key);

// Returns every leaf key in dotted form ("kind", "seed", "model.layers", ...), in schema
// order (the order the CLI uses for export columns).
const std::vector<std::string>& RunConfigKeys();

// The section of free-form parameters ("params.hidden": 64): a command run's own
// hyperparameters, validated only as JSON scalars and hashed like every other key.
inline constexpr const char* kParamsSection = "params";

// Returns true iff `dotted_key` names a leaf of the run config (e.g. "train.lr"), a
// schema key or a params.NAME key (NAME in [A-Za-z0-9_-]{1,64}).
bool IsRunConfigKey(const std::string& dotted_key);
// Returns true iff `dotted_key` is a params.NAME key.
bool IsParamsKey(const std::string& dotted_key);

// Checks one value against the schema entry of `dotted_key` (which must be a known key)
// and returns it in canonical form (integers as integers, numbers as doubles). The error
// is "<file>: <path>: expected ..., got ...".
StatusOr<Json> ValidateRunConfigValue(const std::string& dotted_key, const Json& value,
                                      const std::string& file, const std::string& path);

// Returns "<file>: <path>: unknown config key "K"; did you mean "train.lr"? (every key ...:
// schema/grid.md, "Run config")" for the dotted key K, the suggestion only for a likely typo.
Status UnknownRunConfigKey(const std::string& file, const std::string& path,
                           const std::string& key);

}  // namespace headlab
