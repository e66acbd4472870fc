// SseProbe: a minimal server-sent-events reader over a blocking socket.
#include "bench/sse_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "common/json.h"

namespace headlab::bench {
namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

SseProbe::SseProbe(int port, std::vector<int64_t> runs) : port_(port), runs_(std::move(runs)) {}

SseProbe::~SseProbe() { Stop(); }

Status SseProbe::Start() {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(port_));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return Status::Unavailable("stream probe: cannot connect to 127.0.0.1:" +
                               std::to_string(port_));
  timeval tv{0, 200000};  // reads wake up to notice Stop
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string runs;
  for (int64_t r : runs_) runs += (runs.empty() ? "" : ",") + std::to_string(r);
  std::string req = "GET /api/v1/stream?runs=" + runs +
                    " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    "Accept: text/event-stream\r\n\r\n";
  if (::write(fd_, req.data(), req.size()) != ssize_t(req.size()))
    return Status::Unavailable("stream probe: cannot send the request");
  thread_ = std::thread([this] { Loop(); });
  for (int i = 0; i < 100 && !hello_; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (!hello_) return Status::Unavailable("stream probe: no hello within 10 s: " + error());
  return Status::Ok();
}

void SseProbe::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::vector<double> SseProbe::delays() const {
  std::lock_guard<std::mutex> l(mu_);
  return delays_;
}

std::string SseProbe::error() const {
  std::lock_guard<std::mutex> l(mu_);
  return error_;
}

void SseProbe::Loop() {
  std::string buf;
  char chunk[65536];
  bool header_done = false;
  while (!stop_) {
    ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n == 0) break;
    if (n < 0) continue;  // timeout: check stop_
    buf.append(chunk, size_t(n));
    if (!header_done) {
      size_t end = buf.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      if (buf.rfind("HTTP/1.1 200", 0) != 0) {
        std::lock_guard<std::mutex> l(mu_);
        error_ = "stream answered: " + buf.substr(0, buf.find("\r\n"));
        return;
      }
      buf.erase(0, end + 4);
      header_done = true;
    }
    for (size_t end; (end = buf.find("\n\n")) != std::string::npos;) {
      Consume(buf.substr(0, end));
      buf.erase(0, end + 2);
    }
  }
}

void SseProbe::Consume(const std::string& frame) {
  if (frame.rfind("event: hello", 0) == 0) hello_ = true;
  if (frame.rfind("event: points", 0) != 0) return;
  const double now = UnixNow();
  size_t data = frame.find("\ndata: ");
  Json j = Json::parse(frame.substr(data == std::string::npos ? frame.size() : data + 7), nullptr,
                       /*allow_exceptions=*/false);
  std::lock_guard<std::mutex> l(mu_);
  if (!j.is_object() || !j["points"].is_array()) {
    if (error_.empty()) error_ = "unreadable points event: " + frame.substr(0, 120);
    return;
  }
  for (const Json& row : j["points"])
    if (row.is_array() && row.size() == 7 && row[6].is_number())
      delays_.push_back(now - row[6].get<double>());
    else if (error_.empty())
      error_ = "a points row is not [run, attempt, seq, step, key, value, time_s]: " + row.dump();
}

}  // namespace headlab::bench
