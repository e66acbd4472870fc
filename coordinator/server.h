// The whole coordinator in one object: database, state machine, worker socket and HTTP
// API, started and stopped together. Used by `headlab coordinator` and by in-process
// tests (which bind port 0 and read the actual addresses back).
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace headlab::coord {

struct ServerOptions {
  std::string data_dir = ".headlab";
  std::string workers = "tcp://127.0.0.1:8322";
  std::string http = "127.0.0.1:8321";
  std::string token;  // required
  // required, and not `token`: the only one READY accepts (never accepted over HTTP)
  std::string worker_token;
  // The worker port's CURVE secret key (Z85, curve_keys.h); "" = unencrypted.
  std::string curve_secret_key;
  std::string static_root;  // dashboard directory ("" = none)
  // The headlab executable that runs SQL queries in child processes (query_child.h);
  // "" runs them in-process (tests built without the headlab binary).
  std::string query_binary;
  int http_threads = 4;
  // Reads over HTTP (GET endpoints, SQL, the live stream): kAuto leaves them open when
  // `http` is a loopback address and requires a token otherwise (schema/http_api.md).
  enum class Reads { kAuto, kOpen, kToken };
  Reads reads = Reads::kAuto;
  std::string read_token;  // optional: a token that grants reads only
  // Host names HTTP requests may use besides IP addresses, localhost and this machine's
  // name (http_policy.h ScreenBrowser).
  std::vector<std::string> allow_hosts;
};

class Server {
 public:
  Server();
  ~Server();
  // Locks DATA_DIR (Unavailable while another coordinator holds it), checks
  // DATA_DIR/headlab.db's integrity (Corruption when damaged), opens it (creating and
  // migrating it), recovers, binds both sockets
  // and starts the loop and HTTP threads. Bind errors are Unavailable.
  Status Start(const ServerOptions& options);
  // Stops HTTP, then the loop (finishing and committing the current batch), then closes
  // the database. Idempotent.
  void Stop();
  // Returns true iff the loop thread has ended (Stop, or a database write error).
  bool loop_ended() const;
  // The loop's exit status (OK after Stop).
  Status loop_status() const;

  // The actual addresses (with the ports chosen for port 0).
  std::string workers_endpoint() const;
  std::string http_address() const;
  std::string db_path() const;
  // Returns true iff HTTP reads need a token (Reads and the listen address decide).
  bool reads_need_token() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Returns the dashboard directory to serve: <source>/dashboards/dist or <source>/dashboards
// when it holds an index.html, else "".
std::string DefaultStaticRoot();

}  // namespace headlab::coord
