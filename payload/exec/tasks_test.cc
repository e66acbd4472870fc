#include "payload/exec/tasks.h"

#include <map>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

TEST_CASE("mqar: deterministic per seed, and every answer is checkable") {
  MqarSpec spec{8192, 512, 8, 0.01};
  REQUIRE(ValidateMqar(spec).ok());
  MqarExample a = GenerateMqar(spec, 1337, 3), b = GenerateMqar(spec, 1337, 3);
  CHECK(a.tokens == b.tokens);
  CHECK(a.targets == b.targets);
  CHECK(GenerateMqar(spec, 1337, 4).tokens != a.tokens);
  CHECK(GenerateMqar(spec, 1338, 3).tokens != a.tokens);
  for (uint64_t index = 0; index < 50; ++index) {
    MqarExample ex = GenerateMqar(spec, 7, index);
    REQUIRE(ex.tokens.size() == 512);
    std::map<int64_t, int64_t> pairs;  // key -> value from the context
    for (int64_t i = 0; i < spec.pairs; ++i) {
      CHECK(ex.tokens[size_t(2 * i)] < spec.vocab / 2);
      CHECK(ex.tokens[size_t(2 * i + 1)] >= spec.vocab / 2);
      pairs[ex.tokens[size_t(2 * i)]] = ex.tokens[size_t(2 * i + 1)];
    }
    CHECK(pairs.size() == size_t(spec.pairs));  // distinct keys
    int64_t queries = 0;
    for (size_t t = 0; t < ex.tokens.size(); ++t) {
      CHECK(ex.tokens[t] >= 0);
      CHECK(ex.tokens[t] < spec.vocab);
      if (ex.targets[t] == kNoTarget) continue;
      ++queries;
      CHECK(t >= size_t(2 * spec.pairs));
      CHECK(pairs.at(ex.tokens[t]) == ex.targets[t]);
    }
    CHECK(queries == spec.pairs);
  }
  CHECK(!ValidateMqar({8192, 511, 8, 0.01}).ok());
  CHECK(!ValidateMqar({8192, 512, 129, 0.01}).ok());
  CHECK(!ValidateMqar({256, 512, 8, 0.01}).ok());
}

TEST_CASE("mqar: the power law favours short gaps") {
  MqarSpec spec{8192, 512, 8, 0.01};
  int64_t near = 0, far = 0;
  for (uint64_t index = 0; index < 200; ++index) {
    MqarExample ex = GenerateMqar(spec, 1, index);
    for (size_t t = 16; t < 512; ++t)
      if (ex.targets[t] != kNoTarget) (t < 16 + 2 * 62 ? near : far) += 1;
  }
  CHECK(near > far);  // the first quarter of the gaps gets more than the other three
}

TEST_CASE("passkey: exact length, key at the requested depth, deterministic") {
  for (double depth : {0.0, 0.2, 0.4, 0.6, 0.8, 1.0}) {
    StatusOr<PasskeyExample> ex = GeneratePasskey(1024, depth, 5);
    REQUIRE(ex.ok());
    CHECK(ex->prompt.size() == 1024);
    CHECK(ex->answer.size() == 6);
    const std::string key = ex->answer.substr(1);
    size_t at = ex->prompt.find("The pass key is " + key);
    CHECK(at == size_t(ex->inserted_at));
    CHECK(ex->prompt.substr(ex->prompt.size() - 37) == "What is the pass key? The pass key is");
    CHECK(ex->prompt == GeneratePasskey(1024, depth, 5)->prompt);
  }
  CHECK(GeneratePasskey(1024, 0.5, 5)->answer != GeneratePasskey(1024, 0.5, 6)->answer);
  CHECK(!GeneratePasskey(40, 0.5, 1).ok());
  CHECK(!GeneratePasskey(1024, 1.5, 1).ok());
}

}  // namespace
}  // namespace headlab
