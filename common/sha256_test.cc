#include "common/sha256.h"

#include <catch2/catch.hpp>

using headlab::Sha256Hex;

TEST_CASE("SHA-256 matches the FIPS 180-4 test vectors") {
  CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(Sha256Hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("SHA-256 is independent of how the input is split") {
  std::string s(1000, 'x');
  for (size_t i = 0; i < s.size(); ++i) s[i] = char(i * 7);
  headlab::Sha256 h;
  for (size_t i = 0; i < s.size(); i += 13) h.Update(s.substr(i, 13));
  CHECK(h.HexDigest() == Sha256Hex(s));
}
