#include "common/metric_catalog.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include <catch2/catch.hpp>

#include "common/metric_names.h"
#include "common/source_dir.h"

namespace headlab {

namespace {

std::string Source(const std::string& path) {
  std::ifstream in(std::string(SourceDir()) + "/" + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("the metric catalog holds every name the metric headers define") {
  // A declaration may wrap after its `=` (clang-format does so when a comment follows).
  std::regex def(R"re(constexpr const char\* k[A-Za-z0-9]+ =\s*"([^"]*)")re");
  size_t n = 0;
  for (const char* header :
       {"common/metric_names.h", "payload/exec/noop.h", "payload/methods/aah/aah_metrics.h",
        "payload/methods/aoh/aoh_metrics.h", "payload/methods/pruning/prune_metrics.h",
        "payload/methods/saf/saf_metrics.h"}) {
    const std::string s = Source(header);
    REQUIRE(!s.empty());
    for (std::sregex_iterator it(s.begin(), s.end(), def), end; it != end; ++it, ++n) {
      const std::string name = (*it)[1];
      CHECK(std::count(BuiltinMetricNames().begin(), BuiltinMetricNames().end(), name) == 1);
    }
  }
  CHECK(n > 50);
  CHECK(n == BuiltinMetricNames().size());
  CHECK(IsBuiltinMetric("noop.value"));
}

TEST_CASE("IsBuiltinMetric: names, prefixes and qualified names") {
  CHECK(IsBuiltinMetric(metric::kEvalPpl));
  CHECK(IsBuiltinMetric("eval.loss"));
  CHECK(IsBuiltinMetric("aah.bucket.64"));  // prefix + more
  CHECK(IsBuiltinMetric("passkey.acc.L256.D20"));
  CHECK(IsBuiltinMetric("bench.prefill_ms.l16.b1"));  // name + qualifier
  CHECK_FALSE(IsBuiltinMetric("aah.bucket."));        // a prefix alone
  CHECK_FALSE(IsBuiltinMetric("eval.perplexity"));    // the perplexity metric is eval.ppl
  CHECK_FALSE(IsBuiltinMetric("eval.pplx"));
  CHECK_FALSE(IsBuiltinMetric(""));
}

TEST_CASE("BetterDirection reads the metric's name") {
  CHECK(BetterDirection("eval.ppl") == -1);
  CHECK(BetterDirection("eval.loss") == -1);
  CHECK(BetterDirection("train.loss") == -1);
  CHECK(BetterDirection("time.elapsed_s") == -1);
  CHECK(BetterDirection("bench.update_ms") == -1);
  CHECK(BetterDirection("bench.prefill_ms.l16.b1") == -1);
  CHECK(BetterDirection("bench.decode_ms_per_token") == -1);
  CHECK(BetterDirection("mem.peak_bytes") == -1);
  CHECK(BetterDirection("saf.fit_kl_max") == -1);
  CHECK(BetterDirection("flops.total") == -1);
  CHECK(BetterDirection("train.tokens_per_s") == +1);
  CHECK(BetterDirection("mqar.accuracy") == +1);
  CHECK(BetterDirection("aoh.passkey_acc") == +1);
  CHECK(BetterDirection("passkey.acc.L256.D20") == +1);
  CHECK(BetterDirection("saf.heads_fixed") == 0);
  CHECK(BetterDirection("prune.params") == 0);
}

}  // namespace headlab
