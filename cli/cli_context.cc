// Global option resolution and exit-code mapping.
#include "cli/cli_context.h"

#include <cstdio>
#include <cstdlib>

#include "common/files.h"

namespace headlab {

namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

}  // namespace

StatusOr<CliContext> ResolveContext(const std::string& command, const ParsedArgs& args) {
  CliContext ctx;
  ctx.command = command;
  const char* env_url = std::getenv("HEADLAB_URL");
  ctx.url = args.Get("--url", env_url && *env_url ? env_url : kDefaultUrl);
  while (ctx.url.size() > 7 && ctx.url.back() == '/') ctx.url.pop_back();
  auto url = ParseHttpUrl(ctx.url);
  if (!url.ok()) return url.status();
  ctx.data_dir = args.Get("--data-dir", kDefaultDataDir);
  const char* env_token = std::getenv("HEADLAB_TOKEN");
  if (args.Has("--token-file")) {
    auto t = ReadFile(args.Get("--token-file"));
    if (!t.ok()) return Status::InvalidArgument("--token-file: " + t.status().message());
    ctx.token = Trim(t.value());
  } else if (env_token && *env_token) {
    ctx.token = Trim(env_token);
  } else if (PathExists(ctx.data_dir + "/token")) {
    auto t = ReadFile(ctx.data_dir + "/token");
    if (t.ok()) ctx.token = Trim(t.value());
  }
  return ctx;
}

int ExitCodeFor(const Status& s) {
  if (s.ok()) return kExitOk;
  auto c = s.code();
  return c == Status::Code::kInvalidArgument || c == Status::Code::kNotFound ? kExitBadInput
                                                                             : kExitFailed;
}

int Fail(const CliContext& ctx, const Status& s) {
  std::fprintf(stderr, "headlab %s: %s\n", ctx.command.c_str(), s.message().c_str());
  return ExitCodeFor(s);
}

StatusOr<int64_t> ParseId(const std::string& text, const std::string& what) {
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || !end || *end != '\0' || v <= 0)
    return Status::InvalidArgument("expected a " + what + " id (a positive integer), got \"" +
                                   text + "\"");
  return int64_t(v);
}

}  // namespace headlab
