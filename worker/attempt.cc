// Attempt: exec events -> protocol messages.
#include "worker/attempt.h"

#include <signal.h>

#include "common/log.h"
#include "common/metric_names.h"
#include "worker/nvml.h"
#include "worker/proc_rss.h"

namespace headlab {

Attempt::Attempt(Json run, int64_t attempt, Json provenance, AttemptOptions options, Emit emit)
    : run_(std::move(run)),
      attempt_(attempt),
      options_(options),
      emit_(std::move(emit)),
      stderr_tail_(options.stderr_tail_bytes),
      host_provenance_(std::move(provenance)),
      provenance_(host_provenance_) {}

StatusOr<std::unique_ptr<Attempt>> Attempt::Start(Json run, int64_t attempt,
                                                  const std::vector<std::string>& argv,
                                                  const std::map<std::string, std::string>& env,
                                                  Json provenance, AttemptOptions options,
                                                  Emit emit) {
  std::unique_ptr<Attempt> a(
      new Attempt(std::move(run), attempt, std::move(provenance), options, std::move(emit)));
  StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(argv, env);
  if (!child.ok()) return child.status();
  a->child_ = std::move(*child);
  a->started_ = Clock::now();
  if (auto cvd = env.find("CUDA_VISIBLE_DEVICES"); cvd != env.end()) {
    size_t start = 0;
    const std::string& list = cvd->second;
    while (start < list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      if (comma > start) a->gpus_.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return a;
}

void Attempt::ReportProvenance() {
  Json body = Body();
  body["fields"] = provenance_;
  emit_(wire::kProvenance, std::move(body));
}

void Attempt::RetainCheckpoints(RetentionPolicy policy, const std::string& out_dir) {
  checkpoints_.emplace(std::move(policy), out_dir);
}

void Attempt::Kill() {
  child_->SignalGroup(SIGKILL);
  kill_at_ = Clock::time_point::max();
}

Json Attempt::Body() const { return Json{{"run", run_}, {"attempt", attempt_}}; }

std::vector<int> Attempt::Fds() const {
  std::vector<int> fds;
  if (child_->stdout_fd() >= 0) fds.push_back(child_->stdout_fd());
  if (child_->stderr_fd() >= 0) fds.push_back(child_->stderr_fd());
  return fds;
}

void Attempt::OnReadable(int fd) {
  std::string data;
  if (fd == child_->stdout_fd()) {
    child_->Read(fd, &data);
    stdout_lines_.Append(data.data(), data.size(), [this](const std::string& l) { HandleLine(l); });
  } else if (fd == child_->stderr_fd()) {
    child_->Read(fd, &data);
    stderr_tail_.Append(data.data(), data.size());
  }
}

void Attempt::HandleLine(const std::string& line) {
  StatusOr<ExecEvent> ev = ParseExecEvent(line);
  if (!ev.ok()) {
    // exec.md: non-event stdout is ignored, logged at most once per attempt.
    if (!logged_bad_line_) {
      LogWarn("run " + run_.dump() + " attempt " + std::to_string(attempt_) +
              ": ignoring stdout that is not an event (" + ev.status().message() + ")");
      logged_bad_line_ = true;
    }
    return;
  }
  switch (ev->type) {
    case ExecEvent::Type::kMetric:
      if (points_.empty()) batch_started_ = Clock::now();
      points_.push_back(
          Json::array({next_metric_seq_++, ev->step, ev->key, ev->value, ev->time_s}));
      // The child trains (or measures): the system series start one period later, so a
      // run that reports and exits within a period (a test, a quick command) has none.
      if (next_sample_ == Clock::time_point::max() && options_.system_period.count() > 0)
        next_sample_ = Clock::now() + options_.system_period;
      if (points_.size() >= options_.metrics_batch) FlushMetrics();
      break;
    case ExecEvent::Type::kArtifact: {
      FlushMetrics();  // keep the stream in the order exec wrote it
      Json body = Body();
      body.update(Json{{"seq", next_artifact_seq_++},
                       {"kind", ev->kind},
                       {"path", ev->path},
                       {"sha256", ev->sha256},
                       {"bytes", ev->bytes},
                       {"step", ev->step}});
      emit_(wire::kArtifact, std::move(body));
      if (checkpoints_ && ev->kind == "checkpoint") {
        const int64_t seq = next_artifact_seq_ - 1;
        for (const CheckpointTracker::Checkpoint& c :
             checkpoints_->Add({seq, ev->path, ev->step, int64_t(ev->bytes)})) {
          Json gone = Body();
          gone.update(Json{{"seq", c.seq}, {"path", c.path}});
          emit_(wire::kArtifactDeleted, std::move(gone));
        }
      }
      break;
    }
    case ExecEvent::Type::kProvenance: {
      // Exec's fields: the newest wins (a re-planned layer's attention_paths replace the
      // first update's). The worker's host facts win over exec's on a name clash: it
      // computed them itself.
      provenance_.update(ev->object);
      provenance_.update(host_provenance_);
      ReportProvenance();
      break;
    }
    case ExecEvent::Type::kSummary:
      summary_ = ev->object;
      break;
    case ExecEvent::Type::kLog:
      LogInfo("run " + run_.dump() + " attempt " + std::to_string(attempt_) + ": " + ev->key);
      break;
  }
}

void Attempt::FlushMetrics() {
  if (points_.empty()) return;
  Json body = Body();
  body["points"] = std::move(points_);
  points_ = Json::array();
  emit_(wire::kMetrics, std::move(body));
}

void Attempt::SampleSystem(Clock::time_point now) {
  next_sample_ = now + options_.system_period;
  // Whole seconds since the start are the step: one point per key and step, even when
  // training steps stall (an evaluation, a checkpoint).
  const int64_t t = std::chrono::duration_cast<std::chrono::seconds>(now - started_).count();
  if (t == last_sample_s_) return;
  last_sample_s_ = t;
  const double wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto add = [&](const char* key, double value) {
    if (points_.empty()) batch_started_ = now;
    points_.push_back(Json::array({next_metric_seq_++, t, key, value, wall}));
  };
  if (auto rss = GroupRssBytes(child_->pid()); rss.ok())
    add(metric::kSysHostRssBytes, double(*rss));
  if (gpus_.empty() || gpu_warned_) return;
  double util = 0, mem = 0;
  for (const std::string& d : gpus_) {
    auto r = ReadGpu(d);
    if (!r.ok()) {
      // Once per attempt: a host without NVML still trains; it just has no GPU series.
      LogWarn("run " + run_.dump() + " attempt " + std::to_string(attempt_) +
              ": no GPU metrics: " + r.status().message());
      gpu_warned_ = true;
      return;
    }
    util += r->util_pct;
    mem += double(r->mem_used_bytes);
  }
  add(metric::kSysGpuUtilPct, util / double(gpus_.size()));  // mean over the attempt's GPUs
  add(metric::kSysGpuMemBytes, mem);                         // summed
}

void Attempt::Cancel(Clock::time_point now) {
  if (finished_) return;
  cancelled_ = true;
  Terminate(now);
}

void Attempt::Abandon(Clock::time_point now) {
  if (finished_) return;
  abandoned_ = true;
  Terminate(now);
}

void Attempt::Terminate(Clock::time_point now) {
  if (signalled_ || held_exit_) return;  // held: already reaped, nothing to signal
  signalled_ = true;
  child_->SignalGroup(SIGTERM);
  kill_at_ = now + options_.cancel_grace;
}

Attempt::Clock::time_point Attempt::NextDeadline() const {
  Clock::time_point t = held_exit_ ? held_until_ : std::min(kill_at_, next_sample_);
  if (!points_.empty()) t = std::min(t, batch_started_ + options_.metrics_flush);
  return t;
}

namespace {

// How long a child killed by a signal this worker did not send waits for the worker's own
// stop (see Tick).
constexpr std::chrono::milliseconds kOutsideSignalGrace{2000};

bool IsStopSignal(int sig) {
  return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGKILL;
}

}  // namespace

bool Attempt::Tick(Clock::time_point now) {
  if (finished_) return true;
  if (held_exit_) {
    if (!abandoned_ && !cancelled_ && now < held_until_) return false;
    Finish(*held_exit_);
    return true;
  }
  if (now >= next_sample_ && !signalled_) SampleSystem(now);
  if (!points_.empty() && now >= batch_started_ + options_.metrics_flush) FlushMetrics();
  if (now >= kill_at_) {
    LogWarn("run " + run_.dump() + " attempt " + std::to_string(attempt_) +
            ": still running after the cancel grace period, sending SIGKILL");
    child_->SignalGroup(SIGKILL);
    kill_at_ = Clock::time_point::max();
  }
  std::optional<ExitInfo> exit = child_->TryReap();
  if (!exit) return false;
  if (!signalled_ && IsStopSignal(exit->signal)) {
    // Killed by a stop signal this worker did not send. On a Slurm requeue, preemption or
    // scancel, slurmstepd signals every process of the job step at once, so the child can
    // die before the worker handles its own SIGTERM; reported at once, that would fail the
    // run. Held briefly instead: if the worker stops meanwhile the attempt is abandoned
    // (and requeued by the coordinator), else it is reported as failed as before.
    held_exit_ = exit;
    held_until_ = now + kOutsideSignalGrace;
    return false;
  }
  Finish(*exit);
  return true;
}

void Attempt::Finish(const ExitInfo& exit) {
  // Drain what the child wrote before exiting; the group was killed at reap, so nothing
  // can keep writing. A pipe still held by an escaped process just ends here.
  for (int fd : Fds()) OnReadable(fd);
  stdout_lines_.Finish([this](const std::string& l) { HandleLine(l); });
  child_->ClosePipes();
  FlushMetrics();
  finished_ = true;
  if (abandoned_ && !cancelled_) {
    LogInfo("run " + run_.dump() + " attempt " + std::to_string(attempt_) + ": stopped (" +
            (exit.Describe().empty() ? "exit 0" : exit.Describe()) +
            ") because this worker is stopping; left to the coordinator to requeue");
    return;
  }
  Json body = Body();
  std::string status, error = exit.Describe();
  if (cancelled_) {
    status = "cancelled";
    error = "cancelled" + (error.empty() ? std::string() : " (" + error + ")");
  } else {
    status = exit.exit_code == 0 && exit.signal == 0 ? "succeeded" : "failed";
  }
  body.update(Json{{"status", status},
                   {"exit_code", exit.exit_code},
                   {"error", error},
                   {"stderr_tail", stderr_tail_.str()},
                   {"summary", summary_}});
  LogInfo("run " + run_.dump() + " attempt " + std::to_string(attempt_) + ": " + status + " (" +
          (exit.Describe().empty() ? "exit 0" : exit.Describe()) + ")");
  emit_(wire::kDone, std::move(body));
}

}  // namespace headlab
