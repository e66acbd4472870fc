// A real coordinator (`headlab coordinator`) run as a child process on free loopback
// ports, for benchmarks. Owned by one thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace headlab::bench {

// Returns a TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed).
StatusOr<int> FreeLoopbackPort();

class CoordinatorProcess {
 public:
  // Starts `binary coordinator` on `data_dir` with fresh tokens (the user's written to
  // data_dir/token, the workers' to data_dir/worker_token, mode 0600), stdout and stderr appended
  // to data_dir/coordinator.log, and waits up to `timeout_s` for GET /api/v1/health.
  static StatusOr<std::unique_ptr<CoordinatorProcess>> Start(const std::string& binary,
                                                             const std::string& data_dir,
                                                             double timeout_s = 30);
  // Kills the child (SIGKILL) if it is still running.
  ~CoordinatorProcess();
  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  // Sends SIGTERM and waits up to `timeout_s`; returns the exit code (SIGKILL after the
  // timeout, reported as an error).
  StatusOr<int> Stop(double timeout_s = 10);

  // Returns the CPU time (user + system) the coordinator has used so far, from
  // /proc/PID/stat; -1 when unavailable.
  double CpuSeconds() const;

  // "http://127.0.0.1:PORT", the HTTP API.
  std::string url() const { return "http://127.0.0.1:" + std::to_string(http_port_); }
  int http_port() const { return http_port_; }
  const std::string& token() const { return token_; }
  // The workers' token (READY); the user's token is refused on the worker port.
  const std::string& worker_token() const { return worker_token_; }
  // "tcp://127.0.0.1:PORT", where workers connect.
  std::string worker_endpoint() const { return "tcp://127.0.0.1:" + std::to_string(worker_port_); }
  std::string db_path() const { return data_dir_ + "/headlab.db"; }
  std::string log_path() const { return data_dir_ + "/coordinator.log"; }

 private:
  CoordinatorProcess() = default;

  // Constant after Start.
  std::string data_dir_;
  std::string token_;
  std::string worker_token_;
  int http_port_ = 0;
  int worker_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace headlab::bench
