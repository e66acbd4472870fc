// HttpClient on Boost.Beast. Beast's synchronous calls ignore tcp_stream timeouts, so each
// request runs Beast's async operations on a private io_context with run_for(): the call
// is still blocking for the caller, and a coordinator that accepts but never answers
// cannot hang the CLI.
//
// https: TLS 1.2 or later through OpenSSL (Asio's ssl::stream over the same tcp_stream, so
// the same expiry covers the handshake). The peer must present a certificate that chains
// to a trusted CA and names the URL's host (SSL_set1_host; an IP literal is checked
// against the certificate's IP addresses), with SNI set for a host name. A fresh context
// per request costs a read of the CA bundle (a few ms); the CLI's polls are 1 s apart.
#include "cli/http_client.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

namespace headlab {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

// Responses larger than this are refused: an export of 10^4 runs is a few MB.
constexpr uint64_t kMaxBodyBytes = uint64_t(1) << 30;

bool IsIpLiteral(const std::string& host) {
  beast::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// One request's state, shared by the steps of its async chain.
struct Exchange {
  http::request<http::string_body> req;
  http::response_parser<http::string_body> parser;
  beast::flat_buffer buffer;
  beast::error_code error;
  std::string failed_step;  // "resolve", "connect", "TLS handshake", "send", "receive"
  bool done = false;

  void Fail(const char* step, beast::error_code ec) {
    error = ec;
    failed_step = step;
    done = true;
  }
};

// The last two steps of the chain, on a plain or a TLS stream.
template <class Stream>
void WriteThenRead(Stream& stream, Exchange& x) {
  http::async_write(stream, x.req, [&](beast::error_code ec, size_t) {
    if (ec) return x.Fail("send", ec);
    http::async_read(stream, x.buffer, x.parser, [&](beast::error_code ec, size_t) {
      // A peer that closes without TLS's close_notify after a complete, length-delimited
      // response lost nothing; a truncated body stays an error.
      if (ec && !(ec == ssl::error::stream_truncated && x.parser.is_done()))
        return x.Fail("receive", ec);
      x.done = true;
    });
  });
}

// Sets up `ctx` to verify servers against `ca_file` (PEM), or the system's store when "".
Status ConfigureTls(ssl::context& ctx, const std::string& ca_file) {
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
  beast::error_code ec;
  if (ca_file.empty())
    ctx.set_default_verify_paths(ec);
  else
    ctx.load_verify_file(ca_file, ec);
  if (ec)
    return ca_file.empty()
               ? Status::Unavailable("cannot load the system's trusted CA certificates (" +
                                     ec.message() + "); name a CA file with --ca-file")
               : Status::InvalidArgument("cannot load CA certificates from " + ca_file + " (" +
                                         ec.message() + "; expected PEM certificates)");
  ctx.set_verify_mode(ssl::verify_peer);
  return Status::Ok();
}

// Makes `stream` send SNI for `host` and accept only a certificate that names `host`.
Status ExpectPeer(ssl::stream<beast::tcp_stream>& stream, const std::string& host) {
  SSL* s = stream.native_handle();
  bool set = IsIpLiteral(host) ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), host.c_str()) == 1
                               : SSL_set_tlsext_host_name(s, host.c_str()) == 1 &&
                                     SSL_set1_host(s, host.c_str()) == 1;
  return set ? Status::Ok()
             : Status::InvalidArgument("cannot check TLS certificates for host " + host);
}

// Why a TLS handshake failed, with what was trusted.
std::string HandshakeFailure(ssl::stream<beast::tcp_stream>& stream, const beast::error_code& ec,
                             const HttpUrl& url, const std::string& ca_file) {
  std::string why = ec.message();
  long verify = SSL_get_verify_result(stream.native_handle());
  if (verify != X509_V_OK)
    why += std::string(": ") + X509_verify_cert_error_string(verify);
  else
    why += " (does " + url.host + ":" + url.port + " speak TLS?)";
  return why + "; trusted CAs: " +
         (ca_file.empty() ? std::string("the system's store (a private CA: --ca-file FILE or "
                                        "HEADLAB_CA_FILE)")
                          : "those in " + ca_file);
}

}  // namespace

StatusOr<HttpUrl> ParseHttpUrl(const std::string& url) {
  HttpUrl out;
  const std::string plain = "http://", secure = "https://";
  std::string rest;
  if (url.compare(0, plain.size(), plain) == 0) {
    rest = url.substr(plain.size());
  } else if (url.compare(0, secure.size(), secure) == 0) {
    rest = url.substr(secure.size());
    out.tls = true;
  } else {
    return Status::InvalidArgument("bad coordinator URL \"" + url +
                                   "\": expected http://HOST:PORT or https://HOST[:PORT]");
  }
  const std::string default_port = out.tls ? "443" : "80";
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) out.base_path = rest.substr(slash);
  while (!out.base_path.empty() && out.base_path.back() == '/') out.base_path.pop_back();
  size_t colon = hostport.rfind(':');
  if (!hostport.empty() && hostport[0] == '[') {  // [::1]:8321
    size_t close = hostport.find(']');
    if (close == std::string::npos)
      return Status::InvalidArgument("bad coordinator URL \"" + url + "\"");
    out.host = hostport.substr(1, close - 1);
    out.port = close + 1 < hostport.size() && hostport[close + 1] == ':'
                   ? hostport.substr(close + 2)
                   : default_port;
  } else if (colon != std::string::npos) {
    out.host = hostport.substr(0, colon);
    out.port = hostport.substr(colon + 1);
  } else {
    out.host = hostport;
    out.port = default_port;
  }
  bool numeric = !out.port.empty() && out.port.size() <= 5;
  for (char c : out.port) numeric = numeric && c >= '0' && c <= '9';
  if (out.host.empty() || !numeric)
    return Status::InvalidArgument("bad coordinator URL \"" + url +
                                   "\": expected http://HOST:PORT or https://HOST[:PORT]");
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
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  ssl::context tls_context(ssl::context::tls_client);
  std::optional<ssl::stream<beast::tcp_stream>> tls;
  std::optional<beast::tcp_stream> plain;
  if (url->tls) {
    Status s = ConfigureTls(tls_context, ca_file_);
    if (!s.ok()) return s;
    tls.emplace(ioc, tls_context);
    s = ExpectPeer(*tls, url->host);
    if (!s.ok()) return s;
  } else {
    plain.emplace(ioc);
  }
  beast::tcp_stream& tcp_stream = tls ? tls->next_layer() : *plain;

  Exchange x;
  x.req.method(method == "POST" ? http::verb::post : http::verb::get);
  x.req.target(url->base_path + target);
  x.req.version(11);
  const std::string host =
      url->host.find(':') == std::string::npos ? url->host : "[" + url->host + "]";
  x.req.set(http::field::host,
            url->port == (url->tls ? "443" : "80") ? host : host + ":" + url->port);
  x.req.set(http::field::user_agent, "headlab-cli");
  x.req.set(http::field::accept, "application/json");
  if (!token_.empty()) x.req.set(http::field::authorization, "Bearer " + token_);
  if (method == "POST") {
    x.req.set(http::field::content_type, "application/json");
    x.req.body() = body;
  }
  x.req.keep_alive(false);
  x.req.prepare_payload();
  x.parser.body_limit(kMaxBodyBytes);

  // The chain: resolve -> connect -> (https) handshake -> write -> read; each step records
  // the first error.
  resolver.async_resolve(
      url->host, url->port, [&](beast::error_code ec, tcp::resolver::results_type results) {
        if (ec) return x.Fail("resolve", ec);
        tcp_stream.expires_after(timeout_);
        tcp_stream.async_connect(results, [&](beast::error_code ec, const tcp::endpoint&) {
          if (ec) return x.Fail("connect", ec);
          if (!tls) return WriteThenRead(*plain, x);
          tls->async_handshake(ssl::stream_base::client, [&](beast::error_code ec) {
            if (ec) return x.Fail("TLS handshake", ec);
            WriteThenRead(*tls, x);
          });
        });
      });
  ioc.run_for(timeout_ + std::chrono::seconds(1));  // the resolve step has no expiry of its own
  auto unreachable = [&](const std::string& what, const beast::error_code& ec) {
    return Status::Unavailable("cannot reach the coordinator at " + base_url_ + " (" + what + ": " +
                               ec.message() + ")");
  };
  if (!x.done) return unreachable("request", beast::error::timeout);
  if (x.error && fallback_ && (x.failed_step == "resolve" || x.failed_step == "connect"))
    return fallback_(method, target, body);  // nothing was sent: no request is answered twice
  if (x.error && x.failed_step == "TLS handshake")
    return Status::Unavailable("TLS handshake with the coordinator at " + base_url_ +
                               " failed: " + HandshakeFailure(*tls, x.error, *url, ca_file_));
  if (x.error) return unreachable(x.failed_step, x.error);
  beast::error_code ignored;
  tcp_stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  HttpResponse out;
  out.status = int(x.parser.get().result_int());
  out.body = std::move(x.parser.get().body());
  return out;
}

StatusOr<Json> HttpClient::Call(const std::string& method, const std::string& target,
                                const Json* body) {
  auto resp = Request(method, target, body ? body->dump() : "");
  if (!resp.ok()) return resp.status();
  auto parsed =
      ParseJson(resp->body.empty() ? "null" : resp->body, "response of " + method + " " + target);
  if (resp->status >= 200 && resp->status < 300) return parsed;
  std::string msg;
  if (parsed.ok() && parsed->is_object() && parsed->contains("error") &&
      (*parsed)["error"].is_string())
    msg = (*parsed)["error"].get<std::string>();
  else
    msg = resp->body.substr(0, 500);
  if (msg.empty()) msg = "HTTP " + std::to_string(resp->status);
  switch (resp->status) {
    case 400:
      return Status::InvalidArgument(msg);
    case 404:
      return Status::NotFound(msg);
    case 401:
    case 403:
      return Status::PermissionDenied(msg + " (HTTP " + std::to_string(resp->status) +
                                      "; is the token right? see --token-file)");
    default:
      return Status::Internal(msg + " (HTTP " + std::to_string(resp->status) + " from " + method +
                              " " + target + ")");
  }
}

}  // namespace headlab
