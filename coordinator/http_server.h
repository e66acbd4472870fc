// HTTP/1.1 transport for HttpApi (Boost.Beast; the only file that includes it, since Beast
// is slow to compile). Asynchronous accept and I/O on a small thread pool; each request's
// head is screened (coordinator/http_policy.h: credentials, body size) before its body is
// read; requests are handled synchronously by HttpApi on an I/O thread, SQL queries on a
// pool of their own; GET /api/v1/stream is served as server-sent events from a MetricFeed.
// Open connections are capped; a full server closes the connection idle longest.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "coordinator/http_api.h"
#include "coordinator/http_policy.h"

namespace headlab::coord {

class MetricFeed;
class ReadGate;

class HttpServer {
 public:
  // `feed` (may be null: no live streams) must outlive the server. `access` is checked on
  // each request's head, before its body is read (HttpApi checks it again). At most
  // `max_connections` connections are open at once.
  HttpServer(HttpApi* api, MetricFeed* feed, AccessPolicy access,
             size_t max_connections = MaxHttpConnections());
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens on "ADDR:PORT" (port 0 picks a free one). Unavailable with a clear
  // message if the address is in use; InvalidArgument if it does not parse.
  Status Listen(const std::string& address);
  // Returns "ADDR:PORT" with the actual port.
  std::string address() const;
  // Data reads and SQL queries pass through `gate` (read_gate.h: the WAL checkpointer can
  // hold them back); call before Start. `gate` must outlive the server.
  void SetReadGate(ReadGate* gate);
  // Starts `threads` threads serving requests; returns at once.
  void Start(int threads);
  // Stops accepting, closes connections and joins the threads (a running query finishes
  // first, within its time limit).
  void Stop();
  // Returns the number of open connections and how many were closed to admit others.
  size_t connections() const;
  uint64_t evicted_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace headlab::coord
