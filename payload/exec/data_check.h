// Checks between a run's data and its model before any step, and the data's provenance
// fields. Torch-free.
#pragma once

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/data.h"
#include "payload/exec/exec_config.h"

namespace headlab {

// For an imported model (model.init_from): the data must be tokenized with the model's own
// tokenizer. When the checkpoint folder holds a tokenizer (tokenizer.json, vocab.json +
// merges.txt or encoder.json + vocab.bpe) its fingerprint must equal the shards' (meta.json;
// the builtin corpus is byte-level); without one, byte-level data is refused for a model
// whose vocabulary is not 256. The error names both sides and how to prepare matching
// shards. Fresh models: Ok (LoadShards checks the vocabulary size).
Status CheckDataFitsModel(const Dataset& d, const ExecConfig& c);

// Provenance of the data beyond dataset_sha256: the tokenizer's kind and fingerprint, the
// corpus hash and document counts (prepared shards), or the byte tokenizer (builtin).
Json DatasetProvenance(const Dataset& d, const std::string& source);

}  // namespace headlab
