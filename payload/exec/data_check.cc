// Data/model tokenizer agreement and data provenance.
#include "payload/exec/data_check.h"

#include "common/files.h"
#include "common/log.h"
#include "data/tokenizer.h"

namespace headlab {
namespace {

bool HasTokenizerFiles(const std::string& dir) {
  return PathExists(dir + "/tokenizer.json") || PathExists(dir + "/vocab.json") ||
         PathExists(dir + "/encoder.json");
}

}  // namespace

Status CheckDataFitsModel(const Dataset& d, const ExecConfig& c) {
  const std::string& model_dir = c.model.init_from;
  if (model_dir.empty()) return Status::Ok();
  const bool byte_data = c.data.source == "builtin";
  if (!byte_data && !d.has_meta) {
    LogWarn(d.path + ": no meta.json, so the shards' tokenizer cannot be checked against " +
            model_dir);
    return Status::Ok();
  }
  const std::string data_sha = byte_data ? Tokenizer::Bytes().sha256() : d.meta.tokenizer_sha256;
  const std::string data_name =
      byte_data ? std::string("the builtin corpus (byte-level, 256 tokens)")
                : d.path + "/meta.json (" + d.meta.tokenizer_kind + " from " +
                      d.meta.tokenizer_source + ", " + std::to_string(d.meta.vocab) +
                      " tokens, fingerprint " + d.meta.tokenizer_sha256.substr(0, 12) + ")";
  const std::string fix =
      "; prepare shards with the model's tokenizer: headlab data prepare INPUT --tokenizer " +
      model_dir + " --out DIR, then data.source \"shards\" and data.path DIR";
  if (HasTokenizerFiles(model_dir)) {
    StatusOr<Tokenizer> tok = Tokenizer::Load(model_dir);
    if (!tok.ok()) return tok.status();
    if (tok->sha256() != data_sha)
      return Status::InvalidArgument("tokenizer mismatch: " + data_name + " vs the model's " +
                                     tok->source() + " (" + tok->kind() + ", " +
                                     std::to_string(tok->vocab_size()) + " tokens, fingerprint " +
                                     tok->sha256().substr(0, 12) + ")" + fix);
    return Status::Ok();
  }
  if (byte_data && c.model.vocab != 256)
    return Status::InvalidArgument("tokenizer mismatch: " + data_name + " for the model at " +
                                   model_dir + ", whose vocabulary has " +
                                   std::to_string(c.model.vocab) + " tokens" + fix);
  return Status::Ok();
}

Json DatasetProvenance(const Dataset& d, const std::string& source) {
  Json p = Json::object();
  if (source == "builtin") {
    p["dataset_tokenizer"] = "byte";
    p["dataset_tokenizer_sha256"] = Tokenizer::Bytes().sha256();
  } else if (d.has_meta) {
    p["dataset_tokenizer"] = d.meta.tokenizer_kind;
    p["dataset_tokenizer_source"] = d.meta.tokenizer_source;
    p["dataset_tokenizer_sha256"] = d.meta.tokenizer_sha256;
    p["corpus_sha256"] = d.meta.corpus_sha256;
    p["dataset_documents"] = d.meta.train.documents + d.meta.val.documents;
  }
  return p;
}

}  // namespace headlab
