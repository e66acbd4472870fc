// HttpClient on Boost.Beast. Beast's synchronous calls ignore tcp_stream timeouts, so each
// request runs Beast's async operations on a private io_context with run_for(): the call
// is still blocking for the caller, and a coordinator that accepts but never answers
// cannot hang the CLI.
#include "cli/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace headlab {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// Responses larger than this are refused: an export of 10^4 runs is a few MB.
constexpr uint64_t kMaxBodyBytes = uint64_t(1) << 30;

}  // namespace

StatusOr<HttpUrl> ParseHttpUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0)
    return Status::InvalidArgument("bad coordinator URL \"" + url +
                                   "\": expected http://HOST:PORT");
  std::string rest = url.substr(scheme.size());
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  HttpUrl out;
  if (slash != std::string::npos) out.base_path = rest.substr(slash);
  while (!out.base_path.empty() && out.base_path.back() == '/') out.base_path.pop_back();
  size_t colon = hostport.rfind(':');
  if (!hostport.empty() && hostport[0] == '[') {  // [::1]:8321
    size_t close = hostport.find(']');
    if (close == std::string::npos) return Status::InvalidArgument("bad coordinator URL \"" + url + "\"");
    out.host = hostport.substr(1, close - 1);
    out.port = close + 1 < hostport.size() && hostport[close + 1] == ':' ? hostport.substr(close + 2) : "80";
  } else if (colon != std::string::npos) {
    out.host = hostport.substr(0, colon);
    out.port = hostport.substr(colon + 1);
  } else {
    out.host = hostport;
    out.port = "80";
  }
  bool numeric = !out.port.empty() && out.port.size() <= 5;
  for (char c : out.port) numeric = numeric && c >= '0' && c <= '9';
  if (out.host.empty() || !numeric)
    return Status::InvalidArgument("bad coordinator URL \"" + url +
                                   "\": expected http://HOST:PORT");
  return out;
}

HttpClient::HttpClient(std::string base_url, std::string token, std::chrono::milliseconds timeout)
    : base_url_(std::move(base_url)), token_(std::move(token)), timeout_(timeout) {}

StatusOr<HttpResponse> HttpClient::Request(const std::string& method, const std::string& target,
                                           const std::string& body) {
  if (base_url_.empty()) {
    if (fallback_) return fallback_(method, target, body);
    return Status::Unavailable("no coordinator address");
  }
  auto url = ParseHttpUrl(base_url_);
  if (!url.ok()) return url.status();
  auto unreachable = [&](const std::string& what, const beast::error_code& ec) {
    return Status::Unavailable("cannot reach the coordinator at " + base_url_ + " (" + what +
                               ": " + ec.message() + ")");
  };
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  beast::flat_buffer buffer;
  http::request<http::string_body> req{method == "POST" ? http::verb::post : http::verb::get,
                                       url->base_path + target, 11};
  req.set(http::field::host, url->host + ":" + url->port);
  req.set(http::field::user_agent, "headlab-cli");
  req.set(http::field::accept, "application/json");
  if (!token_.empty()) req.set(http::field::authorization, "Bearer " + token_);
  if (method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.keep_alive(false);
  req.prepare_payload();
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxBodyBytes);

  // The chain: resolve -> connect -> write -> read; each step records the first error.
  beast::error_code error;
  std::string failed_step;
  bool done = false;
  auto fail = [&](const char* step, beast::error_code ec) {
    error = ec;
    failed_step = step;
    done = true;
  };
  resolver.async_resolve(url->host, url->port, [&](beast::error_code ec,
                                                   tcp::resolver::results_type results) {
    if (ec) return fail("resolve", ec);
    stream.expires_after(timeout_);
    stream.async_connect(results, [&](beast::error_code ec, const tcp::endpoint&) {
      if (ec) return fail("connect", ec);
      http::async_write(stream, req, [&](beast::error_code ec, size_t) {
        if (ec) return fail("send", ec);
        http::async_read(stream, buffer, parser, [&](beast::error_code ec, size_t) {
          if (ec) return fail("receive", ec);
          done = true;
        });
      });
    });
  });
  ioc.run_for(timeout_ + std::chrono::seconds(1));  // the resolve step has no expiry of its own
  if (!done) return unreachable("request", beast::error::timeout);
  if (error && fallback_ && (failed_step == std::string("resolve") || failed_step == std::string("connect")))
    return fallback_(method, target, body);  // nothing was sent: no request is answered twice
  if (error) return unreachable(failed_step, error);
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  HttpResponse out;
  out.status = int(parser.get().result_int());
  out.body = std::move(parser.get().body());
  return out;
}

StatusOr<Json> HttpClient::Call(const std::string& method, const std::string& target,
                                const Json* body) {
  auto resp = Request(method, target, body ? body->dump() : "");
  if (!resp.ok()) return resp.status();
  auto parsed = ParseJson(resp->body.empty() ? "null" : resp->body,
                          "response of " + method + " " + target);
  if (resp->status >= 200 && resp->status < 300) return parsed;
  std::string msg;
  if (parsed.ok() && parsed->is_object() && parsed->contains("error") &&
      (*parsed)["error"].is_string())
    msg = (*parsed)["error"].get<std::string>();
  else
    msg = resp->body.substr(0, 500);
  if (msg.empty()) msg = "HTTP " + std::to_string(resp->status);
  switch (resp->status) {
    case 400: return Status::InvalidArgument(msg);
    case 404: return Status::NotFound(msg);
    case 401:
    case 403: return Status::PermissionDenied(msg + " (HTTP " + std::to_string(resp->status) +
                                              "; is the token right? see --token-file)");
    default: return Status::Internal(msg + " (HTTP " + std::to_string(resp->status) + " from " +
                                     method + " " + target + ")");
  }
}

}  // namespace headlab
