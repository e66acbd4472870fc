#include "common/token_lookup.h"

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/testing/temp_dir.h"

namespace headlab {

TEST_CASE("LookUpToken: --token-file, then HEADLAB_TOKEN, then DIR/token") {
  const testing::TempDir tmp("headlab-token-lookup");
  REQUIRE(!tmp.path().empty());
  const std::string dir = tmp.path();

  auto none = LookUpToken("", nullptr, dir);
  REQUIRE(!none.ok());
  CHECK(none.status().code() == Status::Code::kNotFound);
  CHECK(LookUpToken("", "", dir).status().code() == Status::Code::kNotFound);
  CHECK(LookUpToken("", " \n", dir).status().code() == Status::Code::kNotFound);

  REQUIRE(WriteFileAtomic(dir + "/token", "from-dir\n").ok());
  CHECK(LookUpToken("", nullptr, dir)->token == "from-dir");
  CHECK(LookUpToken("", nullptr, dir)->source == dir + "/token");
  CHECK(LookUpToken("", nullptr, dir)->from == TokenSource::kDataDir);

  auto env = LookUpToken("", " from-env ", dir);
  CHECK(env->token == "from-env");
  CHECK(env->source == "HEADLAB_TOKEN");
  CHECK(env->from == TokenSource::kEnv);

  REQUIRE(WriteFileAtomic(dir + "/mine", "  from-file \n").ok());
  auto file = LookUpToken(dir + "/mine", "from-env", dir);
  CHECK(file->token == "from-file");
  CHECK(file->source == "--token-file " + dir + "/mine");
  CHECK(file->from == TokenSource::kFlag);
}

TEST_CASE("LookUpToken: a chosen file that is missing or empty is an error, not a fallback") {
  const testing::TempDir tmp("headlab-token-lookup");
  REQUIRE(!tmp.path().empty());
  const std::string dir = tmp.path();
  REQUIRE(WriteFileAtomic(dir + "/token", "from-dir\n").ok());

  auto missing = LookUpToken(dir + "/missing", "from-env", dir);
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == Status::Code::kInvalidArgument);
  CHECK(missing.status().message().rfind("--token-file: ", 0) == 0);

  REQUIRE(WriteFileAtomic(dir + "/empty", " \n").ok());
  CHECK(LookUpToken(dir + "/empty", "from-env", dir).status().code() ==
        Status::Code::kInvalidArgument);

  REQUIRE(WriteFileAtomic(dir + "/token", "\n").ok());
  auto empty_dir = LookUpToken("", nullptr, dir);
  REQUIRE(!empty_dir.ok());
  CHECK(empty_dir.status().code() == Status::Code::kInvalidArgument);
  CHECK(empty_dir.status().message().find("token file is empty") != std::string::npos);
}

TEST_CASE("LookUpToken: the workers' token has its own variable and file") {
  const testing::TempDir tmp("headlab-token-lookup");
  REQUIRE(!tmp.path().empty());
  const std::string dir = tmp.path();
  REQUIRE(WriteFileAtomic(dir + "/token", "user\n").ok());
  // The user's token is never a worker's fallback.
  CHECK(LookUpToken("", nullptr, dir, kWorkerToken).status().code() == Status::Code::kNotFound);
  REQUIRE(WriteFileAtomic(dir + "/worker_token", "worker\n").ok());
  auto file = LookUpToken("", nullptr, dir, kWorkerToken);
  CHECK(file->token == "worker");
  CHECK(file->source == dir + "/worker_token");
  auto env = LookUpToken("", "from-env", dir, kWorkerToken);
  CHECK(env->token == "from-env");
  CHECK(env->source == "HEADLAB_WORKER_TOKEN");
  CHECK(LookUpToken("", nullptr, dir)->token == "user");
}

}  // namespace headlab
