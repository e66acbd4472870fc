// Blocking HTTP/1.1 over a POSIX TCP socket. Chosen over Boost.Beast for the benchmark
// client: it sends a handful of requests, and keeping Beast out of bench/ keeps the
// build light on the 2-core machines. One connection per request avoids keep-alive state.
#include "bench/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace headlab::bench {
namespace {

// Closes the socket on every return path.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Waits until `fd` is ready for `events` or the deadline passes.
Status WaitFd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return Status::Unavailable("HTTP request timed out");
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, int(left));
    if (n > 0) return Status::Ok();
    if (n < 0 && errno != EINTR) return Status::IoError(std::string("poll: ") + std::strerror(errno));
  }
}

// Decodes a chunked body ("<hex size>\r\n<data>\r\n ... 0\r\n\r\n").
StatusOr<std::string> Dechunk(const std::string& in) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    size_t eol = in.find("\r\n", pos);
    if (eol == std::string::npos) return Status::IoError("HTTP: truncated chunk size");
    size_t n = std::strtoul(in.substr(pos, eol - pos).c_str(), nullptr, 16);
    pos = eol + 2;
    if (n == 0) return out;
    if (pos + n > in.size()) return Status::IoError("HTTP: truncated chunk");
    out.append(in, pos, n);
    pos += n + 2;
  }
}

// Returns true iff `raw` holds a whole response by its framing (Content-Length or the last
// chunk), so a server that keeps the connection open does not stall the client.
bool ResponseComplete(const std::string& raw) {
  size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  std::string head = raw.substr(0, head_end);
  for (char& c : head) c = char(std::tolower(static_cast<unsigned char>(c)));
  size_t cl = head.find("\r\ncontent-length:");
  if (cl != std::string::npos)
    return raw.size() - head_end - 4 >= std::strtoul(head.c_str() + cl + 17, nullptr, 10);
  if (head.find("chunked") != std::string::npos)
    return raw.size() >= 5 && raw.compare(raw.size() - 5, 5, "0\r\n\r\n") == 0;
  return false;
}

}  // namespace

StatusOr<HttpResponse> ParseHttpResponse(const std::string& raw) {
  size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos || raw.compare(0, 5, "HTTP/") != 0)
    return Status::IoError("HTTP: malformed response");
  HttpResponse r;
  size_t sp = raw.find(' ');
  r.status = std::atoi(raw.c_str() + sp + 1);
  if (r.status < 100 || r.status > 599) return Status::IoError("HTTP: bad status line");
  bool chunked = false;
  long content_length = -1;
  size_t line = raw.find("\r\n") + 2;
  while (line < head_end) {
    size_t eol = raw.find("\r\n", line);
    std::string h = raw.substr(line, eol - line);
    size_t colon = h.find(':');
    if (colon != std::string::npos) {
      std::string name = h.substr(0, colon);
      std::string value = h.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      if (!strcasecmp(name.c_str(), "content-length")) content_length = std::atol(value.c_str());
      if (!strcasecmp(name.c_str(), "transfer-encoding") &&
          strcasestr(value.c_str(), "chunked") != nullptr)
        chunked = true;
    }
    line = eol + 2;
  }
  std::string body = raw.substr(head_end + 4);
  if (chunked) {
    auto d = Dechunk(body);
    if (!d.ok()) return d.status();
    r.body = std::move(d.value());
  } else if (content_length >= 0) {
    if (body.size() < size_t(content_length)) return Status::IoError("HTTP: truncated body");
    r.body = body.substr(0, size_t(content_length));
  } else {
    r.body = std::move(body);
  }
  return r;
}

StatusOr<HttpResponse> HttpRequest(const std::string& host, int port, const std::string& method,
                                   const std::string& path, const std::string& body,
                                   const std::string& token, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(int64_t(timeout_s * 1000));
  Fd s;
  s.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s.fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)
    return Status::InvalidArgument("HTTP: not an IPv4 address: " + host);
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return Status::Unavailable("connect " + host + ":" + std::to_string(port) + ": " +
                               std::strerror(errno));
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: " + host + ":" +
                    std::to_string(port) + "\r\nConnection: close\r\n";
  if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
  if (method != "GET" || !body.empty())
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n";
  req += "\r\n" + body;
  size_t off = 0;
  while (off < req.size()) {
    HEADLAB_RETURN_IF_ERROR(WaitFd(s.fd, POLLOUT, deadline));
    ssize_t n = ::send(s.fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno != EINTR) return Status::IoError(std::string("send: ") + std::strerror(errno));
    if (n > 0) off += size_t(n);
  }
  std::string raw;
  char buf[65536];
  for (;;) {
    HEADLAB_RETURN_IF_ERROR(WaitFd(s.fd, POLLIN, deadline));
    ssize_t n = ::recv(s.fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IoError(std::string("recv: ") + std::strerror(errno));
    }
    raw.append(buf, size_t(n));
    if (ResponseComplete(raw)) break;
  }
  return ParseHttpResponse(raw);
}

}  // namespace headlab::bench
