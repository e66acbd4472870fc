// Tokenizer throughput measurement.
#include "data/tokenizer_bench.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "common/files.h"
#include "data/documents.h"
#include "data/tokenizer.h"

namespace headlab {
namespace {

using Clock = std::chrono::steady_clock;

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty()
             ? 0
             : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

}  // namespace

StatusOr<TokenizerBenchResult> BenchTokenizer(const std::string& spec,
                                              const std::vector<std::string>& inputs, int repeats) {
  if (repeats < 2)
    return Status::InvalidArgument("--repeats: expected >= 2 (one cold pass, then warm ones)");
  StatusOr<std::vector<std::string>> files = ListInputFiles(inputs);
  if (!files.ok()) return files.status();
  std::vector<std::string> docs;
  TokenizerBenchResult r;
  for (const std::string& f : files.value()) {
    if (f == "-") return Status::InvalidArgument("bench: stdin is not supported; name files");
    StatusOr<std::string> text = ReadFile(f);
    if (!text.ok()) return text.status();
    r.bytes += int64_t(text->size());
    docs.push_back(std::move(text.value()));
  }
  if (r.bytes == 0) return Status::InvalidArgument("bench: the inputs are empty");
  StatusOr<Tokenizer> tok = Tokenizer::Load(spec);
  if (!tok.ok()) return tok.status();
  r.tokenizer = tok->kind();
  r.repeats = repeats;
  r.roundtrip = true;
  std::vector<double> encode_s, encode_cpu_s, decode_s;
  std::vector<std::vector<int32_t>> ids(docs.size());
  for (int rep = 0; rep < repeats; ++rep) {
    const auto t0 = Clock::now();
    const double c0 = ThreadCpuSeconds();
    int64_t tokens = 0;
    for (size_t i = 0; i < docs.size(); ++i) {
      ids[i].clear();
      tok->Encode(docs[i], &ids[i]);
      tokens += int64_t(ids[i].size());
    }
    encode_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    encode_cpu_s.push_back(ThreadCpuSeconds() - c0);
    r.tokens = tokens;
    const auto t1 = Clock::now();
    for (size_t i = 0; i < docs.size(); ++i) {
      std::string back = tok->Decode(ids[i]);
      if (rep == 0 && back != docs[i]) r.roundtrip = false;
    }
    decode_s.push_back(std::chrono::duration<double>(Clock::now() - t1).count());
  }
  const double mb = double(r.bytes) / 1e6;
  r.cold_mb_s = mb / encode_s[0];
  r.warm_mb_s = mb / Median(std::vector<double>(encode_s.begin() + 1, encode_s.end()));
  r.warm_cpu_mb_s = mb / Median(std::vector<double>(encode_cpu_s.begin() + 1, encode_cpu_s.end()));
  r.decode_mb_s = mb / Median(decode_s);
  return r;
}

Json TokenizerBenchJson(const TokenizerBenchResult& r) {
  return {{"tokenizer", r.tokenizer},
          {"bytes", r.bytes},
          {"tokens", r.tokens},
          {"repeats", r.repeats},
          {"cold_mb_s", r.cold_mb_s},
          {"warm_mb_s", r.warm_mb_s},
          {"warm_cpu_mb_s", r.warm_cpu_mb_s},
          {"decode_mb_s", r.decode_mb_s},
          {"roundtrip", r.roundtrip}};
}

}  // namespace headlab
