// A small synchronous HTTP/1.1 client for the coordinator's JSON API (schema/http_api.md).
// The implementation is the CLI's only Boost.Beast translation unit (Beast is slow to
// compile); this header keeps Beast out of every other file.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

struct HttpUrl {
  bool tls = false;  // https
  std::string host;
  std::string port;
  std::string base_path;  // "" or "/prefix" (no trailing slash)
};

// Parses "http://HOST[:PORT][/PATH]" (port 80 when omitted) or "https://..." (port 443).
StatusOr<HttpUrl> ParseHttpUrl(const std::string& url);

struct HttpResponse {
  int status = 0;
  std::string body;
};

// Answers a request without the network, as the coordinator would: the CLI's reads of a
// stopped coordinator's database (cli/offline_reads.h).
using LocalHandler = std::function<HttpResponse(
    const std::string& method, const std::string& target, const std::string& body)>;

// One connection per request; not thread-safe (one client per thread). An https URL is
// dialled with TLS only: the server's certificate must chain to a trusted CA (the system's
// store, or the file given to set_ca_file) and name the URL's host; a failed handshake is
// an error naming the URL, never a retry in plain text.
class HttpClient {
 public:
  // `token` (may be empty) is sent as "Authorization: Bearer <token>".
  HttpClient(std::string base_url, std::string token,
             std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Sends `method` (GET/POST) to base_path + `target` with a JSON `body` (POST). A failure
  // to connect, shake hands (https), send or receive within the timeout is Unavailable
  // naming the URL; a CA file that cannot be loaded is InvalidArgument naming the file.
  StatusOr<HttpResponse> Request(const std::string& method, const std::string& target,
                                 const std::string& body = "");

  // Request() plus the API's error convention: 2xx -> the parsed JSON body; otherwise the
  // body's "error" as 400 InvalidArgument, 404 NotFound, 401/403 PermissionDenied,
  // anything else (409 state conflict, 5xx) Internal.
  StatusOr<Json> Call(const std::string& method, const std::string& target,
                      const Json* body = nullptr);

  // Requests that cannot reach the coordinator (an empty base URL, a refused connection or
  // an unresolvable host; not a timeout of a request under way) go to `h` instead.
  void set_unreachable_fallback(LocalHandler h) { fallback_ = std::move(h); }

  // Over https, trusts the CA certificates in `pem_file` instead of the system's store
  // (a private CA); "" restores the system's store.
  void set_ca_file(std::string pem_file) { ca_file_ = std::move(pem_file); }

  const std::string& base_url() const { return base_url_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 private:
  std::string base_url_;
  std::string token_;
  std::string ca_file_;
  std::chrono::milliseconds timeout_;
  LocalHandler fallback_;
};

}  // namespace headlab
