// One running attempt: the `headlab exec` child, its event stream turned into protocol
// messages (METRICS batches, ARTIFACT, ARTIFACT_DELETED, PROVENANCE, DONE), checkpoint
// retention, cancel with a grace period.
// Driven by the worker's main loop thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/child_process.h"
#include "common/json.h"
#include "common/status.h"
#include "common/wire.h"
#include "worker/checkpoint_tracker.h"
#include "worker/child_output.h"
#include "worker/exec_event_reader.h"

namespace headlab {

struct AttemptOptions {
  // METRICS batching: a batch goes out when it holds `metrics_batch` points or its oldest
  // point is `metrics_flush` old, whichever comes first (schema/protocol.md, METRICS).
  std::chrono::milliseconds metrics_flush{100};
  size_t metrics_batch = 1000;
  std::chrono::milliseconds cancel_grace = wire::kCancelGrace;
  size_t stderr_tail_bytes = 4096;
  // System metrics (common/metric_names.h "sys."): the child's process-group RSS and, for
  // an attempt given GPUs, their utilisation and memory in use (NVML), sampled every
  // `system_period` from one period after the child's first metric, at step = whole
  // seconds since the attempt started. 0 turns sampling off.
  std::chrono::milliseconds system_period{10000};
};

class Attempt {
 public:
  using Clock = std::chrono::steady_clock;
  // Receives each outgoing message (command, body) in order.
  using Emit = std::function<void(const std::string& command, Json body)>;

  // Spawns argv with `env` added. `provenance` holds the host's and this attempt's facts;
  // exec's own fields are merged in as they arrive.
  static StatusOr<std::unique_ptr<Attempt>> Start(Json run, int64_t attempt,
                                                  const std::vector<std::string>& argv,
                                                  const std::map<std::string, std::string>& env,
                                                  Json provenance, AttemptOptions options,
                                                  Emit emit);

  const Json& run() const { return run_; }
  int64_t attempt() const { return attempt_; }
  int pid() const { return child_->pid(); }
  // Returns {run, attempt}, the protocol's `ref`.
  Json Ref() const { return Json{{"run", run_}, {"attempt", attempt_}}; }
  // Emits PROVENANCE with the fields known so far (the caller does it once after ACCEPT).
  void ReportProvenance();
  // Applies checkpoint retention to the checkpoint artifacts the child reports from now
  // on (those in `out_dir`, the attempt's directory): each deletion is emitted as
  // ARTIFACT_DELETED {run, attempt, seq, path} after the file is gone.
  void RetainCheckpoints(RetentionPolicy policy, const std::string& out_dir);
  // Returns the bytes of this attempt's checkpoints on disk now (0 without retention).
  int64_t checkpoint_bytes_held() const { return checkpoints_ ? checkpoints_->bytes_held() : 0; }
  // Returns the child's pipe fds that are still open (to poll for POLLIN).
  std::vector<int> Fds() const;
  // Consumes what is readable on `fd`.
  void OnReadable(int fd);
  // Sends SIGTERM to the child's process group, and SIGKILL after the grace period (in
  // Tick). Idempotent. The attempt ends as `cancelled` whatever its exit status.
  void Cancel(Clock::time_point now);
  // Stops the child like Cancel because this worker is going away, but emits no DONE for
  // it (its results so far are still flushed): the coordinator then sees the attempt
  // `lost` and requeues the run, resuming from its last checkpoint, instead of recording
  // a cancel nobody asked for. A Cancel before or after still reports `cancelled`.
  void Abandon(Clock::time_point now);
  // Sends SIGKILL to the group now (a second stop request). The attempt still ends as
  // `cancelled` if it was cancelled first.
  void Kill();
  // Runs timers: flushes a due METRICS batch, escalates a cancel to SIGKILL, reaps the
  // child. Returns true once the attempt has finished (and DONE was emitted unless it
  // was abandoned).
  bool Tick(Clock::time_point now);
  bool finished() const { return finished_; }
  // Returns the earliest time Tick has work to do (a batch to flush, a kill to escalate).
  Clock::time_point NextDeadline() const;

 private:
  Attempt(Json run, int64_t attempt, Json provenance, AttemptOptions options, Emit emit);
  Json Body() const;
  void HandleLine(const std::string& line);
  void FlushMetrics();
  // Appends one point of each system metric (AttemptOptions::system_period).
  void SampleSystem(Clock::time_point now);
  // SIGTERM to the group once; SIGKILL follows after the grace period (Tick).
  void Terminate(Clock::time_point now);
  void Finish(const ExitInfo& exit);

  // Constant after construction.
  const Json run_;
  const int64_t attempt_;
  const AttemptOptions options_;
  const Emit emit_;

  std::unique_ptr<ChildProcess> child_;
  std::optional<CheckpointTracker> checkpoints_;  // set by RetainCheckpoints
  LineSplitter stdout_lines_;
  TailBuffer stderr_tail_;
  Json host_provenance_;             // the host's and this attempt's facts (win on a clash)
  Json provenance_;                  // exec's fields so far (newest wins), then host_provenance_
  Json summary_ = Json::object();    // the last summary event
  Json points_ = Json::array();      // METRICS points not yet emitted
  Clock::time_point batch_started_;  // when the oldest unemitted point arrived
  int64_t next_metric_seq_ = 0;
  std::vector<std::string> gpus_;  // CUDA_VISIBLE_DEVICES entries given to the child
  Clock::time_point started_;
  Clock::time_point next_sample_ = Clock::time_point::max();  // set by the first metric
  int64_t last_sample_s_ = -1;
  bool gpu_warned_ = false;
  int64_t next_artifact_seq_ = 0;
  bool logged_bad_line_ = false;
  bool cancelled_ = false;
  bool abandoned_ = false;
  bool signalled_ = false;  // SIGTERM sent (by Cancel or Abandon)
  Clock::time_point kill_at_ = Clock::time_point::max();
  std::optional<ExitInfo> held_exit_;  // reaped after an outside stop signal (Tick)
  Clock::time_point held_until_;
  bool finished_ = false;
};

}  // namespace headlab
