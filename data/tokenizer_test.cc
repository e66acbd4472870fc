// Tokenizer tests. Expected ids come from an independent implementation: the npm package
// gpt-3-encoder's JavaScript encoder (node, JS regex with /u), run once with the commands in
// docs/BENCHMARKS.md ("Data"); for the tokenizer.json case the same JS BPE with the
// Llama 3 Split pattern, NFC by String.prototype.normalize and ignore_merges. The GPT-2
// files are the ones `make` fetches into BUILD/data/gpt2 (scripts/fetch-data.sh);
// HEADLAB_GPT2_DIR overrides the folder.
#include "data/tokenizer.h"

#include <cstdlib>
#include <random>

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/json.h"
#include "common/testing/temp_dir.h"
#include "data/pretokenizer.h"
#include "data/unicode.h"

namespace headlab {
namespace {

struct IdCase {
  const char* text;
  std::vector<int32_t> ids;
};
struct SplitCase {
  const char* text;
  const char* nfc;
  std::vector<std::string> pieces;
  std::vector<int32_t> ids;
};

const IdCase kGpt2Cases[] = {
    {"Hello world", {15496, 995}},
    {"The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary "
     "election produced \"no evidence\" that any irregularities took place.",
     {464,  44373, 3418, 5675, 48705, 531,  3217, 281, 3645, 286,   9371, 338,  2274,
      4165, 3071,  4635, 366,  3919,  2370, 1,    326, 597,  48302, 1718, 1295, 13}},
    {"  leading spaces,\ttabs\nand newlines\n\n\nend   ",
     {220, 3756, 9029, 11, 197, 8658, 82, 198, 392, 649, 6615, 628, 198, 437, 220, 220, 220}},
    {"I'm sure they'll say it's 12345 dollars, isn't it? We've 3.14159 reasons.",
     {40,   1101, 1654, 484, 1183, 910,  340, 338, 17031, 2231,  5054, 11,
      2125, 470,  340,  30,  775,  1053, 513, 13,  1415,  19707, 3840, 13}},
    {"na\xc3\xaf"
     "ve caf\xc3\xa9"
     " r\xc3\xa9"
     "sum\xc3\xa9"
     " \xe2\x80\x94"
     " Z\xc3\xbc"
     "rich \xe6\x9d\xb1"
     "\xe4\xba\xac"
     " \xce\x95"
     "\xce\xbb"
     "\xce\xbb"
     "\xce\xb7"
     "\xce\xbd"
     "\xce\xb9"
     "\xce\xba"
     "\xce\xac"
     " \xd0\x9f"
     "\xd1\x80"
     "\xd0\xb8"
     "\xd0\xb2"
     "\xd0\xb5"
     "\xd1\x82"
     " \xd0\xbc"
     "\xd0\xb8"
     "\xd1\x80"
     " \xf0\x9f\x99\x82"
     "\xf0\x9f\x9a\x80"
     "",
     {2616,  38776, 40304, 40560, 16345, 2634,  851, 1168,  9116,  7527,  10545, 251, 109,   12859,
      105,   7377,  243,   39377, 39377, 138,   115, 26180, 29945, 43000, 138,   105, 12466, 253,
      21169, 18849, 38857, 16843, 20375, 12466, 120, 18849, 21169, 32485, 8582,  248, 222}},
    {"def f(x):\n    return x**2  # squared\n",
     {4299, 277, 7, 87, 2599, 198, 220, 220, 220, 1441, 2124, 1174, 17, 220, 1303, 44345, 198}},
    {"<|endoftext|> is not special here", {27, 91, 437, 1659, 5239, 91, 29, 318, 407, 2041, 994}},
    {"HE'S GONE'LL 'D", {13909, 6, 50, 402, 11651, 6, 3069, 705, 35}},
};
const SplitCase kLlama3Cases[] = {
    {"Hello world", "Hello world", {"Hello", " world"}, {15496, 995}},
    {"I'M sure THEY'LL say it's 1234567 dollars, isn't it? We've 3.14159 reasons.",
     "I'M sure THEY'LL say it's 1234567 dollars, isn't it? We've 3.14159 reasons.",
     {"I",   "'M",  " sure", " THEY",    "'LL", " say", " it", "'s",       " ",
      "123", "456", "7",     " dollars", ",",   " isn", "'t",  " it",      "?",
      " We", "'ve", " ",     "3",        ".",   "141",  "59",  " reasons", "."},
     {40, 6,    44,  1654, 33302, 6,   3069, 910, 340, 338, 220,   10163, 29228, 22, 5054,
      11, 2125, 470, 340,  30,    775, 1053, 220, 18,  13,  23756, 3270,  3840,  13}},
    {"  leading spaces,\ttabs\r\nand newlines\n\n\nend   ",
     "  leading spaces,\ttabs\r\nand newlines\n\n\nend   ",
     {" ", " leading", " spaces", ",", "\ttabs", "\r\n", "and", " newlines", "\n\n\n", "end",
      "   "},
     {220, 3756, 9029, 11, 197, 8658, 82, 201, 198, 392, 649, 6615, 628, 198, 437, 220, 220, 220}},
    {"na\xc3\xaf"
     "ve cafe\xcc\x81"
     " r\xc3\xa9"
     "sum\xc3\xa9"
     " \xe2\x80\x94"
     " Z\xc3\xbc"
     "rich \xe6\x9d\xb1"
     "\xe4\xba\xac"
     " \xce\x95"
     "\xce\xbb"
     "\xce\xbb"
     "\xce\xb7"
     "\xce\xbd"
     "\xce\xb9"
     "\xce\xba"
     "\xce\xac"
     " \xd0\x9f"
     "\xd1\x80"
     "\xd0\xb8"
     "\xd0\xb2"
     "\xd0\xb5"
     "\xd1\x82"
     " \xf0\x9f\x99\x82"
     "\xf0\x9f\x9a\x80"
     " \xe1\x84\x80"
     "\xe1\x85\xa1"
     "",
     "na\xc3\xaf"
     "ve caf\xc3\xa9"
     " r\xc3\xa9"
     "sum\xc3\xa9"
     " \xe2\x80\x94"
     " Z\xc3\xbc"
     "rich \xe6\x9d\xb1"
     "\xe4\xba\xac"
     " \xce\x95"
     "\xce\xbb"
     "\xce\xbb"
     "\xce\xb7"
     "\xce\xbd"
     "\xce\xb9"
     "\xce\xba"
     "\xce\xac"
     " \xd0\x9f"
     "\xd1\x80"
     "\xd0\xb8"
     "\xd0\xb2"
     "\xd0\xb5"
     "\xd1\x82"
     " \xf0\x9f\x99\x82"
     "\xf0\x9f\x9a\x80"
     " \xea\xb0\x80"
     "",
     {"na\xc3\xaf"
      "ve",
      " caf\xc3\xa9"
      "",
      " r\xc3\xa9"
      "sum\xc3\xa9"
      "",
      " \xe2\x80\x94"
      "",
      " Z\xc3\xbc"
      "rich",
      " \xe6\x9d\xb1"
      "\xe4\xba\xac"
      "",
      " \xce\x95"
      "\xce\xbb"
      "\xce\xbb"
      "\xce\xb7"
      "\xce\xbd"
      "\xce\xb9"
      "\xce\xba"
      "\xce\xac"
      "",
      " \xd0\x9f"
      "\xd1\x80"
      "\xd0\xb8"
      "\xd0\xb2"
      "\xd0\xb5"
      "\xd1\x82"
      "",
      " \xf0\x9f\x99\x82"
      "\xf0\x9f\x9a\x80"
      "",
      " \xea\xb0\x80"
      ""},
     {2616,  38776, 40304, 40560, 16345, 2634,  851,  1168,  9116,  7527,  10545, 251, 109,   12859,
      105,   7377,  243,   39377, 39377, 138,   115,  26180, 29945, 43000, 138,   105, 12466, 253,
      21169, 18849, 38857, 16843, 20375, 32485, 8582, 248,   222,   220,   166,   108, 222}},
    {"def f(x):\n    return x**2  # squared\n",
     "def f(x):\n    return x**2  # squared\n",
     {"def", " f", "(x", "):\n", "   ", " return", " x", "**", "2", " ", " #", " squared", "\n"},
     {4299, 277, 7, 87, 2599, 198, 220, 220, 220, 1441, 2124, 1174, 17, 220, 1303, 44345, 198}},
    {"IT'\xc5\xbf"
     " ok, HE'\xc5\xbf"
     "K \xe2\x84\xaa"
     "'LL",
     "IT'\xc5\xbf"
     " ok, HE'\xc5\xbf"
     "K K'LL",
     {"IT",
      "'\xc5\xbf"
      "",
      " ok", ",", " HE",
      "'\xc5\xbf"
      "",
      "K", " K", "'LL"},
     {2043, 6, 129, 123, 12876, 11, 11179, 6, 129, 123, 42, 509, 6, 3069}},
};

constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string Gpt2Dir() {
  const char* env = std::getenv("HEADLAB_GPT2_DIR");
  return env ? env : "data/gpt2";
}

Tokenizer LoadGpt2() {
  StatusOr<Tokenizer> t = Tokenizer::Load(Gpt2Dir());
  INFO("GPT-2 vocabulary files: run `make` (scripts/fetch-data.sh) or set HEADLAB_GPT2_DIR");
  INFO(t.status().ToString());
  REQUIRE(t.ok());
  return t.value();
}

std::vector<std::string> Pieces(const PreTokenizer& p, const std::string& text) {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  p.Split(text, &ranges);
  std::vector<std::string> out;
  for (auto [b, e] : ranges) out.push_back(text.substr(b, e - b));
  return out;
}

// Builds a tokenizer.json from GPT-2's encoder.json + vocab.bpe with the given
// pre-tokenizer and normalizer.
std::string HfJson(const Json& pre_tokenizer, const Json& normalizer, bool ignore_merges,
                   bool merges_as_pairs) {
  StatusOr<std::string> enc = ReadFile(Gpt2Dir() + "/encoder.json");
  StatusOr<std::string> bpe = ReadFile(Gpt2Dir() + "/vocab.bpe");
  REQUIRE(enc.ok());
  REQUIRE(bpe.ok());
  Json merges = Json::array();
  size_t start = bpe->find('\n') + 1;
  while (start < bpe->size()) {
    size_t nl = bpe->find('\n', start);
    std::string line = bpe->substr(start, nl - start);
    start = nl == std::string::npos ? bpe->size() : nl + 1;
    if (line.empty()) continue;
    size_t sp = line.find(' ');
    if (merges_as_pairs)
      merges.push_back(Json::array({line.substr(0, sp), line.substr(sp + 1)}));
    else
      merges.push_back(line);
  }
  Json vocab = Json::parse(enc.value());
  vocab.erase("<|endoftext|>");  // an added token in GPT-2's tokenizer.json
  Json j = {{"version", "1.0"},
            {"added_tokens",
             Json::array({{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}})},
            {"normalizer", normalizer},
            {"pre_tokenizer", pre_tokenizer},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model",
             {{"type", "BPE"},
              {"dropout", nullptr},
              {"unk_token", nullptr},
              {"continuing_subword_prefix", nullptr},
              {"end_of_word_suffix", nullptr},
              {"fuse_unk", false},
              {"byte_fallback", false},
              {"ignore_merges", ignore_merges},
              {"vocab", vocab},
              {"merges", merges}}}};
  return j.dump();
}

TEST_CASE("GPT-2 encoder.json + vocab.bpe encode fixed strings to the JS encoder's ids") {
  Tokenizer t = LoadGpt2();
  CHECK(t.kind() == "gpt2-bpe");
  CHECK(t.vocab_size() == 50257);
  CHECK(t.eot() == 50256);
  for (const IdCase& c : kGpt2Cases) {
    INFO(c.text);
    std::vector<int32_t> ids;
    t.Encode(c.text, &ids);
    CHECK(ids == c.ids);
    CHECK(t.Decode(ids) == c.text);
  }
}

TEST_CASE("a tokenizer.json with the Llama 3 Split pattern, NFC and ignore_merges") {
  testing::TempDir dir("headlab-tok");
  Json pre = {{"type", "Sequence"},
              {"pretokenizers", Json::array({{{"type", "Split"},
                                              {"pattern", {{"Regex", kLlama3Pattern}}},
                                              {"behavior", "Isolated"},
                                              {"invert", false}},
                                             {{"type", "ByteLevel"},
                                              {"add_prefix_space", false},
                                              {"trim_offsets", true},
                                              {"use_regex", false}}})}};
  REQUIRE(
      WriteFileAtomic(dir.path() + "/tokenizer.json", HfJson(pre, {{"type", "NFC"}}, true, true))
          .ok());
  StatusOr<Tokenizer> t = Tokenizer::Load(dir.path());
  INFO(t.status().ToString());
  REQUIRE(t.ok());
  CHECK(t->kind() == "hf-bpe");
  CHECK(t->vocab_size() == 50257);
  CHECK(t->eot() == 50256);
  StatusOr<PreTokenizer> p = PreTokenizer::Compile(kLlama3Pattern);
  REQUIRE(p.ok());
  for (const SplitCase& c : kLlama3Cases) {
    INFO(c.text);
    CHECK(NormalizeNfc(c.text) == c.nfc);
    CHECK(Pieces(p.value(), c.nfc) == c.pieces);
    std::vector<int32_t> ids;
    t->Encode(c.text, &ids);
    CHECK(ids == c.ids);
    CHECK(t->Decode(ids) == c.nfc);
  }
}

TEST_CASE("GPT-2 as tokenizer.json encodes and fingerprints like its vocabulary files") {
  testing::TempDir dir("headlab-tok");
  Json pre = {{"type", "ByteLevel"},
              {"add_prefix_space", false},
              {"trim_offsets", true},
              {"use_regex", true}};
  REQUIRE(WriteFileAtomic(dir.path() + "/tokenizer.json", HfJson(pre, nullptr, false, false)).ok());
  Tokenizer files = LoadGpt2();
  StatusOr<Tokenizer> hf = Tokenizer::Load(dir.path() + "/tokenizer.json");
  INFO(hf.status().ToString());
  REQUIRE(hf.ok());
  CHECK(hf->sha256() == files.sha256());
  CHECK(hf->sha256() != Tokenizer::Bytes().sha256());
  for (const IdCase& c : kGpt2Cases) {
    std::vector<int32_t> ids;
    hf->Encode(c.text, &ids);
    CHECK(ids == c.ids);
  }
}

TEST_CASE("decode(encode(x)) == x on random UTF-8 and invalid bytes") {
  Tokenizer t = LoadGpt2();
  std::mt19937 rng(7);
  const std::vector<std::string> atoms = {"a",
                                          "Z",
                                          " ",
                                          "  ",
                                          "\n",
                                          "\r\n",
                                          "\t",
                                          "'s",
                                          "'",
                                          "1",
                                          "42",
                                          "\xc3\xa9",
                                          "e\xcc\x81",
                                          "\xe6\x9d\xb1",
                                          "\xf0\x9f\x99\x82",
                                          "\xff",
                                          "\xc3",
                                          "\xe6\x9d",
                                          "\xed\xa0\x80",
                                          "\xc0\xaf",
                                          "\x80",
                                          "<|endoftext|>",
                                          ".",
                                          "--",
                                          "\xe2\x80\x94"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string s;
    int n = int(rng() % 40);
    for (int i = 0; i < n; ++i) {
      if (rng() % 4 == 0)
        s += char(rng() % 256);  // any byte
      else
        s += atoms[rng() % atoms.size()];
    }
    std::vector<int32_t> ids, byte_ids;
    t.Encode(s, &ids);
    for (int32_t id : ids) REQUIRE((id >= 0 && id < t.vocab_size()));
    CHECK(t.Decode(ids) == s);
    Tokenizer::Bytes().Encode(s, &byte_ids);
    CHECK(byte_ids.size() == s.size());
    CHECK(Tokenizer::Bytes().Decode(byte_ids) == s);
  }
}

TEST_CASE("the pre-tokenizer refuses syntax it does not implement, by name") {
  for (const char* bad :
       {"a+?", "^a", "\\d+", "[a", "(a", "a)", "\\p{Lu}", "(?<x>a)", "(a*)*", "\\w"}) {
    INFO(bad);
    StatusOr<PreTokenizer> p = PreTokenizer::Compile(bad);
    CHECK_FALSE(p.ok());
    CHECK(p.status().message().find("pre-tokenizer pattern: at offset") != std::string::npos);
  }
}

TEST_CASE("the pre-tokenizer's gaps and matches cover the text") {
  StatusOr<PreTokenizer> p = PreTokenizer::Compile("a+|b{2,3}");
  REQUIRE(p.ok());
  CHECK(Pieces(p.value(), "xaaybbbbbz") ==
        std::vector<std::string>{"x", "aa", "y", "bbb", "bb", "z"});
  StatusOr<PreTokenizer> q = PreTokenizer::Compile(R"([^\s\p{L}]+|\s+(?!\S)|\P{N}|(?=x)x)");
  REQUIRE(q.ok());
  CHECK(Pieces(q.value(), "12  ab\xff") ==
        std::vector<std::string>{"12", " ", " ", "a", "b", "\xff"});
}

TEST_CASE("Unicode classes and NFC") {
  CHECK(IsLetter('a'));
  CHECK(IsLetter(0x6771));       // 東
  CHECK_FALSE(IsLetter(0x301));  // combining acute: Mn, not L
  CHECK(IsNumber(0x0663));       // ARABIC-INDIC DIGIT THREE
  CHECK(IsNumber(0x2167));       // ROMAN NUMERAL EIGHT (Nl)
  CHECK(IsWhiteSpace(0x3000));
  CHECK_FALSE(IsWhiteSpace(0x200B));  // ZERO WIDTH SPACE is not White_Space
  CHECK_FALSE(IsLetter(kInvalidByte));
  // Canonical reordering: dot below (220) before dot above (230), then composition.
  CHECK(NormalizeNfc("q\xcc\x87\xcc\xa3") == "q\xcc\xa3\xcc\x87");
  CHECK(NormalizeNfc("s\xcc\x87\xcc\xa3") == "\xe1\xb9\xa9");                     // U+1E69
  CHECK(NormalizeNfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8") == "\xea\xb0\x81");  // jamo -> 각
  CHECK(NormalizeNfc("e\xff\xcc\x81") == "e\xff\xcc\x81");  // an invalid byte blocks composing
}

}  // namespace
}  // namespace headlab
