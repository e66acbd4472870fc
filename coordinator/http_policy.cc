// Request classification, credentials and connection limits of the HTTP server.
#include "coordinator/http_policy.h"

#include <arpa/inet.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "common/utf8.h"
#include "coordinator/query_string.h"
#include "coordinator/token.h"

namespace headlab::coord {
namespace {

constexpr const char* kApiPrefix = "/api/";
constexpr const char* kHealthPath = "/api/v1/health";
constexpr const char* kQueryPath = "/api/v1/query";

std::string PathOf(const std::string& target) { return target.substr(0, target.find('?')); }

bool IsApi(const std::string& path) { return path.rfind(kApiPrefix, 0) == 0; }

// Returns the bearer token of an Authorization header, "" if it carries none.
std::string BearerToken(const std::string& authorization) {
  const std::string prefix = "Bearer ";
  if (authorization.rfind(prefix, 0) != 0) return "";
  return authorization.substr(prefix.size());
}

bool Matches(const std::string& given, const std::string& token) {
  return !given.empty() && !token.empty() && TokenEquals(given, token);
}

std::string Lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// An IP literal cannot be rebound: a page reaches it only under that address.
bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Returns the media type of a Content-Type header ("Application/JSON; charset=utf-8" ->
// "application/json").
std::string MediaType(const std::string& content_type) {
  std::string t = content_type.substr(0, content_type.find(';'));
  size_t b = t.find_first_not_of(" \t"), e = t.find_last_not_of(" \t");
  return b == std::string::npos ? "" : Lower(t.substr(b, e - b + 1));
}

}  // namespace

Access RequiredAccess(const std::string& method, const std::string& target) {
  std::string path = PathOf(target);
  if (!IsApi(path)) return Access::kPublic;  // static files (other methods: 405)
  if (method == "GET" || method == "HEAD")
    return path == kHealthPath ? Access::kPublic : Access::kRead;
  if (method == "POST" && path == kQueryPath) return Access::kRead;
  return Access::kWrite;
}

size_t BodyLimitFor(Access access) {
  return access == Access::kWrite ? kMaxWriteBodyBytes : kMaxReadBodyBytes;
}

bool IsQueryRequest(const std::string& method, const std::string& target) {
  return method == "POST" && PathOf(target) == kQueryPath;
}

bool IsPooledRead(const std::string& method, const std::string& target) {
  return (method == "GET" || method == "HEAD") && RequiredAccess(method, target) == Access::kRead;
}

bool IsGridRequest(const std::string& method, const std::string& target) {
  return method == "POST" && PathOf(target) == "/api/v1/experiments";
}

std::optional<Refusal> ScreenRequest(const AccessPolicy& policy, const std::string& method,
                                     const std::string& target, const std::string& authorization,
                                     const std::string& cookie) {
  size_t bad = FirstInvalidUtf8(target);
  if (bad != std::string::npos)
    return Refusal{400, "request target: byte " + std::to_string(bad) + " is not valid UTF-8"};
  Access access = RequiredAccess(method, target);
  if (access == Access::kPublic) return std::nullopt;
  const std::string bearer = BearerToken(authorization);
  if (access == Access::kWrite) {
    if (Matches(bearer, policy.write_token)) return std::nullopt;
    return Refusal{401, "missing or wrong bearer token (Authorization: Bearer <token>)"};
  }
  if (policy.open_reads) return std::nullopt;
  // The dashboard writes the cookie with encodeURIComponent (coordinator/query_string.h).
  for (const std::string& given : {bearer, UrlDecode(CookieValue(cookie, kTokenCookie))})
    if (Matches(given, policy.write_token) || Matches(given, policy.read_token))
      return std::nullopt;
  return Refusal{401,
                 "reads need a token on this coordinator (it listens beyond loopback): "
                 "Authorization: Bearer <token>, or the dashboard's token box"};
}

std::string HostOfAuthority(const std::string& authority) {
  std::string a = Lower(authority);
  if (!a.empty() && a.front() == '[') {
    size_t close = a.find(']');
    return close == std::string::npos ? a : a.substr(1, close - 1);
  }
  size_t colon = a.find(':');
  // More than one colon without brackets: a bare IPv6 address, no port.
  if (colon != std::string::npos && a.find(':', colon + 1) == std::string::npos) a.resize(colon);
  return a;
}

std::optional<Refusal> ScreenBrowser(const AccessPolicy& policy, const std::string& method,
                                     const std::string& target, const std::string& host,
                                     const std::string& origin, const std::string& content_type) {
  if (!host.empty()) {
    const std::string name = HostOfAuthority(host);
    bool known = name == "localhost" || IsIpLiteral(name);
    for (const std::string& n : policy.host_names) known = known || Lower(n) == name;
    if (!known)
      return Refusal{421, "Host '" + name +
                              "' is not a name this coordinator serves "
                              "(IP addresses, localhost and its host names; add more with "
                              "headlab coordinator --allow-host NAME)"};
  }
  const Access access = RequiredAccess(method, target);
  if (access == Access::kPublic) return std::nullopt;
  if (!origin.empty()) {
    // The origin of the page that sent it: "http://HOST[:PORT]", or "null" (sandboxed
    // frames, file: pages), which is never this coordinator's own.
    size_t scheme = origin.find("://");
    std::string authority = scheme == std::string::npos ? "" : Lower(origin.substr(scheme + 3));
    if (authority.empty() || authority != Lower(host))
      return Refusal{403, "cross-origin request from '" + origin +
                              "' refused (only pages "
                              "this coordinator serves may use its API)"};
  }
  if (method != "GET" && method != "HEAD" && MediaType(content_type) != "application/json")
    return Refusal{415, "Content-Type must be application/json, got '" + content_type + "'"};
  return std::nullopt;
}

std::string CookieValue(const std::string& header, const std::string& name) {
  size_t i = 0;
  while (i < header.size()) {
    size_t end = header.find(';', i);
    if (end == std::string::npos) end = header.size();
    size_t b = header.find_first_not_of(' ', i);
    if (b < end) {
      size_t eq = header.find('=', b);
      if (eq < end && header.compare(b, eq - b, name) == 0 && eq - b == name.size())
        return header.substr(eq + 1, end - eq - 1);
    }
    i = end + 1;
  }
  return "";
}

bool IsLoopbackListenAddress(const std::string& address) {
  size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost") return true;
  unsigned char v4[4], v6[16];
  if (inet_pton(AF_INET, host.c_str(), v4) == 1) return v4[0] == 127;
  if (inet_pton(AF_INET6, host.c_str(), v6) == 1) {
    static const unsigned char kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(v6, kLoopback, 16) == 0) return true;
    return std::memcmp(v6, kMapped, 12) == 0 && v6[12] == 127;  // ::ffff:127.x.y.z
  }
  return false;
}

size_t MaxHttpConnections() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY)
    return kMaxHttpConnections;
  return std::clamp<size_t>(size_t(lim.rlim_cur) / 2, 16, kMaxHttpConnections);
}

}  // namespace headlab::coord
