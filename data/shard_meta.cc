// meta.json of token shards: serialisation and checks.
#include "data/shard_meta.h"

#include <sys/stat.h>
#include <unistd.h>

#include <type_traits>

#include "common/files.h"

namespace headlab {
namespace {

// Reads field `key` of object `j` into *out when present with the right type.
class MetaReader {
 public:
  MetaReader(const Json& j, const std::string& path) : root_(j), path_(path) {}
  template <typename T>
  void Get(const char* a, const char* b, T* out) {
    if (!status_.ok()) return;
    const Json* node = &root_;
    std::string where = "$";
    for (const char* k : {a, b}) {
      if (!k) break;
      where += std::string(".") + k;
      if (!node->is_object() || !node->contains(k)) {
        status_ = Status::Corruption(path_ + ": " + where + ": missing");
        return;
      }
      node = &(*node)[k];
    }
    bool ok = std::is_same<T, std::string>::value ? node->is_string()
              : std::is_floating_point<T>::value  ? node->is_number()
                                                  : node->is_number_integer();
    if (!ok) {
      status_ = Status::Corruption(path_ + ": " + where + ": wrong type (" +
                                   node->dump().substr(0, 40) + ")");
      return;
    }
    *out = node->get<T>();
  }
  const Status& status() const { return status_; }

 private:
  const Json& root_;
  const std::string& path_;
  Status status_;
};

}  // namespace

std::string DefaultCorpusDir(const std::string& path) {
  if (!path.empty()) return path;
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = n > 0 ? std::string(self, size_t(n)) : std::string(".");
  dir.resize(dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
  return (dir.empty() ? "." : dir) + "/" + kDefaultCorpusSubdir;
}

std::string DtypeForVocab(int64_t vocab) { return vocab <= 65536 ? "uint16" : "uint32"; }

Json ShardMetaToJson(const ShardMeta& m) {
  return {{"format", kShardFormat},
          {"dtype", m.dtype},
          {"tokenizer",
           {{"kind", m.tokenizer_kind},
            {"source", m.tokenizer_source},
            {"sha256", m.tokenizer_sha256},
            {"vocab", m.vocab},
            {"eot", m.eot},
            {"pattern", m.tokenizer_pattern}}},
          {"train", {{"tokens", m.train.tokens}, {"documents", m.train.documents}}},
          {"val", {{"tokens", m.val.tokens}, {"documents", m.val.documents}}},
          {"split", {{"by", m.split_by}, {"val_fraction", m.val_fraction}}},
          {"corpus",
           {{"format", m.corpus_format},
            {"inputs", m.corpus_inputs},
            {"files", m.corpus_files},
            {"documents", m.corpus_documents},
            {"skipped", m.corpus_skipped},
            {"duplicates", m.corpus_duplicates},
            {"bytes", m.corpus_bytes},
            {"sha256", m.corpus_sha256}}},
          {"sources", m.sources},
          {"created_by", "headlab data prepare"},
          {"created_at", m.created_at}};
}

StatusOr<ShardMeta> ShardMetaFromJson(const std::string& text, const std::string& path) {
  StatusOr<Json> parsed = ParseJson(text, path);
  if (!parsed.ok()) return Status::Corruption(parsed.status().message());
  const Json& j = parsed.value();
  ShardMeta m;
  std::string format;
  MetaReader r(j, path);
  r.Get("format", nullptr, &format);
  if (r.status().ok() && format != kShardFormat)
    return Status::Corruption(path + ": $.format: expected \"" + kShardFormat + "\", got \"" +
                              format + "\"");
  r.Get("dtype", nullptr, &m.dtype);
  r.Get("tokenizer", "kind", &m.tokenizer_kind);
  r.Get("tokenizer", "source", &m.tokenizer_source);
  r.Get("tokenizer", "sha256", &m.tokenizer_sha256);
  r.Get("tokenizer", "vocab", &m.vocab);
  r.Get("tokenizer", "eot", &m.eot);
  r.Get("tokenizer", "pattern", &m.tokenizer_pattern);
  r.Get("train", "tokens", &m.train.tokens);
  r.Get("train", "documents", &m.train.documents);
  r.Get("val", "tokens", &m.val.tokens);
  r.Get("val", "documents", &m.val.documents);
  r.Get("split", "by", &m.split_by);
  r.Get("split", "val_fraction", &m.val_fraction);
  r.Get("corpus", "format", &m.corpus_format);
  r.Get("corpus", "files", &m.corpus_files);
  r.Get("corpus", "documents", &m.corpus_documents);
  r.Get("corpus", "skipped", &m.corpus_skipped);
  r.Get("corpus", "bytes", &m.corpus_bytes);
  r.Get("corpus", "sha256", &m.corpus_sha256);
  r.Get("created_at", nullptr, &m.created_at);
  if (!r.status().ok()) return r.status();
  if (m.dtype != "uint16" && m.dtype != "uint32")
    return Status::Corruption(path + ": $.dtype: expected \"uint16\" or \"uint32\", got \"" +
                              m.dtype + "\"");
  if (m.vocab < 1 || (m.dtype == "uint16" && m.vocab > 65536))
    return Status::Corruption(path + ": $.tokenizer.vocab: " + std::to_string(m.vocab) +
                              " does not fit " + m.dtype);
  if (m.train.tokens < 0 || m.val.tokens < 0)
    return Status::Corruption(path + ": negative token counts");
  const Json& inputs = j["corpus"].contains("inputs") ? j["corpus"]["inputs"] : Json::array();
  for (const Json& in : inputs)
    if (in.is_string()) m.corpus_inputs.push_back(in.get<std::string>());
  // Optional (shards prepared before these fields existed lack them).
  if (j["corpus"].contains("duplicates") && j["corpus"]["duplicates"].is_number_integer())
    m.corpus_duplicates = j["corpus"]["duplicates"].get<int64_t>();
  if (j.contains("sources") && j["sources"].is_array()) m.sources = j["sources"];
  return m;
}

StatusOr<ShardMeta> ReadShardMeta(const std::string& dir) {
  const std::string path = dir + "/meta.json";
  if (!PathExists(path)) return Status::NotFound(path + ": no such file");
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  StatusOr<ShardMeta> m = ShardMetaFromJson(text.value(), path);
  if (m.ok() && m->tokenizer_kind != "byte" && !m->tokenizer_source.empty() &&
      m->tokenizer_source.front() != '/')
    m->tokenizer_source = dir + "/" + m->tokenizer_source;
  return m;
}

Status CheckShardSize(const std::string& dir, const std::string& split, const ShardMeta& m) {
  const std::string path = dir + "/" + split + ".bin";
  const ShardSplitInfo& info = split == "train" ? m.train : m.val;
  const int64_t want = info.tokens * m.token_bytes();
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::NotFound(path + ": missing; " + dir + "/meta.json promises " +
                            std::to_string(info.tokens) + " " + m.dtype + " tokens (" +
                            std::to_string(want) + " bytes)");
  if (int64_t(st.st_size) != want)
    return Status::Corruption(path + ": " + std::to_string(st.st_size) + " bytes, but " + dir +
                              "/meta.json promises " + std::to_string(info.tokens) + " " + m.dtype +
                              " tokens (" + std::to_string(want) +
                              " bytes): truncated or replaced; run `headlab data prepare` again");
  return Status::Ok();
}

}  // namespace headlab
