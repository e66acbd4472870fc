// MQAR and passkey generators.
#include "payload/exec/tasks.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace headlab {
namespace {

// One generator per (seed, index), so examples are independent and reproducible alone.
std::mt19937_64 ExampleRng(uint64_t seed, uint64_t index) {
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(index), uint32_t(index >> 32)};
  return std::mt19937_64(seq);
}

// Uniform integer in [lo, hi) (the tiny modulo bias is irrelevant at these ranges).
int64_t Uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return lo + int64_t(rng() % uint64_t(hi - lo));
}

// Returns n distinct values of [lo, hi) by a partial Fisher-Yates shuffle.
std::vector<int64_t> Distinct(std::mt19937_64& rng, int64_t lo, int64_t hi, int64_t n) {
  std::vector<int64_t> pool(size_t(hi - lo));
  std::iota(pool.begin(), pool.end(), lo);
  for (int64_t i = 0; i < n; ++i)
    std::swap(pool[size_t(i)], pool[size_t(Uniform(rng, i, hi - lo))]);
  pool.resize(size_t(n));
  return pool;
}

// Returns n distinct indices of `weights` drawn without replacement, each draw with
// probability proportional to the remaining weights.
std::vector<int64_t> WeightedDistinct(std::mt19937_64& rng, std::vector<double> weights,
                                      int64_t n) {
  std::vector<int64_t> out;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int64_t k = 0; k < n; ++k) {
    double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    double r = unit(rng) * total;
    size_t i = 0;
    while (i + 1 < weights.size() && (r >= weights[i] || weights[i] == 0)) {
      r -= weights[i];
      ++i;
    }
    while (weights[i] == 0) --i;  // rounding at the end of the range
    out.push_back(int64_t(i));
    weights[i] = 0;
  }
  return out;
}

constexpr const char* kFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";
constexpr const char* kQuestion = "What is the pass key? The pass key is";

}  // namespace

Status ValidateMqar(const MqarSpec& s) {
  if (s.pairs < 1) return Status::InvalidArgument("mqar: pairs must be >= 1");
  if (s.seq_len % 2 != 0) return Status::InvalidArgument("mqar: seq_len must be even");
  if (s.vocab <= s.seq_len) return Status::InvalidArgument("mqar: vocab must exceed seq_len");
  if (4 * s.pairs > s.seq_len) return Status::InvalidArgument("mqar: needs 4 * pairs <= seq_len");
  if (!(s.power_a > 0)) return Status::InvalidArgument("mqar: power_a must be > 0");
  return Status::Ok();
}

MqarExample GenerateMqar(const MqarSpec& s, uint64_t seed, uint64_t index) {
  std::mt19937_64 rng = ExampleRng(seed, index);
  const int64_t k = s.pairs, ctx = 2 * k, T = s.seq_len;
  std::vector<int64_t> keys = Distinct(rng, 1, s.vocab / 2, k);
  std::vector<int64_t> values = Distinct(rng, s.vocab / 2, s.vocab, k);
  const int64_t space = (T - ctx) / 2;
  std::vector<double> p(static_cast<size_t>(space));
  for (int64_t i = 1; i <= space; ++i)
    p[size_t(i - 1)] = s.power_a * std::pow(double(i), s.power_a - 1);
  std::vector<int64_t> gaps = WeightedDistinct(rng, p, k);

  MqarExample ex;
  ex.tokens.assign(size_t(T), 0);
  ex.targets.assign(size_t(T), kNoTarget);
  for (int64_t i = 0; i < k; ++i) {
    ex.tokens[size_t(2 * i)] = keys[size_t(i)];
    ex.tokens[size_t(2 * i + 1)] = values[size_t(i)];
  }
  std::vector<bool> is_query(size_t(T), false);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t q = ctx + 2 * gaps[size_t(i)];
    ex.tokens[size_t(q)] = keys[size_t(i)];
    ex.targets[size_t(q)] = values[size_t(i)];
    is_query[size_t(q)] = true;
  }
  for (int64_t t = ctx; t < T; ++t)
    if (!is_query[size_t(t)]) ex.tokens[size_t(t)] = Uniform(rng, 0, s.vocab);
  return ex;
}

PasskeyPieces DrawPasskey(int64_t length, uint64_t seed) {
  std::mt19937_64 rng = ExampleRng(seed, uint64_t(length));
  const std::string key = std::to_string(Uniform(rng, 10000, 100000));
  return {"The pass key is " + key + ". Remember it. " + key + " is the pass key. ", kQuestion,
          " " + key, kFiller};
}

StatusOr<PasskeyExample> GeneratePasskey(int64_t length, double depth, uint64_t seed) {
  const PasskeyPieces pieces = DrawPasskey(length, seed);
  const std::string& needle = pieces.needle;
  const int64_t fixed = int64_t(needle.size() + pieces.question.size());
  if (length < fixed + 1)
    return Status::InvalidArgument("passkey: length " + std::to_string(length) +
                                   " is shorter than the needle and question (" +
                                   std::to_string(fixed + 1) + " bytes)");
  if (!(depth >= 0 && depth <= 1))
    return Status::InvalidArgument("passkey: depth must be in [0, 1]");
  const int64_t filler_len = length - fixed;
  std::string filler;
  while (int64_t(filler.size()) < filler_len) filler += kFiller;
  filler.resize(size_t(filler_len));
  PasskeyExample ex;
  ex.inserted_at = int64_t(std::llround(depth * double(filler_len)));
  ex.prompt = filler.substr(0, size_t(ex.inserted_at)) + needle +
              filler.substr(size_t(ex.inserted_at)) + kQuestion;
  ex.answer = pieces.answer;
  return ex;
}

}  // namespace headlab
