// Global option resolution and exit-code mapping.
#include "cli/cli_context.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "cli/offline_reads.h"
#include "common/files.h"
#include "common/token_lookup.h"

namespace headlab {

namespace {

// The coordinator's HTTP address from DIR/coordinator.json, or "" when there is none.
std::string UrlFromCoordinatorJson(const std::string& path) {
  if (!PathExists(path)) return "";
  auto text = ReadFile(path);
  if (!text.ok()) return "";
  auto j = ParseJson(text.value(), path);
  if (!j.ok() || !j->is_object() || !(*j)["http"].is_string()) return "";
  return UrlForBind((*j)["http"].get<std::string>());
}

}  // namespace

std::string UrlForBind(const std::string& http_address) {
  size_t colon = http_address.rfind(':');
  std::string host = colon == std::string::npos ? http_address : http_address.substr(0, colon);
  std::string port = colon == std::string::npos ? "" : http_address.substr(colon);
  if (host.empty() || host == "0.0.0.0" || host == "*" || host == "::" || host == "[::]")
    host = "127.0.0.1";
  return "http://" + host + port;
}

StatusOr<CliContext> ResolveContext(const std::string& command, const ParsedArgs& args) {
  CliContext ctx;
  ctx.command = command;
  ctx.data_dir = args.Get("--data-dir", kDefaultDataDir);
  const char* env_url = std::getenv("HEADLAB_URL");
  const std::string endpoints = ctx.data_dir + "/coordinator.json";
  if (args.Has("--url")) {
    ctx.url = args.Get("--url");
    ctx.url_source = "--url";
  } else if (env_url && *env_url) {
    ctx.url = env_url;
    ctx.url_source = "HEADLAB_URL";
  } else if (std::string from_file = UrlFromCoordinatorJson(endpoints); !from_file.empty()) {
    ctx.url = from_file;
    ctx.url_source = endpoints;
  } else if (args.Has("--data-dir")) {
    ctx.url_source = "none";  // no coordinator was started there; never dial the default
  } else {
    ctx.url = kDefaultUrl;
    ctx.url_source = "default";
  }
  while (ctx.url.size() > 7 && ctx.url.back() == '/') ctx.url.pop_back();
  if (!ctx.url.empty()) {
    auto url = ParseHttpUrl(ctx.url);
    if (!url.ok()) return url.status();
  }
  const char* env_ca = std::getenv("HEADLAB_CA_FILE");
  ctx.ca_file = args.Has("--ca-file") ? args.Get("--ca-file") : env_ca ? env_ca : "";
  if (!ctx.ca_file.empty() && !PathExists(ctx.ca_file))
    return Status::InvalidArgument("CA file " + ctx.ca_file + " (from " +
                                   (args.Has("--ca-file") ? "--ca-file" : "HEADLAB_CA_FILE") +
                                   ") does not exist");
  auto token = LookUpToken(args.Get("--token-file"), std::getenv("HEADLAB_TOKEN"), ctx.data_dir);
  if (token.ok()) {
    ctx.token = token->token;
    ctx.token_source = token->source;
  } else if (token.status().code() != Status::Code::kNotFound) {
    return token.status();
  }
  return ctx;
}

HttpClient CliContext::OnlineClient() const {
  HttpClient client(url, token);
  client.set_ca_file(ca_file);
  return client;
}

HttpClient CliContext::Client() const {
  HttpClient client = OnlineClient();
  const std::string db = data_dir + "/headlab.db";
  // Only the data directory's own coordinator stands for its database: not one named by
  // --url or HEADLAB_URL.
  if (url_source != "--url" && url_source != "HEADLAB_URL" && PathExists(db))
    client.set_unreachable_fallback(OfflineReads(db, data_dir, url));
  return client;
}

int ExitCodeFor(const Status& s) {
  if (s.ok()) return kExitOk;
  auto c = s.code();
  return c == Status::Code::kInvalidArgument || c == Status::Code::kNotFound ? kExitBadInput
                                                                             : kExitFailed;
}

int Fail(const CliContext& ctx, const Status& s) {
  std::string where;
  if (s.code() == Status::Code::kUnavailable && ctx.url_source == "none")
    where = ": " + ctx.data_dir +
            "/coordinator.json does not exist, so no coordinator was started "
            "with --data-dir " +
            ctx.data_dir + " (`headlab up --data-dir " + ctx.data_dir +
            "` starts one; --url names another)";
  else if (s.code() == Status::Code::kUnavailable && !ctx.url_source.empty())
    where =
        ctx.url_source == "default"
            ? " (the default URL; give --url, HEADLAB_URL or --data-dir of a running coordinator)"
            : " (URL from " + ctx.url_source + ")";
  else if (s.code() == Status::Code::kPermissionDenied)
    where = ctx.token_source.empty() ? " (no token sent: none in --token-file, $HEADLAB_TOKEN or " +
                                           ctx.data_dir + "/token)"
                                     : " (token from " + ctx.token_source + ")";
  std::fprintf(stderr, "headlab %s: %s%s\n", ctx.command.c_str(), s.message().c_str(),
               where.c_str());
  return ExitCodeFor(s);
}

std::string UrlQueryEscape(const std::string& s) {
  std::string out;
  const char* hex = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-' || c == ',')
      out += char(c);
    else
      out += std::string("%") + hex[c >> 4] + hex[c & 15];
  }
  return out;
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
