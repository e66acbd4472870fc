// Where a program finds its token (the user's HTTP Bearer token, the workers' READY.token):
// one precedence for the coordinator, the worker and the CLI (docs/DESIGN.md, "Tokens").
#pragma once

#include <string>

#include "common/status.h"

namespace headlab {

// Where a token was found, in the order they are looked at.
enum class TokenSource { kFlag, kEnv, kDataDir };

// Which of the two credentials is looked up: its environment variable and its file in the
// data directory. The user's token writes over HTTP; the workers' token is accepted only on
// the worker port (so a worker host cannot act as a user).
struct TokenKind {
  const char* env;   // for messages: "HEADLAB_TOKEN"
  const char* file;  // in DIR: "token"
};
constexpr TokenKind kUserToken{"HEADLAB_TOKEN", "token"};
constexpr TokenKind kWorkerToken{"HEADLAB_WORKER_TOKEN", "worker_token"};

// The token and where it came from; `source` says so for messages ("--token-file FILE",
// "HEADLAB_TOKEN", "DIR/token").
struct FoundToken {
  std::string token;
  TokenSource from;
  std::string source;
};

// Returns the token of `kind` with surrounding whitespace stripped, looked up in this order:
//   1. `token_file` (the --token-file flag) if not empty;
//   2. `env_token` (the value of $<kind.env>) if not null and not empty;
//   3. `data_dir`/<kind.file> if it exists.
// NotFound if none of the three gives one (the coordinator then creates DIR/token, the
// worker refuses to start, the CLI sends no token); InvalidArgument naming the source if
// the chosen file cannot be read or holds only whitespace.
StatusOr<FoundToken> LookUpToken(const std::string& token_file, const char* env_token,
                                 const std::string& data_dir, TokenKind kind = kUserToken);

// Returns the token in `path` with surrounding whitespace stripped; InvalidArgument if it
// is empty, the read error otherwise.
StatusOr<std::string> ReadTokenFile(const std::string& path);

// Returns the file holding the CURVE public key a worker needs for the coordinator of
// `data_dir` (its coordinator.json names it as "worker_key" while the worker port is
// encrypted), or "" when the port is not encrypted or no coordinator.json is readable.
// `headlab up` and `headlab slurm submit-workers` pass it on as --coordinator-key.
std::string WorkerKeyFile(const std::string& data_dir);

}  // namespace headlab
