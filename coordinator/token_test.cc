#include "coordinator/token.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include "common/files.h"
#include "coordinator/test_util.h"

namespace headlab::coord {

TEST_CASE(
    "token: created once with mode 0600, then read back; --token-file, then HEADLAB_TOKEN, then "
    "DIR/token") {
  TempDir dir;
  ::unsetenv("HEADLAB_TOKEN");
  auto t = LoadOrCreateToken(dir.path(), "");
  REQUIRE(t.ok());
  CHECK(t->size() == 64);
  CHECK(t->find_first_not_of("0123456789abcdef") == std::string::npos);
  struct stat st;
  REQUIRE(::stat((dir.path() + "/token").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(*LoadOrCreateToken(dir.path(), "") == *t);

  REQUIRE(WriteFileAtomic(dir.path() + "/mine", "  abc\n").ok());
  CHECK(*LoadOrCreateToken(dir.path(), dir.path() + "/mine") == "abc");
  CHECK_FALSE(LoadOrCreateToken(dir.path(), dir.path() + "/missing").ok());
  REQUIRE(WriteFileAtomic(dir.path() + "/empty", "\n").ok());
  CHECK_FALSE(LoadOrCreateToken(dir.path(), dir.path() + "/empty").ok());

  ::setenv("HEADLAB_TOKEN", "from-env", 1);
  CHECK(*LoadOrCreateToken(dir.path(), dir.path() + "/mine") == "abc");
  CHECK(*LoadOrCreateToken(dir.path(), "") == "from-env");
  ::unsetenv("HEADLAB_TOKEN");
}

TEST_CASE("token comparison") {
  CHECK(TokenEquals("abc", "abc"));
  CHECK_FALSE(TokenEquals("abc", "abd"));
  CHECK_FALSE(TokenEquals("abc", "abcd"));
  CHECK_FALSE(TokenEquals("", "a"));
}

}  // namespace headlab::coord
