// Worker main loop: wait for events (coordinator socket, attempts' pipes, the stop pipe),
// dispatch by message type, run timers.
#include "worker/worker.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "common/log.h"
#include "common/run_config.h"
#include "worker/attempt_manifest.h"
#include "worker/host_provenance.h"

namespace headlab {

// The reaping cadence: a child whose pipes closed is reaped within this long.
constexpr std::chrono::milliseconds kMaxPollWait{100};

Worker::Worker(WorkerOptions options)
    : options_(std::move(options)),
      ctx_(1),
      conn_(&ctx_, options_.connection),
      slot_busy_(options_.slots, false) {
  if (::pipe2(stop_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) stop_pipe_[0] = stop_pipe_[1] = -1;
}

Worker::~Worker() {
  running_.clear();  // ChildProcess kills and reaps whatever is left
  conn_.Close(std::chrono::milliseconds(0));
  for (int fd : stop_pipe_)
    if (fd >= 0) ::close(fd);
}

void Worker::RequestStop() {
  char b = 1;
  ssize_t ignored = ::write(stop_pipe_[1], &b, 1);
  (void)ignored;
}

std::string Worker::Key(const Json& run, int64_t attempt) {
  return CanonicalJson(run) + "/" + std::to_string(attempt);
}

int Worker::Run() {
  Status opened = conn_.Open(Clock::now());
  if (!opened.ok()) {
    LogError(opened.message());
    return 2;
  }
  SendReady();
  LogInfo("worker " + options_.name + " (" + options_.connection.identity + ") connecting to " +
          options_.connection.endpoint + " with " + std::to_string(options_.slots) + " slot(s)");
  while (!exit_code_) {
    // Poll set: [stop pipe, socket?, every attempt's open pipe fds].
    std::vector<zmq::pollitem_t> items = {{nullptr, stop_pipe_[0], ZMQ_POLLIN, 0}};
    bool have_socket = conn_.socket() != nullptr;
    if (have_socket) items.push_back({conn_.socket()->handle(), 0, ZMQ_POLLIN, 0});
    std::vector<Attempt*> owners;
    for (auto& [key, r] : running_)
      for (int fd : r.attempt->Fds()) {
        items.push_back({nullptr, fd, ZMQ_POLLIN, 0});
        owners.push_back(r.attempt.get());
      }
    try {
      zmq::poll(items, std::chrono::milliseconds(PollTimeoutMs(Clock::now())));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) LogWarn(std::string("poll: ") + e.what());
      continue;
    }
    Clock::time_point now = Clock::now();
    if (items[0].revents) OnStopRequest(now);
    size_t first_fd = have_socket ? 2 : 1;
    for (size_t i = first_fd; i < items.size(); ++i)
      if (items[i].revents) owners[i - first_fd]->OnReadable(items[i].fd);
    if (have_socket && items[1].revents)
      while (!exit_code_) {
        std::optional<WireMessage> m = conn_.Receive(now);
        if (!m) break;
        Dispatch(*m, now);
      }
    if (!exit_code_) RunTimers(Clock::now());
  }
  return *exit_code_;
}

void Worker::Dispatch(const WireMessage& m, Clock::time_point now) {
  const Json& b = m.body;
  if (m.command == wire::kWelcome) {
    bool first = !conn_.registered();
    conn_.MarkRegistered(now, b["session"].get<std::string>());
    if (first) {
      LogInfo("registered" + (b.contains("worker_id") ? " as " + b["worker_id"].dump() : "") +
              "; resending " + std::to_string(outbox_.size()) + " unacknowledged message(s)");
      outbox_.ForEach([this](const std::string& c, const Json& body) { Send(c, body); });
    }
  } else if (m.command == wire::kRefuse) {
    LogError("the coordinator refused this worker: " + b["reason"].get<std::string>());
    running_.clear();
    exit_code_ = 1;
  } else if (m.command == wire::kReregister) {
    // One READY per loss of registration: a restarted coordinator answers each message it
    // got from us before our READY with a REREGISTER.
    if (conn_.registered()) {
      LogInfo("the coordinator asked us to register again");
      conn_.MarkUnregistered(now);
      SendReady();
    }
  } else if (m.command == wire::kHeartbeat) {
    // Liveness was refreshed by Receive.
  } else if (m.command == wire::kAssign) {
    HandleAssign(b);
  } else if (m.command == wire::kCancel) {
    HandleCancel(b, now);
  } else if (m.command == wire::kAck) {
    outbox_.Ack(b["run"], b["attempt"].get<int64_t>(), b["what"], b.value("seq", int64_t(-1)));
  } else {
    LogWarn("ignoring " + m.command + " (not a coordinator -> worker command)");
  }
}

void Worker::HandleAssign(const Json& b) {
  const Json& run = b["run"];
  const int64_t attempt = b["attempt"];
  const std::string key = Key(run, attempt);
  const Json ref{{"run", run}, {"attempt", attempt}};
  auto reject = [&](const Status& why) {
    LogWarn("rejecting run " + run.dump() + " attempt " + std::to_string(attempt) + ": " +
            why.message());
    Json body = ref;
    body["reason"] = why.message();
    body["busy"] = why.code() == Status::Code::kUnavailable;
    Send(wire::kReject, body);
  };
  auto accept = [&](const Json& resume) {
    Json body = ref;
    body["resume"] = resume;
    Send(wire::kAccept, body);
  };
  if (auto it = running_.find(key); it != running_.end()) {
    accept(it->second.resume);  // a redelivered ASSIGN (at-least-once): confirm again
    return;
  }
  if (outbox_.HasDone(run, attempt)) {
    LogInfo("run " + run.dump() + " attempt " + std::to_string(attempt) +
            " already finished here; its DONE is awaiting an ACK");
    return;
  }
  if (stop_requests_ > 0) {
    // Not REJECT: the coordinator would requeue the run and likely hand it straight back
    // to this slot, burning its attempts. Unanswered, the attempt holds the slot until our
    // DISCONNECT, which makes the coordinator requeue it once.
    LogInfo("ignoring ASSIGN of run " + run.dump() + " attempt " + std::to_string(attempt) +
            " while stopping");
    return;
  }
  StatusOr<std::vector<int>> slots = PickSlots(b.value("devices", Json::array()));
  if (!slots.ok()) return reject(slots.status());
  StatusOr<CheckpointPlan> plan = PlanCheckpoints(b);
  if (!plan.ok()) return reject(plan.status());
  Json written;
  StatusOr<std::string> manifest = WriteManifest(options_.work_dir, b, &written);
  if (!manifest.ok()) return reject(manifest.status());

  std::vector<std::string> argv = options_.exec_command;
  argv.push_back(*manifest);
  std::string cvd;  // "" for CPU slots: CUDA sees no device at all
  std::vector<Device> used;
  for (int s : *slots) {
    const std::string& dev = options_.slot_devices[s];
    if (dev.empty()) continue;
    // The child names the device as our own CUDA_VISIBLE_DEVICES does (Slurm, devices.h).
    cvd += (cvd.empty() ? "" : ",") +
           ChildVisibleDevice(std::stoi(dev), std::getenv("CUDA_VISIBLE_DEVICES"));
    for (const Device& d : options_.inventory.devices)
      if (std::to_string(d.index) == dev) used.push_back(d);
  }
  Json provenance = options_.host_provenance;
  provenance["worker"] = options_.name;
  provenance["cuda_visible_devices"] = cvd;
  if (!used.empty())
    provenance["devices"] = DescribeDevices(used);
  else
    MarkCpuOnlyAttempt(&provenance);
  if (!written["resume"].is_null()) {  // the checkpoint this attempt continues from
    provenance["resume_path"] = written["resume"]["path"];
    provenance["resume_sha256"] = written["resume"]["sha256"];
    provenance["resume_step"] = written["resume"]["step"];
  }
  StatusOr<std::unique_ptr<Attempt>> a = Attempt::Start(
      run, attempt, argv, {{"CUDA_VISIBLE_DEVICES", cvd}}, provenance, options_.attempt,
      [this](const std::string& c, Json body) { Emit(c, std::move(body)); });
  if (!a.ok()) return reject(a.status());
  if (plan->retention)
    (*a)->RetainCheckpoints(*plan->retention, written["out_dir"].get<std::string>());
  accept(written["resume"]);
  (*a)->ReportProvenance();
  LogInfo("run " + run.dump() + " attempt " + std::to_string(attempt) + " started (pid " +
          std::to_string((*a)->pid()) + ", CUDA_VISIBLE_DEVICES=\"" + cvd + "\")");
  for (int s : *slots) slot_busy_[s] = true;
  running_[key] = Running{std::move(*a), *slots, written["resume"], plan->disk_need};
}

StatusOr<Worker::CheckpointPlan> Worker::PlanCheckpoints(const Json& b) const {
  CheckpointPlan plan;
  const std::string what = "run " + b["run"].dump() + " attempt " + b["attempt"].dump();
  // Normalized here too: a run queued before a key existed gets its default.
  StatusOr<Json> config = NormalizeRunConfig(b["config"], "ASSIGN.config");
  StatusOr<RetentionPolicy> policy =
      config.ok() ? RetentionOf(*config, b.value("keep_steps", Json())) : config.status();
  if (!policy.ok()) {
    LogWarn(what + ": no checkpoint retention or disk check: " + policy.status().message());
    return plan;
  }
  plan.retention = *policy;
  const CheckpointDiskNeed need = DiskNeedOf(*config, *policy);
  if (need.bytes == 0) return plan;
  const std::string dir = AbsoluteWorkDir(options_.work_dir);
  StatusOr<int64_t> free = FreeDiskBytes(dir);
  if (!free.ok()) {
    LogWarn(what + ": no disk check: " + free.status().message());
    return plan;
  }
  // Running attempts still need what they have not written yet.
  int64_t reserved = 0;
  for (const auto& [key, r] : running_)
    reserved += std::max<int64_t>(0, r.disk_need - r.attempt->checkpoint_bytes_held());
  HEADLAB_RETURN_IF_ERROR(CheckDiskRoom(need, policy->keep_last, dir, *free, reserved));
  plan.disk_need = need.bytes;
  return plan;
}

void Worker::HandleCancel(const Json& b, Clock::time_point now) {
  auto it = running_.find(Key(b["run"], b["attempt"].get<int64_t>()));
  if (it == running_.end()) {
    LogInfo("CANCEL for run " + b["run"].dump() + " attempt " + b["attempt"].dump() +
            ", which is not running here");
    return;
  }
  LogInfo("cancelling run " + b["run"].dump() + " attempt " + b["attempt"].dump());
  it->second.attempt->Cancel(now);
}

void Worker::OnStopRequest(Clock::time_point now) {
  char buf[64];
  for (ssize_t n; (n = ::read(stop_pipe_[0], buf, sizeof buf)) > 0;) stop_requests_ += int(n);
  if (stop_requests_ == 0) return;
  if (running_.empty()) {
    LogInfo("stopping");
  } else {
    LogInfo(stop_requests_ == 1 ? "stopping: ending " + std::to_string(running_.size()) +
                                      " running attempt(s); the coordinator will requeue them"
                                : "stopping now: killing running attempts");
  }
  for (auto& [key, r] : running_) {
    r.attempt->Abandon(now);
    if (stop_requests_ > 1) r.attempt->Kill();
  }
}

void Worker::RunTimers(Clock::time_point now) {
  switch (conn_.Tick(now)) {
    case Connection::Event::kOpened:
    case Connection::Event::kReadyDue:
      SendReady();
      break;
    case Connection::Event::kHeartbeatDue:
      Send(wire::kHeartbeat, Json{{"running", RunningRefs()}});
      break;
    case Connection::Event::kLost:
    case Connection::Event::kNone:
      break;
  }
  for (auto it = running_.begin(); it != running_.end();) {
    if (it->second.attempt->Tick(now)) {
      for (int s : it->second.slots) slot_busy_[s] = false;
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  if (stop_requests_ > 0 && running_.empty()) {
    // Best effort: results get one liveness period to be acknowledged (the coordinator
    // may be mid-reconnect); what stays unacknowledged is the coordinator's to expire.
    if (drain_deadline_ == Clock::time_point::max())
      drain_deadline_ = now + options_.connection.liveness;
    if (outbox_.size() > 0 && now < drain_deadline_ && stop_requests_ == 1) return;
    if (outbox_.size() > 0)
      LogWarn("stopping with " + std::to_string(outbox_.size()) + " unacknowledged message(s)");
    Send(wire::kDisconnect, Json::object());
    conn_.Close(std::chrono::milliseconds(1000));
    LogInfo("stopped");
    exit_code_ = 0;
  }
}

void Worker::SendReady() {
  Json devices = Json::array();
  for (const Device& d : options_.inventory.devices) devices.push_back(DeviceToJson(d));
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  Json ready{{"id", options_.connection.identity},
             {"name", options_.name},
             {"host", host},
             {"pid", int64_t(::getpid())},
             {"version", wire::kProtocol},
             {"slots", options_.slots},
             {"devices", devices},
             {"running", ReadyRefs()},
             {"work_dir", AbsoluteWorkDir(options_.work_dir)}};
  // After a reconnect: the last WELCOME's key proves this worker owns its id.
  if (!conn_.session().empty()) ready["session"] = conn_.session();
  Send(wire::kReady, ready);
}

void Worker::Send(const std::string& command, const Json& body) {
  if (!conn_.Send(command, body) && conn_.socket())
    LogWarn("could not queue " + command + " (send queue full)");
}

void Worker::Emit(const std::string& command, Json body) {
  if (conn_.registered()) Send(command, body);
  outbox_.Add(command, std::move(body));
}

Json Worker::RunningRefs() const {
  Json refs = Json::array();
  for (const auto& [key, r] : running_) refs.push_back(r.attempt->Ref());
  return refs;
}

StatusOr<std::vector<int>> Worker::PickSlots(const Json& devices) const {
  std::vector<int> slots;
  if (devices.empty() || !options_.inventory.has_gpu) {
    for (int i = 0; i < int(slot_busy_.size()); ++i)
      if (!slot_busy_[i]) return std::vector<int>{i};
    return Status::Unavailable("no free slot");
  }
  for (const Json& d : devices) {
    int found = -1;
    for (int i = 0; i < int(options_.slot_devices.size()); ++i)
      if (options_.slot_devices[i] == d.dump()) found = i;
    if (found < 0) return Status::InvalidArgument("no GPU " + d.dump() + " on this worker");
    if (slot_busy_[found] || std::find(slots.begin(), slots.end(), found) != slots.end())
      return Status::Unavailable("GPU " + d.dump() + " is busy");
    slots.push_back(found);
  }
  return slots;
}

Json Worker::ReadyRefs() const {
  // Finished attempts whose DONE is not yet acknowledged count as running here: that keeps
  // their leases alive until the DONE, resent after WELCOME, arrives (a lease that expired
  // meanwhile would requeue a run that has in fact finished).
  Json refs = RunningRefs();
  for (const Json& r : outbox_.DoneRefs()) refs.push_back(r);
  return refs;
}

int Worker::PollTimeoutMs(Clock::time_point now) const {
  Clock::time_point next = std::min(conn_.NextDeadline(), now + kMaxPollWait);
  for (const auto& [key, r] : running_) next = std::min(next, r.attempt->NextDeadline());
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
  return int(std::max<int64_t>(ms, 0));
}

}  // namespace headlab
