// The prepare pipeline: list, read, tokenize, split, write, rename.
#include "data/prepare.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <set>
#include <utility>

#include "common/files.h"
#include "common/json.h"
#include "common/sha256.h"
#include "data/tokenizer.h"

namespace headlab {
namespace {

uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// One split's output file: buffered little-endian tokens.
class ShardFile {
 public:
  ShardFile(std::string path, int token_bytes) : path_(std::move(path)), width_(token_bytes) {}
  ~ShardFile() {
    if (f_) std::fclose(f_);
  }
  Status Open() {
    f_ = std::fopen(path_.c_str(), "wb+");
    if (!f_) return Status::IoError(path_ + ": cannot create (" + std::strerror(errno) + ")");
    return Status::Ok();
  }
  Status Append(const std::vector<int32_t>& ids) {
    buf_.clear();
    for (int32_t id : ids)
      for (int b = 0; b < width_; ++b) buf_.push_back(char((uint32_t(id) >> (8 * b)) & 0xFF));
    if (std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size())
      return Status::IoError(path_ + ": write failed (" + std::strerror(errno) + ")");
    tokens_ += int64_t(ids.size());
    return Status::Ok();
  }
  // Moves the last `n` tokens of this file to the end of `to`.
  Status MoveTail(int64_t n, ShardFile* to) {
    HEADLAB_RETURN_IF_ERROR(Flush());
    std::string tail(size_t(n * width_), '\0');
    const off_t at = off_t((tokens_ - n) * width_);
    if (::pread(::fileno(f_), tail.data(), tail.size(), at) != ssize_t(tail.size()))
      return Status::IoError(path_ + ": read back failed");
    if (std::fwrite(tail.data(), 1, tail.size(), to->f_) != tail.size())
      return Status::IoError(to->path_ + ": write failed");
    to->tokens_ += n;
    if (::ftruncate(::fileno(f_), at) != 0) return Status::IoError(path_ + ": truncate failed");
    std::fseek(f_, 0, SEEK_END);
    tokens_ -= n;
    return Status::Ok();
  }
  Status Flush() {
    if (std::fflush(f_) != 0) return Status::IoError(path_ + ": flush failed");
    return Status::Ok();
  }
  Status Close() {
    HEADLAB_RETURN_IF_ERROR(Flush());
    if (::fsync(::fileno(f_)) != 0) return Status::IoError(path_ + ": fsync failed");
    int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) return Status::IoError(path_ + ": close failed");
    return Status::Ok();
  }
  int64_t tokens() const { return tokens_; }

 private:
  std::string path_;
  int width_;
  FILE* f_ = nullptr;
  std::string buf_;
  int64_t tokens_ = 0;
};

// Removes the partial folder unless released.
class PartialDir {
 public:
  explicit PartialDir(std::string p) : path_(std::move(p)) {}
  ~PartialDir() {
    if (!path_.empty()) RemoveTree(path_);
  }
  void Release() { path_.clear(); }

 private:
  std::string path_;
};

bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsEmptyDir(const std::string& p) {
  StatusOr<std::vector<std::string>> listed = ListInputFiles({p});
  return !listed.ok();  // "matches no file"
}

}  // namespace

Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::Ok();
  int rc = ::nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p); }, 16,
      FTW_DEPTH | FTW_PHYS);
  if (rc != 0) return Status::IoError(path + ": cannot remove (" + std::strerror(errno) + ")");
  return Status::Ok();
}

StatusOr<ShardMeta> PrepareShards(const PrepareOptions& o,
                                  const std::function<void(const PrepareProgress&)>& on_progress) {
  if (o.out_dir.empty()) return Status::InvalidArgument("--out: expected the output folder");
  if (!(o.val_fraction > 0 && o.val_fraction <= 0.5))
    return Status::InvalidArgument("--val-fraction: expected a number in (0, 0.5], got " +
                                   std::to_string(o.val_fraction));
  HEADLAB_RETURN_IF_ERROR(CheckDocumentFormat(o.format));
  if (PathExists(o.out_dir)) {
    if (!o.force)
      return Status::InvalidArgument(o.out_dir + ": already exists (--force replaces it)");
    if (!IsDir(o.out_dir) || (!PathExists(o.out_dir + "/meta.json") && !IsEmptyDir(o.out_dir)))
      return Status::InvalidArgument(o.out_dir +
                                     ": exists and is not a shard folder (no meta.json); "
                                     "refusing to replace it");
  }
  // An absolute spec: meta.json's tokenizer.source must resolve wherever the shards are read.
  std::string spec = o.tokenizer;
  if (spec != "byte") {
    char* real = ::realpath(spec.c_str(), nullptr);
    if (real) {
      spec = real;
      std::free(real);
    }
  }
  StatusOr<Tokenizer> tok = Tokenizer::Load(spec);
  if (!tok.ok()) return tok.status();
  // (file, format) in input order; an input may name its own format ("brown:DIR").
  std::vector<std::pair<std::string, DocumentFormat>> files;
  std::string formats;
  for (const std::string& input : o.inputs) {
    DocumentFormat f = o.format;
    std::string path = input;
    for (const char* name : {"text", "jsonl", "brown"}) {
      const std::string prefix = std::string(name) + ":";
      if (input.rfind(prefix, 0) == 0) {
        f.format = name;
        path = input.substr(prefix.size());
      }
    }
    StatusOr<std::vector<std::string>> listed = ListInputFiles({path});
    if (!listed.ok()) return listed.status();
    for (const std::string& file : listed.value()) files.push_back({file, f});
    if (formats.find(f.format) == std::string::npos)
      formats += (formats.empty() ? "" : "+") + f.format;
  }

  PrepareProgress progress;
  progress.total_bytes = 0;
  for (const auto& [f, format] : files) {
    struct stat st;
    if (f == "-" || ::stat(f.c_str(), &st) != 0) {
      progress.total_bytes = -1;
      break;
    }
    progress.total_bytes += int64_t(st.st_size);
  }

  ShardMeta m;
  m.dtype = DtypeForVocab(tok->vocab_size());
  m.tokenizer_kind = tok->kind();
  m.tokenizer_source = tok->source();
  m.tokenizer_sha256 = tok->sha256();
  m.tokenizer_pattern = tok->pattern();
  m.vocab = tok->vocab_size();
  m.eot = tok->eot();
  m.val_fraction = o.val_fraction;
  m.corpus_format = formats;
  m.corpus_inputs = o.inputs;
  m.corpus_files = int64_t(files.size());
  if (!o.sources_file.empty()) {
    StatusOr<std::string> text = ReadFile(o.sources_file);
    if (!text.ok()) return Status::InvalidArgument("--sources: " + text.status().message());
    StatusOr<Json> sources = ParseJson(text.value(), o.sources_file);
    if (!sources.ok()) return Status::InvalidArgument(sources.status().message());
    if (!sources->is_array())
      return Status::InvalidArgument(o.sources_file +
                                     ": $: expected an array of {\"name\", \"licence\"} objects");
    for (size_t i = 0; i < sources->size(); ++i) {
      const Json& s = (*sources)[i];
      for (const char* field : {"name", "licence"})
        if (!s.is_object() || !s.contains(field) || !s[field].is_string() ||
            s[field].get<std::string>().empty())
          return Status::InvalidArgument(o.sources_file + ": $[" + std::to_string(i) + "]." +
                                         field + ": expected a non-empty string");
    }
    m.sources = sources.value();
  }

  const std::string tmp = o.out_dir + ".partial-" + std::to_string(::getpid());
  HEADLAB_RETURN_IF_ERROR(RemoveTree(tmp));
  HEADLAB_RETURN_IF_ERROR(MakeDirs(tmp));
  PartialDir cleanup(tmp);
  ShardFile train(tmp + "/train.bin", m.token_bytes()), val(tmp + "/val.bin", m.token_bytes());
  HEADLAB_RETURN_IF_ERROR(train.Open());
  HEADLAB_RETURN_IF_ERROR(val.Open());

  Sha256 corpus_hash;
  const uint64_t val_below = uint64_t(o.val_fraction * 18446744073709551616.0);  // * 2^64
  std::vector<int32_t> ids;
  std::set<std::pair<uint64_t, uint64_t>> seen;  // (FNV-1a-64, length) of kept documents (dedup)
  int64_t done_before = 0;
  for (const auto& [f, format] : files) {
    int64_t file_bytes = 0;
    auto on_doc = [&](std::string_view doc) -> Status {
      if (doc.empty()) {
        ++m.corpus_skipped;
        return Status::Ok();
      }
      uint64_t len = doc.size();
      const uint64_t fnv = Fnv1a64(doc);
      if (o.dedup && !seen.insert({fnv, len}).second) {
        ++m.corpus_duplicates;
        return Status::Ok();
      }
      corpus_hash.Update(&len, sizeof len);  // length-prefixed: boundaries count
      corpus_hash.Update(doc.data(), doc.size());
      m.corpus_bytes += int64_t(doc.size());
      ++m.corpus_documents;
      ids.clear();
      if (m.eot >= 0) ids.push_back(m.eot);
      tok->Encode(doc, &ids);
      const bool to_val = fnv < val_below;
      HEADLAB_RETURN_IF_ERROR((to_val ? val : train).Append(ids));
      ++(to_val ? m.val : m.train).documents;
      progress.tokens += int64_t(ids.size());
      progress.documents = m.corpus_documents;
      return Status::Ok();
    };
    auto on_bytes = [&](int64_t b) {
      file_bytes = b;
      progress.bytes = done_before + b;
      if (on_progress) on_progress(progress);
    };
    HEADLAB_RETURN_IF_ERROR(ReadDocuments(f, format, on_doc, on_bytes, &m.corpus_skipped));
    done_before += file_bytes;
  }
  const int64_t total = train.tokens() + val.tokens();
  if (total == 0)
    return Status::InvalidArgument("no text in the inputs (" + std::to_string(m.corpus_skipped) +
                                   " empty or binary documents skipped)");
  if (m.val.documents == 0 || m.train.documents == 0) {
    // Too few documents for a document split: hold out the stream's tail instead.
    m.split_by = "tokens";
    if (m.train.documents == 0) {
      HEADLAB_RETURN_IF_ERROR(val.MoveTail(val.tokens(), &train));
      m.train.documents = m.val.documents;
      m.val.documents = 0;
    }
    const int64_t n_val = std::max<int64_t>(1, int64_t(double(total) * o.val_fraction));
    if (n_val >= total)
      return Status::InvalidArgument("the inputs hold only " + std::to_string(total) +
                                     " tokens: too few to split");
    HEADLAB_RETURN_IF_ERROR(train.MoveTail(n_val, &val));
  }
  m.train.tokens = train.tokens();
  m.val.tokens = val.tokens();
  m.corpus_sha256 = corpus_hash.HexDigest();
  m.created_at = NowIso();
  HEADLAB_RETURN_IF_ERROR(train.Close());
  HEADLAB_RETURN_IF_ERROR(val.Close());
  if (m.tokenizer_kind != "byte") {
    StatusOr<std::string> copied =
        CopyTokenizerFiles(m.tokenizer_source, tmp + "/" + kShardTokenizerDir);
    if (!copied.ok()) return copied.status();
    m.tokenizer_source = std::string(kShardTokenizerDir) + "/" + copied.value();
  }
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(tmp + "/meta.json", ShardMetaToJson(m).dump(2) + "\n"));

  // Swap the finished folder in: OUT is either absent, the old shards or the new ones.
  std::string old;
  if (PathExists(o.out_dir)) {
    old = o.out_dir + ".old-" + std::to_string(::getpid());
    if (::rename(o.out_dir.c_str(), old.c_str()) != 0)
      return Status::IoError(o.out_dir + ": cannot move aside (" + std::strerror(errno) + ")");
  }
  if (::rename(tmp.c_str(), o.out_dir.c_str()) != 0)
    return Status::IoError(o.out_dir + ": cannot rename " + tmp + " into place (" +
                           std::strerror(errno) + ")");
  cleanup.Release();
  if (!old.empty()) HEADLAB_RETURN_IF_ERROR(RemoveTree(old));
  return m;
}

}  // namespace headlab
