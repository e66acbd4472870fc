// What every CLI command shares: the resolved coordinator URL, data dir and token, the
// HTTP client, and the mapping from Status to exit code and message.
#pragma once

#include <string>

#include "cli/args.h"
#include "cli/http_client.h"
#include "common/status.h"

namespace headlab {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;

constexpr const char* kDefaultUrl = "http://127.0.0.1:8321";
constexpr const char* kDefaultDataDir = ".headlab";

struct CliContext {
  std::string command;  // "submit", ...
  // --url, else $HEADLAB_URL, else DIR/coordinator.json, else kDefaultUrl when --data-dir
  // was not given; "" when --data-dir DIR was given and DIR holds no coordinator.json (a
  // coordinator of another directory must not answer for DIR).
  std::string url;
  std::string
      url_source;        // where `url` came from: "--url", "HEADLAB_URL", a file, "default", "none"
  std::string data_dir;  // --data-dir, else kDefaultDataDir
  std::string token;     // LookUpToken (common/token_lookup.h), else ""
  std::string token_source;  // where `token` came from ("--token-file F", ...), "" if none
  std::string ca_file;       // --ca-file, else $HEADLAB_CA_FILE, else "" (the system's CAs)
  // Returns a client for `url` with `token` (and `ca_file` for https). When the URL is the
  // data directory's (or the default) and DIR/headlab.db exists, reads that find no
  // coordinator answer from the database (cli/offline_reads.h).
  HttpClient Client() const;
  // Client() without the database: for questions only a running coordinator answers.
  HttpClient OnlineClient() const;
};

// Resolves the global options and environment. The URL: --url, else $HEADLAB_URL, else
// the HTTP address in DIR/coordinator.json (written by the coordinator of --data-dir DIR;
// a wildcard bind is dialled on loopback), else kDefaultUrl. The token: LookUpToken
// (--token-file, else $HEADLAB_TOKEN, else DIR/token); an unreadable or empty token file
// is an error, a missing DIR/token is not (reads need no token from a coordinator on
// loopback; a request that needs one then gets a clear 401). The token goes with every
// request. The CA file for https (--ca-file, else $HEADLAB_CA_FILE) must exist.
StatusOr<CliContext> ResolveContext(const std::string& command, const ParsedArgs& args);

// Returns the exit code for a failed status: 2 for InvalidArgument/NotFound (bad input),
// 1 otherwise.
int ExitCodeFor(const Status& s);

// Returns the dialable URL for a coordinator's HTTP bind address ("0.0.0.0:8321" ->
// "http://127.0.0.1:8321").
std::string UrlForBind(const std::string& http_address);

// Prints "headlab COMMAND: message" to stderr (for an unreachable coordinator also where
// its URL came from; for a refused token where it was looked for) and returns
// ExitCodeFor(s).
int Fail(const CliContext& ctx, const Status& s);

// Returns `s` percent-encoded for a URL query value (letters, digits and ._-, kept).
std::string UrlQueryEscape(const std::string& s);

// Parses a positive integer id ("12") for `what` ("experiment", "run").
StatusOr<int64_t> ParseId(const std::string& text, const std::string& what);

}  // namespace headlab
