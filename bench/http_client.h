// A minimal blocking HTTP/1.1 client for loopback benchmarks: one request per connection
// ("Connection: close"), the whole response read before returning.
#pragma once

#include <string>

#include "common/status.h"

namespace headlab::bench {

struct HttpResponse {
  int status = 0;     // e.g. 200
  std::string body;   // decoded (Content-Length, chunked, or until close)
};

// Sends `method path` with `body` (JSON) to host:port, with "Authorization: Bearer
// <token>" when `token` is non-empty. Fails (Unavailable/IoError) on connection or
// protocol errors or after `timeout_s`; any HTTP status is a successful result.
StatusOr<HttpResponse> HttpRequest(const std::string& host, int port, const std::string& method,
                                   const std::string& path, const std::string& body,
                                   const std::string& token, double timeout_s = 60);

// Parses a complete HTTP/1.1 response (status line, headers, body). Exposed for tests.
StatusOr<HttpResponse> ParseHttpResponse(const std::string& raw);

}  // namespace headlab::bench
