// Corpus loading, shard mapping and batch sampling.
#include "worker/exec/data.h"

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

StatusOr<TokenSpan> MapTokens(const std::string& path, int64_t vocab, Sha256* hash) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::IoError(path + ": cannot stat");
  }
  if (st.st_size % 2 != 0 || st.st_size == 0) {
    ::close(fd);
    return Status::InvalidArgument(path + ": expected a non-empty file of uint16 tokens, got " +
                                   std::to_string(st.st_size) + " bytes");
  }
  auto map = std::make_shared<Mapping>();
  map->len = size_t(st.st_size);
  map->addr = ::mmap(nullptr, map->len, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map->addr == MAP_FAILED)
    return Status::IoError(path + ": mmap failed (" + std::strerror(errno) + ")");
  TokenSpan span;
  span.data = static_cast<const uint16_t*>(map->addr);
  span.size = int64_t(map->len / 2);
  span.holder = map;
  // One pass both hashes the bytes and checks the token range (an out-of-range token
  // would otherwise index past the embedding table).
  hash->Update(span.data, map->len);
  const uint16_t* bad = std::find_if(span.data, span.data + span.size,
                                     [vocab](uint16_t t) { return int64_t(t) >= vocab; });
  if (bad != span.data + span.size)
    return Status::InvalidArgument(path + ": token " + std::to_string(*bad) + " at index " +
                                   std::to_string(bad - span.data) + " is >= model.vocab " +
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
  d.train = {tokens, tokens->data(), n - n_val};
  d.val = {tokens, tokens->data() + (n - n_val), n_val};
  return d;
}

StatusOr<Dataset> LoadShards(const std::string& dir, int64_t vocab) {
  Dataset d;
  d.path = dir;
  d.vocab = vocab;
  Sha256 hash;
  StatusOr<TokenSpan> train = MapTokens(dir + "/train.bin", vocab, &hash);
  if (!train.ok()) return train.status();
  StatusOr<TokenSpan> val = MapTokens(dir + "/val.bin", vocab, &hash);
  if (!val.ok()) return val.status();
  d.train = train.value();
  d.val = val.value();
  d.sha256 = hash.HexDigest();
  return d;
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

void BatchSampler::Next(const TokenSpan& split, int64_t batch, std::vector<int64_t>* tokens) {
  for (int64_t o : NextOffsets(split.size, batch))
    tokens->insert(tokens->end(), split.data + o, split.data + o + context_ + 1);
}

std::string BatchSampler::SaveState() const {
  std::ostringstream ss;
  ss << rng_;
  return ss.str();
}

Status BatchSampler::LoadState(const std::string& state) {
  std::istringstream ss(state);
  std::mt19937_64 rng;
  ss >> rng;
  if (ss.fail()) return Status::Corruption("sampler state: cannot parse");
  rng_ = rng;
  return Status::Ok();
}

std::vector<int64_t> EvalOffsets(int64_t split_size, int64_t context, int64_t batch,
                                 int64_t index, int64_t count) {
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

void EvalBatch(const TokenSpan& split, int64_t context, int64_t batch, int64_t index,
               int64_t count, std::vector<int64_t>* tokens) {
  for (int64_t o : EvalOffsets(split.size, context, batch, index, count))
    tokens->insert(tokens->end(), split.data + o, split.data + o + context + 1);
}

}  // namespace headlab
