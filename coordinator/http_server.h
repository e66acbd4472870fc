// HTTP/1.1 transport for HttpApi (Boost.Beast; the only file that includes it, since Beast
// is slow to compile). Asynchronous accept and I/O on a small thread pool; each request
// is handled synchronously by HttpApi on a pool thread; GET /api/v1/stream is served as
// server-sent events from a MetricFeed.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "coordinator/http_api.h"

namespace headlab::coord {

class MetricFeed;

class HttpServer {
 public:
  // `feed` (may be null: no live streams) must outlive the server.
  HttpServer(HttpApi* api, MetricFeed* feed = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens on "ADDR:PORT" (port 0 picks a free one). Unavailable with a clear
  // message if the address is in use; InvalidArgument if it does not parse.
  Status Listen(const std::string& address);
  // Returns "ADDR:PORT" with the actual port.
  std::string address() const;
  // Starts `threads` threads serving requests; returns at once.
  void Start(int threads);
  // Stops accepting, closes connections and joins the threads.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace headlab::coord
