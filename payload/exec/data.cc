// Corpus loading, shard mapping and batch sampling.
#include "payload/exec/data.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/files.h"
#include "common/sha256.h"
#include "payload/exec/retrieval_mix.h"

namespace headlab {
namespace {

// Owns a read-only mapping of a whole file.
struct Mapping {
  void* addr = MAP_FAILED;
  size_t len = 0;
  ~Mapping() {
    if (addr != MAP_FAILED) ::munmap(addr, len);
  }
};

// Maps `path` as little-endian tokens of `width` bytes (2 or 4).
StatusOr<TokenSpan> MapTokens(const std::string& path, int64_t vocab, int width, Sha256* hash) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::IoError(path + ": cannot stat");
  }
  const char* type = width == 4 ? "uint32" : "uint16";
  if (st.st_size % width != 0 || st.st_size == 0) {
    ::close(fd);
    return Status::InvalidArgument(path + ": expected a non-empty file of " + type +
                                   " tokens, got " + std::to_string(st.st_size) + " bytes");
  }
  auto map = std::make_shared<Mapping>();
  map->len = size_t(st.st_size);
  map->addr = ::mmap(nullptr, map->len, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map->addr == MAP_FAILED)
    return Status::IoError(path + ": mmap failed (" + std::strerror(errno) + ")");
  TokenSpan span;
  if (width == 4)
    span.data32 = static_cast<const uint32_t*>(map->addr);
  else
    span.data = static_cast<const uint16_t*>(map->addr);
  span.size = int64_t(map->len) / width;
  span.holder = map;
  // One pass both hashes the bytes and checks the token range (an out-of-range token
  // would otherwise index past the embedding table).
  hash->Update(map->addr, map->len);
  int64_t bad = -1;
  if (width == 4) {
    const uint32_t* p = std::find_if(span.data32, span.data32 + span.size,
                                     [vocab](uint32_t t) { return int64_t(t) >= vocab; });
    if (p != span.data32 + span.size) bad = p - span.data32;
  } else {
    const uint16_t* p = std::find_if(span.data, span.data + span.size,
                                     [vocab](uint16_t t) { return int64_t(t) >= vocab; });
    if (p != span.data + span.size) bad = p - span.data;
  }
  if (bad >= 0)
    return Status::InvalidArgument(path + ": token " + std::to_string(span.At(bad)) + " at index " +
                                   std::to_string(bad) + " is >= model.vocab " +
                                   std::to_string(vocab));
  return span;
}

}  // namespace

StatusOr<Dataset> LoadBuiltinCorpus(double val_fraction, const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  if (ec) return Status::IoError(dir + ": cannot list (" + ec.message() + ")");
  if (names.empty()) return Status::NotFound(dir + ": no corpus files");
  std::sort(names.begin(), names.end());
  std::string bytes;
  for (const std::string& n : names) {
    StatusOr<std::string> content = ReadFile(dir + "/" + n);
    if (!content.ok()) return content.status();
    bytes += content.value();
  }
  auto tokens = std::make_shared<std::vector<uint16_t>>(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) (*tokens)[i] = uint8_t(bytes[i]);

  Dataset d;
  d.path = dir;
  d.sha256 = Sha256Hex(bytes);
  d.vocab = 256;
  int64_t n = int64_t(tokens->size());
  int64_t n_val = int64_t(double(n) * val_fraction);
  d.train.holder = d.val.holder = tokens;
  d.train.data = tokens->data();
  d.train.size = n - n_val;
  d.val.data = tokens->data() + (n - n_val);
  d.val.size = n_val;
  return d;
}

StatusOr<Dataset> LoadShards(const std::string& dir, int64_t vocab) {
  Dataset d;
  d.path = dir;
  d.vocab = vocab;
  int width = 2;
  StatusOr<ShardMeta> meta = ReadShardMeta(dir);
  if (meta.ok()) {
    d.has_meta = true;
    d.meta = meta.value();
    width = d.meta.token_bytes();
    if (d.meta.vocab > vocab)
      return Status::InvalidArgument(
          dir + "/meta.json: the shards' tokenizer (" + d.meta.tokenizer_kind + " from " +
          d.meta.tokenizer_source + ") has " + std::to_string(d.meta.vocab) +
          " tokens; model.vocab is " + std::to_string(vocab) +
          " (a model for these shards needs model.vocab >= " + std::to_string(d.meta.vocab) + ")");
    for (const char* split : {"train", "val"})
      HEADLAB_RETURN_IF_ERROR(CheckShardSize(dir, split, d.meta));
  } else if (meta.status().code() != Status::Code::kNotFound) {
    return meta.status();
  }
  Sha256 hash;
  StatusOr<TokenSpan> train = MapTokens(dir + "/train.bin", vocab, width, &hash);
  if (!train.ok()) return train.status();
  StatusOr<TokenSpan> val = MapTokens(dir + "/val.bin", vocab, width, &hash);
  if (!val.ok()) return val.status();
  d.train = train.value();
  d.val = val.value();
  d.sha256 = hash.HexDigest();
  return d;
}

StatusOr<Dataset> LoadDataSource(const std::string& source, const std::string& path,
                                 double val_fraction, int64_t vocab) {
  if (source == "shards") return LoadShards(path, vocab);
  if (source == "corpus") {
    const std::string dir = DefaultCorpusDir(path);
    if (!PathExists(dir + "/meta.json"))
      return Status::NotFound(
          dir +
          "/meta.json: the default corpus is not prepared there; run `make` (it "
          "calls scripts/fetch-data.sh BUILD) or point data.path at prepared shards");
    return LoadShards(dir, vocab);
  }
  return LoadBuiltinCorpus(val_fraction);
}

Status HoldOutCalibration(Dataset* d, double fraction, int64_t context) {
  const int64_t n = d->train.size, n_calib = int64_t(double(n) * fraction);
  if (n_calib <= context || n - n_calib <= context)
    return Status::InvalidArgument(
        "config: $.config.data.calib_fraction: " + std::to_string(fraction) + " of " +
        std::to_string(n) + " training tokens leaves a part of at most model.context = " +
        std::to_string(context) + " tokens");
  d->calib = d->train;  // the same storage, uint16 or uint32, from token n - n_calib on
  if (d->calib.data32)
    d->calib.data32 += n - n_calib;
  else
    d->calib.data += n - n_calib;
  d->calib.size = n_calib;
  d->train.size = n - n_calib;
  return Status::Ok();
}

BatchSampler::BatchSampler(uint64_t seed, int64_t context) : context_(context), rng_(seed) {}

std::vector<int64_t> BatchSampler::NextOffsets(int64_t split_size, int64_t batch) {
  // Valid starts: o + context < split_size, i.e. split_size - context of them. The modulo
  // bias is below 2^-40 for any split that fits in memory.
  uint64_t starts = uint64_t(split_size - context_);
  std::vector<int64_t> offsets(static_cast<size_t>(batch));
  for (int64_t& o : offsets) o = int64_t(rng_() % starts);
  return offsets;
}

void TokenSpan::Append(int64_t begin, int64_t n, std::vector<int64_t>* out) const {
  if (data32)
    out->insert(out->end(), data32 + begin, data32 + begin + n);
  else
    out->insert(out->end(), data + begin, data + begin + n);
}

void BatchSampler::Next(const TokenSpan& split, int64_t batch, std::vector<int64_t>* tokens,
                        const RetrievalMix* mix) {
  std::vector<int64_t> row;
  for (int64_t o : NextOffsets(split.size, batch)) {
    if (mix && mix->enabled() && RetrievalMix::Synthetic(mix->fraction(), rows_)) {
      mix->Fill(rows_, split, &row);
      tokens->insert(tokens->end(), row.begin(), row.end());
    } else {
      split.Append(o, context_ + 1, tokens);
    }
    ++rows_;
  }
}

std::string BatchSampler::SaveState() const {
  std::ostringstream ss;
  ss << rng_ << " rows " << rows_;
  return ss.str();
}

Status BatchSampler::LoadState(const std::string& state) {
  std::istringstream ss(state);
  std::mt19937_64 rng;
  ss >> rng;
  if (ss.fail()) return Status::Corruption("sampler state: cannot parse");
  std::string word;
  int64_t rows = 0;  // states saved before the row count: 0
  if (ss >> word && (word != "rows" || !(ss >> rows) || rows < 0))
    return Status::Corruption("sampler state: cannot parse its row count");
  rng_ = rng;
  rows_ = rows;
  return Status::Ok();
}

std::vector<int64_t> EvalOffsets(int64_t split_size, int64_t context, int64_t batch, int64_t index,
                                 int64_t count) {
  int64_t starts = split_size - context;
  int64_t total = batch * count;
  std::vector<int64_t> offsets;
  for (int64_t r = 0; r < batch; ++r) {
    int64_t i = index * batch + r;
    // i * starts / total in 128-bit-safe order: i < total and starts < 2^47.
    offsets.push_back(int64_t((__int128)i * starts / total));
  }
  return offsets;
}

void EvalBatch(const TokenSpan& split, int64_t context, int64_t batch, int64_t index, int64_t count,
               std::vector<int64_t>* tokens) {
  for (int64_t o : EvalOffsets(split.size, context, batch, index, count))
    split.Append(o, context + 1, tokens);
}

}  // namespace headlab
