// `headlab data prepare`, `inspect` and `bench`: options (common/flags.h), progress, reports.
#include "data/data_main.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "common/flags.h"
#include "common/json.h"
#include "data/epoch_guard.h"
#include "data/prepare.h"
#include "data/shard_meta.h"
#include "data/tokenizer_bench.h"

namespace headlab {
namespace {

// The subcommands' option tables (common/flags.h): the parser and each --help text read them.
FlagsSpec PrepareSpec() {
  return {
      "headlab data prepare",
      {{"--out", "", "DIR", "the shard folder; written as DIR.partial-PID and renamed when done"},
       {"--tokenizer", "", "SPEC",
        "byte (default); a folder with encoder.json + vocab.bpe (GPT-2) or\n"
        "vocab.json + merges.txt; a tokenizer.json (or a folder holding one)"},
       {"--format", "", "F",
        "text (default: a file is a document), jsonl (a line's field is a\n"
        "document), brown (Brown Corpus tagged files: tags stripped)"},
       {"--jsonl-field", "", "NAME", "the jsonl field holding the text (default text)"},
       {"--val-fraction", "", "F", "held-out share of documents, in (0, 0.5] (default 0.05)"},
       {"--dedup", "", "", "drop documents whose bytes repeat an earlier one's (meta: duplicates)"},
       {"--sources", "", "FILE",
        "a JSON array of {\"name\", \"licence\", ...}, copied into meta.json"},
       {"--force", "", "", "replace DIR when it already holds shards"},
       {"--json", "", "", "print meta.json when done"},
       {"--quiet", "", "", "no progress output"}},
      "INPUT...",
      1,
      SIZE_MAX};
}

FlagsSpec InspectSpec() {
  return {"headlab data inspect", {{"--json", "", "", "print meta.json"}}, "DIR", 1, 1};
}

FlagsSpec BenchSpec() {
  return {"headlab data bench",
          {{"--tokenizer", "", "SPEC", "as for prepare (default byte)"},
           {"--repeats", "", "N", "passes, in [2, 1000] (default 5)"},
           {"--json", "", "", "print the result as JSON"}},
          "INPUT...",
          1,
          SIZE_MAX};
}

const char* kExitCodes = "exit: 0 ok, 1 failed (I/O, a damaged shard), 2 bad input\n";

const char* kPrepareDescription =
    "Encodes text into token shards (DIR/train.bin, DIR/val.bin, DIR/meta.json; schema/exec.md)\n"
    "that a run reads with data.source \"shards\" and data.path DIR. An INPUT is a folder (every\n"
    "file under it), a quoted glob pattern, a file, or - for stdin; FORMAT:INPUT (e.g. brown:DIR)\n"
    "reads that input in FORMAT.\n";
const char* kInspectDescription =
    "Checks DIR's shards against meta.json and prints their size and tokenizer.\n";
const char* kBenchDescription =
    "Tokenizer throughput in MB/s over the INPUT files (each a document): the first pass with a\n"
    "fresh tokenizer (cold piece cache), the median of the other --repeats passes, and\n"
    "decoding; checks decode(encode(x)) == x.\n";

// The usage of `headlab data` as a whole: each subcommand's usage line.
std::string Usage() {
  std::string out;
  for (const FlagsSpec& spec : {PrepareSpec(), InspectSpec(), BenchSpec()}) {
    std::string help = HelpText(spec, "", "");
    out += help.substr(0, help.find("\n\n")) + "\n";
  }
  return out + "\n`headlab data SUBCOMMAND --help` describes each.\n" + kExitCodes;
}

int Fail(const Status& st) {
  std::fprintf(stderr, "headlab data: %s\n", st.message().c_str());
  return st.code() == Status::Code::kInvalidArgument || st.code() == Status::Code::kNotFound ? 2
                                                                                             : 1;
}

std::string Megabytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", double(bytes) / 1e6);
  return buf;
}

// Draws the progress bar on stderr: redrawn in place at most 10 times a second on a
// terminal, otherwise one line per 10% (or per 10 s when the total is unknown).
class ProgressBar {
 public:
  ProgressBar() : tty_(::isatty(2) != 0), start_(Clock::now()), last_(start_) {}
  void Update(const PrepareProgress& p, bool final) {
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double since = std::chrono::duration<double>(now - last_).count();
    const double frac = p.total_bytes > 0 ? double(p.bytes) / double(p.total_bytes) : -1;
    if (!final || !tty_) {
      if (tty_ && since < 0.1) return;
      if (!tty_ && (frac >= 0 ? int(frac * 10) == last_decile_ : since < 10 && !final)) return;
    }
    last_ = now;
    last_decile_ = frac >= 0 ? int(frac * 10) : last_decile_;
    std::string line = "prepare: ";
    if (frac >= 0) {
      const int width = 24, filled = int(frac * width);
      line +=
          "[" + std::string(size_t(filled), '=') + std::string(size_t(width - filled), ' ') + "] ";
      char pct[16];
      std::snprintf(pct, sizeof pct, "%3d%%  ", int(frac * 100));
      line += pct;
      line += Megabytes(p.bytes) + "/" + Megabytes(p.total_bytes);
    } else {
      line += Megabytes(p.bytes);
    }
    char rate[64];
    std::snprintf(rate, sizeof rate, "  %.2f MB/s",
                  elapsed > 0 ? double(p.bytes) / 1e6 / elapsed : 0.0);
    line += rate;
    line += "  " + GroupedDigits(p.tokens) + " tokens  " + GroupedDigits(p.documents) + " docs";
    if (frac > 0 && frac < 1 && !final) {
      char eta[32];
      std::snprintf(eta, sizeof eta, "  ETA %.0f s", elapsed * (1 - frac) / frac);
      line += eta;
    }
    if (tty_)
      std::fprintf(stderr, "\r%s\033[K%s", line.c_str(), final ? "\n" : "");
    else
      std::fprintf(stderr, "%s\n", line.c_str());
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool tty_;
  Clock::time_point start_, last_;
  int last_decile_ = -1;
};

// Parses `args` (the subcommand first) against `spec`; prints the --help text and returns
// 0 for --help, Fail's code for bad input, or -1 to go on.
int Parse(const FlagsSpec& spec, const char* description, const std::vector<std::string>& args,
          ParsedArgs* out) {
  StatusOr<ParsedArgs> p = ParseFlags(spec, args);
  if (!p.ok()) {  // the message starts with spec.program already
    std::fprintf(stderr, "%s\n", p.status().message().c_str());
    return 2;
  }
  if (p->help()) {
    std::fputs(HelpText(spec, description, kExitCodes).c_str(), stdout);
    return 0;
  }
  *out = std::move(p.value());
  return -1;
}

int RunPrepare(const std::vector<std::string>& args) {
  ParsedArgs p;
  if (int rc = Parse(PrepareSpec(), kPrepareDescription, args, &p); rc >= 0) return rc;
  PrepareOptions o;
  o.inputs = p.positional();
  o.out_dir = p.Get("--out", "");
  o.tokenizer = p.Get("--tokenizer", "byte");
  o.format.format = p.Get("--format", "text");
  o.format.jsonl_field = p.Get("--jsonl-field", "text");
  o.force = p.Has("--force");
  o.dedup = p.Has("--dedup");
  o.sources_file = p.Get("--sources", "");
  const std::string vf = p.Get("--val-fraction", "0.05");
  char* end = nullptr;
  o.val_fraction = std::strtod(vf.c_str(), &end);
  if (vf.empty() || *end != '\0')
    return Fail(Status::InvalidArgument("--val-fraction: expected a number, got \"" + vf + "\""));
  const bool quiet = p.Has("--quiet");
  ProgressBar bar;
  PrepareProgress last;
  StatusOr<ShardMeta> m = PrepareShards(o, [&](const PrepareProgress& pr) {
    last = pr;
    if (!quiet) bar.Update(pr, false);
  });
  if (!m.ok()) {
    if (!quiet) std::fputc('\n', stderr);
    return Fail(m.status());
  }
  if (!quiet) bar.Update(last, true);
  if (p.Has("--json")) {
    std::printf("%s\n", ShardMetaToJson(m.value()).dump(2).c_str());
  } else {
    std::printf(
        "%s: %s train + %s val tokens (%s), %s + %s documents, tokenizer %s (%s, vocab %lld)\n",
        o.out_dir.c_str(), GroupedDigits(m->train.tokens).c_str(),
        GroupedDigits(m->val.tokens).c_str(), m->dtype.c_str(),
        GroupedDigits(m->train.documents).c_str(), GroupedDigits(m->val.documents).c_str(),
        m->tokenizer_kind.c_str(), m->tokenizer_sha256.substr(0, 12).c_str(),
        static_cast<long long>(m->vocab));
  }
  return 0;
}

int RunInspect(const std::vector<std::string>& args) {
  ParsedArgs p;
  if (int rc = Parse(InspectSpec(), kInspectDescription, args, &p); rc >= 0) return rc;
  const std::string dir = p.positional()[0];
  StatusOr<ShardMeta> m = ReadShardMeta(dir);
  if (!m.ok()) return Fail(m.status());
  for (const char* split : {"train", "val"}) {
    Status st = CheckShardSize(dir, split, m.value());
    if (!st.ok()) return Fail(st);
  }
  if (p.Has("--json")) {
    std::printf("%s\n", ShardMetaToJson(m.value()).dump(2).c_str());
    return 0;
  }
  std::printf("%s: %s shards, %s train + %s val tokens, %s + %s documents\n", dir.c_str(),
              m->dtype.c_str(), GroupedDigits(m->train.tokens).c_str(),
              GroupedDigits(m->val.tokens).c_str(), GroupedDigits(m->train.documents).c_str(),
              GroupedDigits(m->val.documents).c_str());
  std::printf("tokenizer: %s from %s, vocab %lld, eot %d, sha256 %s\n", m->tokenizer_kind.c_str(),
              m->tokenizer_source.c_str(), static_cast<long long>(m->vocab), m->eot,
              m->tokenizer_sha256.c_str());
  std::printf("corpus: %lld files, %s, sha256 %s (%s), split by %s\n",
              static_cast<long long>(m->corpus_files), Megabytes(m->corpus_bytes).c_str(),
              m->corpus_sha256.c_str(), m->corpus_format.c_str(), m->split_by.c_str());
  if (m->corpus_duplicates > 0)
    std::printf("duplicates: %s documents dropped (--dedup)\n",
                GroupedDigits(m->corpus_duplicates).c_str());
  for (const Json& src : m->sources)
    std::printf("source: %s; licence %s\n", src.value("name", std::string("?")).c_str(),
                src.value("licence", std::string("?")).c_str());
  return 0;
}

int RunBench(const std::vector<std::string>& args) {
  ParsedArgs p;
  if (int rc = Parse(BenchSpec(), kBenchDescription, args, &p); rc >= 0) return rc;
  StatusOr<long> repeats = ParseIntFlag("--repeats", p.Get("--repeats", "5"), 2, 1000);
  if (!repeats.ok()) return Fail(repeats.status());
  StatusOr<TokenizerBenchResult> r =
      BenchTokenizer(p.Get("--tokenizer", "byte"), p.positional(), int(*repeats));
  if (!r.ok()) return Fail(r.status());
  if (p.Has("--json")) {
    std::printf("%s\n", TokenizerBenchJson(r.value()).dump(2).c_str());
  } else {
    std::printf(
        "%s: %s in, %s tokens (%.2f bytes/token); encode %.2f MB/s cold, %.2f MB/s warm "
        "(median of %d; %.2f MB/s of CPU time); decode %.1f MB/s; round trip %s\n",
        r->tokenizer.c_str(), Megabytes(r->bytes).c_str(), GroupedDigits(r->tokens).c_str(),
        double(r->bytes) / double(std::max<int64_t>(1, r->tokens)), r->cold_mb_s, r->warm_mb_s,
        r->repeats - 1, r->warm_cpu_mb_s, r->decode_mb_s, r->roundtrip ? "exact" : "FAILED");
  }
  return r->roundtrip ? 0 : 1;
}

}  // namespace

int DataMain(int argc, char** argv) {
  // args[0] is the subcommand, as ParseFlags expects the program's name there.
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(Usage().c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string& sub = args[0];
  if (sub == "prepare") return RunPrepare(args);
  if (sub == "inspect") return RunInspect(args);
  if (sub == "bench") return RunBench(args);
  std::fprintf(stderr, "headlab data: unknown subcommand '%s'\n\n%s", sub.c_str(), Usage().c_str());
  return 2;
}

}  // namespace headlab
