#include "common/utf8.h"

#include <catch2/catch.hpp>

#include <random>

#include "common/json.h"

namespace headlab {
namespace {

// The oracle: nlohmann's lexer validates UTF-8 inside strings on its own (RFC 3629).
// `s` must hold no byte below 0x20, no '"' and no '\\' (the lexer refuses those for
// other reasons).
bool NlohmannAccepts(const std::string& s) {
  return !Json::parse("\"" + s + "\"", nullptr, /*allow_exceptions=*/false).is_discarded();
}

}  // namespace

TEST_CASE("well-formed UTF-8 passes, each kind of ill-formed sequence is found") {
  CHECK(IsValidUtf8(""));
  CHECK(IsValidUtf8("plain ascii"));
  CHECK(IsValidUtf8("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e"));  // été € 𝄞
  CHECK(FirstInvalidUtf8("ab\xff") == 2);
  CHECK(FirstInvalidUtf8("\x80") == 0);               // lone continuation byte
  CHECK(FirstInvalidUtf8("x\xc0\x80") == 1);          // overlong NUL
  CHECK(FirstInvalidUtf8("\xe0\x80\xaf") == 0);       // overlong 3-byte
  CHECK(FirstInvalidUtf8("ok\xed\xa0\x80") == 2);     // UTF-16 surrogate
  CHECK(FirstInvalidUtf8("\xf4\x90\x80\x80") == 0);   // above U+10FFFF
  CHECK(FirstInvalidUtf8("\xe2\x82") == 0);           // truncated
  CHECK(FirstInvalidUtf8("\xc3\xa9\xe2\x82x") == 2);  // truncated mid-text
}

TEST_CASE(
    "FirstInvalidUtf8 agrees with nlohmann's lexer on every 2-byte and on random longer texts") {
  std::string s(2, ' ');
  for (int a = 0x20; a < 0x100; ++a) {
    for (int b = 0x20; b < 0x100; ++b) {
      if (a == '"' || a == '\\' || b == '"' || b == '\\') continue;
      s[0] = char(a);
      s[1] = char(b);
      INFO(a << " " << b);
      REQUIRE(IsValidUtf8(s) == NlohmannAccepts(s));
    }
  }
  std::mt19937 rng(7);
  // Bytes biased towards lead and continuation bytes so that valid 3- and 4-byte
  // sequences occur often.
  const unsigned char kBytes[] = {'a',  0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc2, 0xdf,
                                  0xe0, 0xe1, 0xed, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff};
  int valid = 0;
  for (int n = 0; n < 20000; ++n) {
    std::string t;
    for (int k = int(rng() % 8); k >= 0; --k) t += char(kBytes[rng() % sizeof kBytes]);
    INFO(n);
    REQUIRE(IsValidUtf8(t) == NlohmannAccepts(t));
    valid += IsValidUtf8(t);
  }
  CHECK(valid > 200);  // the sample did exercise well-formed multi-byte text
}

TEST_CASE("EscapeForMessage writes bad bytes and controls as \\xNN and keeps good text") {
  CHECK(EscapeForMessage("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(EscapeForMessage("a\xff"
                         "b") == "a\\xffb");
  CHECK(EscapeForMessage(std::string("a\0b\x1b", 4)) == "a\\x00b\\x1b");
  CHECK(EscapeForMessage("tab\tand\nnewline") == "tab\tand\nnewline");
  std::string garbage;
  for (int i = 0; i < 256; ++i) garbage += char(i);
  CHECK(IsValidUtf8(EscapeForMessage(garbage)));
}

TEST_CASE("ShortenForMessage cuts at a character boundary") {
  CHECK(ShortenForMessage("short", 60) == "short");
  CHECK(ShortenForMessage("abcdefghij", 8) == "abcde...");
  // "é" is two bytes: a cut after 5 bytes would split the third one.
  CHECK(ShortenForMessage("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 8) == "\xc3\xa9\xc3\xa9...");
  std::string many;
  for (int i = 0; i < 40; ++i) many += "\xdd\xa4l\xcc\x9a";  // 2-byte, ASCII, 2-byte
  for (size_t n = 3; n < 80; ++n) CHECK(IsValidUtf8(ShortenForMessage(many, n)));
}

}  // namespace headlab
