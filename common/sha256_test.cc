#include "common/sha256.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

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

TEST_CASE("SHA-256 of a file streams it in blocks") {
  // 3 MiB + 5 bytes: three whole 1 MiB reads and a short one.
  const std::string path = "/tmp/headlab_sha256_test_" + std::to_string(::getpid());
  std::string s(size_t(3) * 1024 * 1024 + 5, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = char((i * 2654435761u) >> 13);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(s.data(), std::streamsize(s.size()));
  }
  auto f = headlab::Sha256File(path);
  std::remove(path.c_str());
  REQUIRE(f.ok());
  CHECK(*f == Sha256Hex(s));
  CHECK(headlab::Sha256File(path).status().code() == headlab::Status::Code::kIoError);
  // The FIPS 180-4 vector of a million 'a', streamed through a file.
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(1000000, 'a');
  }
  CHECK(headlab::Sha256File(path).value() ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  std::remove(path.c_str());
}

TEST_CASE("a Sha256 in progress can be moved") {
  headlab::Sha256 a;
  a.Update("ab");
  headlab::Sha256 b(std::move(a));
  b.Update("c");
  headlab::Sha256 c;
  c = std::move(b);
  CHECK(c.HexDigest() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
