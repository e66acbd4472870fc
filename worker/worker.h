// Worker: the daemon's state and main loop. It registers with the coordinator, accepts
// assignments for free slots, runs each as an Attempt (a `headlab exec` child), relays
// results through the Outbox, and cancels on request. One thread runs Run(); RequestStop
// may be called from any thread or a signal handler.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/json.h"
#include "worker/attempt.h"
#include "worker/connection.h"
#include "worker/devices.h"
#include "worker/disk_check.h"
#include "worker/outbox.h"

namespace headlab {

struct WorkerOptions {
  ConnectionOptions connection;  // endpoint, identity, token, timing
  AttemptOptions attempt;        // batching, cancel grace
  std::string name;
  std::string work_dir;       // manifests and out dirs: <work_dir>/runs/<run>-<attempt>/
  DeviceInventory inventory;  // what READY reports
  int slots = 1;              // concurrent attempts
  // CUDA_VISIBLE_DEVICES of each slot ("" for CPU slots); size == slots.
  std::vector<std::string> slot_devices;
  // The command an attempt runs; the manifest path is appended. Normally
  // {<real path of this binary>, "exec"}; tests substitute a script.
  std::vector<std::string> exec_command;
  Json host_provenance = Json::object();
};

class Worker {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Worker(WorkerOptions options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Runs until stopped or refused. Stopping ends the attempts (SIGTERM, SIGKILL after
  // the grace period) without a DONE, waits up to one liveness period for their results
  // so far to be acknowledged, sends DISCONNECT (the coordinator marks the attempts lost
  // and requeues their runs) and returns 0. REFUSE returns 1; an endpoint ZeroMQ
  // rejects returns 2.
  int Run();
  // Asks Run to shut down; a second call kills running attempts without waiting for the
  // grace period. Async-signal-safe (one write(2) to a pipe).
  void RequestStop();
  // Returns the pipe end RequestStop writes to (for a signal handler).
  int stop_fd() const { return stop_pipe_[1]; }

 private:
  struct Running {
    std::unique_ptr<Attempt> attempt;
    std::vector<int> slots;
    Json resume;            // the checkpoint it resumes from (ACCEPT.resume), or null
    int64_t disk_need = 0;  // bytes its checkpoints need at once (disk_check.h)
  };
  // What an ASSIGN's checkpoints need: the retention policy (none when the config cannot
  // be read here: exec reports that) and the disk need, checked against the free space.
  struct CheckpointPlan {
    std::optional<RetentionPolicy> retention;
    int64_t disk_need = 0;
  };

  void Dispatch(const WireMessage& m, Clock::time_point now);
  void HandleAssign(const Json& body);
  // Returns the plan of ASSIGN `body`, or the IoError naming the need and the free space
  // when the work directory's disk cannot hold the run's checkpoints.
  StatusOr<CheckpointPlan> PlanCheckpoints(const Json& body) const;
  void HandleCancel(const Json& body, Clock::time_point now);
  void RunTimers(Clock::time_point now);
  void OnStopRequest(Clock::time_point now);
  void SendReady();
  void Send(const std::string& command, const Json& body);
  // Keeps a result in the outbox and sends it if registered.
  void Emit(const std::string& command, Json body);
  // Returns the refs of the running attempts (HEARTBEAT).
  Json RunningRefs() const;
  // Returns RunningRefs plus finished attempts whose DONE awaits an ACK (READY).
  Json ReadyRefs() const;
  // Returns the slots for ASSIGN.devices (the GPU ordinals the coordinator picked), or
  // any one free slot when it names none. Unavailable when they are busy (REJECT busy: the
  // coordinator requeues without charging the run), InvalidArgument when this worker has
  // no such device.
  StatusOr<std::vector<int>> PickSlots(const Json& devices) const;
  int PollTimeoutMs(Clock::time_point now) const;
  static std::string Key(const Json& run, int64_t attempt);

  // Constant after construction.
  const WorkerOptions options_;
  zmq::context_t ctx_;
  int stop_pipe_[2] = {-1, -1};

  Connection conn_;
  Outbox outbox_;
  std::map<std::string, Running> running_;  // by Key(run, attempt)
  std::vector<bool> slot_busy_;
  int stop_requests_ = 0;  // SIGTERM/SIGINT/RequestStop seen so far
  // Stopping with no attempts left: wait for the outbox to drain (ACKs) until then.
  Clock::time_point drain_deadline_ = Clock::time_point::max();
  std::optional<int> exit_code_;  // set when Run should return
};

}  // namespace headlab
