#include "payload/exec/passkey_prompts.h"

#include <cmath>
#include <cstdlib>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

std::vector<int64_t> Bytes(const std::string& s) {
  std::vector<int64_t> out;
  for (unsigned char c : s) out.push_back(c);
  return out;
}

// Row i of a group's [n, length] tokens.
std::vector<int64_t> Row(const PasskeyGroup& g, size_t i) {
  return std::vector<int64_t>(g.tokens.begin() + int64_t(i) * g.length,
                              g.tokens.begin() + int64_t(i + 1) * g.length);
}

TEST_CASE("passkey prompts: in bytes they are GeneratePasskey's prompts") {
  const PasskeyCodec bytes;
  for (double depth : {0.0, 0.3, 1.0}) {
    auto cell = MakePasskeyPrompts(bytes, 300, depth, 7, 3);
    REQUIRE(cell.ok());
    REQUIRE(cell->groups.size() == 1);
    const PasskeyGroup& g = cell->groups[0];
    CHECK(g.length == 300);
    CHECK(g.answer_tokens == 6);
    for (size_t i = 0; i < 3; ++i) {
      auto ex = GeneratePasskey(300, depth, 7 + i);
      REQUIRE(ex.ok());
      CHECK(Row(g, i) == Bytes(ex->prompt));
      CHECK(cell->answers[i] == ex->answer);
      CHECK(cell->inserted_at[i] == ex->inserted_at);
    }
  }
  CHECK_FALSE(
      MakePasskeyPrompts(bytes, 80, 0.5, 1, 1).ok());  // shorter than needle + question (95 bytes)
  CHECK_FALSE(MakePasskeyPrompts(bytes, 300, 1.5, 1, 1).ok());
}

TEST_CASE(
    "passkey prompts: GPT-2 prompts have exactly the asked tokens, needle at the token depth") {
  const char* env = std::getenv("HEADLAB_GPT2_DIR");
  ModelConfig m;
  m.init_from = env ? env : "data/gpt2";  // the test's directory is build/ (make fetches it)
  m.vocab = 50304;
  auto codec = PasskeyCodec::For(m, nullptr);
  INFO("GPT-2 vocabulary files: run `make` (scripts/fetch-data.sh) or set HEADLAB_GPT2_DIR");
  REQUIRE(codec.ok());
  for (double depth : {0.2, 0.8}) {
    auto cell = MakePasskeyPrompts(*codec, 512, depth, 3, 4);
    REQUIRE(cell.ok());
    size_t seen = 0;
    for (const PasskeyGroup& g : cell->groups) {
      CHECK(g.length == 512);
      CHECK(g.tokens.size() == g.examples.size() * 512);
      for (size_t r = 0; r < g.examples.size(); ++r) {
        const size_t i = g.examples[r];
        const std::vector<int64_t> row = Row(g, r);
        const std::vector<int64_t> needle = codec->Encode(DrawPasskey(512, 3 + i).needle);
        const std::vector<int64_t> question = codec->Encode(DrawPasskey(512, 3 + i).question);
        const int64_t filler = 512 - int64_t(needle.size() + question.size());
        // Depth in tokens: the needle starts after round(depth * filler tokens) of filler.
        CHECK(cell->inserted_at[i] == std::llround(depth * double(filler)));
        CHECK(std::equal(needle.begin(), needle.end(), row.begin() + cell->inserted_at[i]));
        CHECK(std::equal(question.begin(), question.end(), row.end() - int64_t(question.size())));
        CHECK(int64_t(codec->Encode(cell->answers[i]).size()) == g.answer_tokens);
        ++seen;
      }
    }
    CHECK(seen == 4);
  }
}

}  // namespace
}  // namespace headlab
