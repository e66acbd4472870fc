// The simulated worker's loop: the main loop of a real worker (receive, dispatch by
// command, heartbeat timer) with the exec child replaced by an immediate answer.
#include "bench/sim_worker.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include <zmq_addon.hpp>

#include "common/files.h"
#include "common/json.h"
#include "common/sha256.h"
#include "common/wire.h"

namespace headlab::bench {
namespace {

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

SimWorker::SimWorker(zmq::context_t* ctx, Options options)
    : ctx_(ctx), opt_(std::move(options)), mode_(opt_.mode) {}

SimWorker::~SimWorker() { Stop(); }

void SimWorker::Start(SimDriver* driver) {
  stop_.store(false);
  closed_.store(false);
  if (driver) {
    driven_ = true;
    driver->Add(this);
  } else {
    thread_ = std::thread([this] { Loop(); });
  }
}

void SimWorker::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (driven_) {
    // Its lane closes it within one round (20 ms); a stopped driver already has.
    for (int i = 0; i < 5000 && !closed_.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    driven_ = false;
  }
}

void SimWorker::ResetStats() {
  runs_done_.store(0);
  cancels_.store(0);
  points_acked_.store(0);
  std::lock_guard<std::mutex> l(mu_);
  first_metrics_sent_ = last_metrics_ack_ = last_done_ack_ = Clock::time_point{};
  max_heartbeat_gap_ = Clock::duration{};
  last_coordinator_heartbeat_ = Clock::time_point{};
  heartbeat_lateness_.clear();
}

std::string SimWorker::error() const {
  std::lock_guard<std::mutex> l(mu_);
  return error_;
}

std::vector<SimWorker::Assignment> SimWorker::assignments() const {
  std::lock_guard<std::mutex> l(mu_);
  return assignments_;
}

Clock::time_point SimWorker::first_metrics_sent() const {
  std::lock_guard<std::mutex> l(mu_);
  return first_metrics_sent_;
}

Clock::time_point SimWorker::last_metrics_ack() const {
  std::lock_guard<std::mutex> l(mu_);
  return last_metrics_ack_;
}

Clock::time_point SimWorker::last_done_ack() const {
  std::lock_guard<std::mutex> l(mu_);
  return last_done_ack_;
}

Clock::time_point SimWorker::last_heartbeat() const {
  std::lock_guard<std::mutex> l(mu_);
  return last_heartbeat_;
}

void SimWorker::SetError(const std::string& e) {
  std::lock_guard<std::mutex> l(mu_);
  if (error_.empty()) error_ = e;
}

void SimWorker::Send(const char* command, const std::string& body) {
  if (silent_.load()) return;
  const std::string& auth = std::string_view(command) == wire::kReady ? opt_.token : session_;
  sock_->send(zmq::buffer(std::string(wire::kProtocol)), zmq::send_flags::sndmore);
  sock_->send(zmq::buffer(std::string(command)), zmq::send_flags::sndmore);
  sock_->send(zmq::buffer(auth), zmq::send_flags::sndmore);
  sock_->send(zmq::buffer(body), zmq::send_flags::none);
}

void SimWorker::SendReady() {
  Json devices = Json::array();
  devices.push_back({{"index", 0},
                     {"name", "simulated cpu"},
                     {"memory_bytes", 0},
                     {"cc_major", 0},
                     {"cc_minor", 0},
                     {"kind", "cpu"}});
  Json running = Json::array();
  for (const Job& j : jobs_) running.push_back({{"run", j.run}, {"attempt", j.attempt}});
  Json ready = {{"id", opt_.identity},
                {"name", opt_.name},
                {"host", "bench-sim"},
                {"pid", int64_t(::getpid())},
                {"version", wire::kProtocol},
                {"slots", 1},
                {"devices", devices},
                {"running", running},
                {"work_dir", opt_.work_dir.empty() ? "/nonexistent/headlab-sim/" + opt_.identity
                                                   : opt_.work_dir}};
  if (!session_.empty()) ready["session"] = session_;
  Send(wire::kReady, ready.dump());
}

void SimWorker::SendHeartbeat() {
  Json running = Json::array();
  for (const Job& j : jobs_)
    if (!j.done_sent) running.push_back({{"run", j.run}, {"attempt", j.attempt}});
  Send(wire::kHeartbeat, Json{{"running", running}}.dump());
  std::lock_guard<std::mutex> l(mu_);
  last_heartbeat_ = Clock::now();
}

void SimWorker::SendDone(int64_t run, int attempt, const char* status) {
  Json done = {{"run", run},  {"attempt", attempt}, {"status", status},         {"exit_code", 0},
               {"error", ""}, {"stderr_tail", ""},  {"summary", Json::object()}};
  Send(wire::kDone, done.dump());
}

// Points are formatted by hand: at hundreds of thousands of points per second the
// benchmark's own JSON encoding would otherwise compete with the coordinator for the CPU.
void SimWorker::SendPoints(int64_t run, int attempt, int64_t first_seq, int count) {
  std::string body = "{\"run\":" + std::to_string(run) + ",\"attempt\":" + std::to_string(attempt) +
                     ",\"points\":[";
  body.reserve(body.size() + size_t(count) * 56);
  char p[128];
  double now = UnixSeconds();
  for (int i = 0; i < count; ++i) {
    int64_t seq = first_seq + i;
    int n = std::snprintf(p, sizeof p, "%s[%lld,%lld,\"train.loss\",%.6g,%.3f]", i ? "," : "",
                          static_cast<long long>(seq), static_cast<long long>(seq),
                          1.0 / double(seq + 1), now);
    body.append(p, size_t(n));
  }
  body += "]}";
  Send(wire::kMetrics, body);
  std::lock_guard<std::mutex> l(mu_);
  if (first_metrics_sent_ == Clock::time_point{}) first_metrics_sent_ = Clock::now();
}

void SimWorker::OnAssign(const std::string& body) {
  Json a = Json::parse(body, nullptr, false);
  if (a.is_discarded() || !a.contains("run") || !a.contains("attempt")) {
    SetError("bad ASSIGN body: " + body.substr(0, 200));
    return;
  }
  int64_t run = a["run"].get<int64_t>();
  int attempt = a["attempt"].get<int>();
  {
    std::lock_guard<std::mutex> l(mu_);
    assignments_.push_back({run, attempt, Clock::now()});
  }
  if (silent_.load()) return;  // a dead worker answers nothing
  Json ref = {{"run", run}, {"attempt", attempt}};
  Send(wire::kAccept, ref.dump());
  switch (mode_.load()) {
    case Mode::kNoop: {
      int points = 0;
      if (a.contains("config") && a["config"].contains("noop"))
        points = a["config"]["noop"].value("metrics", 0);
      if (points > 0) SendPoints(run, attempt, 0, points);
      SendDone(run, attempt, "succeeded");
      break;
    }
    case Mode::kIngest:
      jobs_.push_back({run, attempt});
      PumpIngest();
      break;
    case Mode::kSilentAfterAccept:
      jobs_.push_back({run, attempt});
      SendHeartbeat();  // the last message: liveness is measured from here
      silent_.store(true);
      break;
    case Mode::kResults:
      SendResults(run, attempt, a.value("config", Json::object()));
      break;
    case Mode::kHold: {
      Job j{run, attempt};
      j.hold = true;
      jobs_.push_back(j);
      break;
    }
  }
}

Clock::duration SimWorker::max_heartbeat_gap() const {
  std::lock_guard<std::mutex> l(mu_);
  return max_heartbeat_gap_;
}

std::vector<double> SimWorker::TakeHeartbeatLateness() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<double> out;
  out.swap(heartbeat_lateness_);
  return out;
}

// What a training run's evaluation leaves for paired results: per-token log-probabilities
// of `logprob_rows` held-out rows of model.context tokens (float32, schema/exec.md), in the
// attempt's directory (worker/attempt_manifest.h), and eval summaries. The values are a
// deterministic function of the run: the treatment arm (noop.metrics > 0) a little better.
void SimWorker::SendResults(int64_t run, int attempt, const Json& config) {
  if (opt_.work_dir.empty()) {
    SetError("results mode needs a work_dir");
    return;
  }
  int64_t context = 128;
  if (config.contains("model") && config["model"].is_object())
    context = config["model"].value("context", int64_t(128));
  const bool treat = config.contains("noop") && config["noop"].value("metrics", 0) > 0;
  const std::string dir =
      opt_.work_dir + "/runs/" + std::to_string(run) + "-" + std::to_string(attempt);
  const std::string path = dir + "/logprobs.f32";
  std::string bytes(size_t(context) * size_t(opt_.logprob_rows) * sizeof(float), '\0');
  double sum = 0;
  uint64_t x = uint64_t(run) * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < bytes.size() / sizeof(float); ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    float v = float(-2.0 - double(x % 1000) / 1000.0 + (treat ? 0.05 : 0.0));
    std::memcpy(&bytes[i * sizeof(float)], &v, sizeof v);
    sum += v;
  }
  const double mean = sum / double(bytes.size() / sizeof(float));
  Status st = MakeDirs(dir);
  if (st.ok()) st = WriteFileAtomic(path, bytes);
  if (!st.ok()) {
    SetError("results mode: " + st.ToString());
    return;
  }
  Send(wire::kArtifact, Json{{"run", run},
                             {"attempt", attempt},
                             {"seq", 0},
                             {"kind", "logprobs"},
                             {"path", path},
                             {"sha256", Sha256Hex(bytes)},
                             {"bytes", int64_t(bytes.size())},
                             {"step", 0}}
                            .dump());
  Json done = {{"run", run},
               {"attempt", attempt},
               {"status", "succeeded"},
               {"exit_code", 0},
               {"error", ""},
               {"stderr_tail", ""},
               {"summary", {{"eval.loss", -mean}, {"eval.ppl", std::exp(-mean)}}}};
  Send(wire::kDone, done.dump());
}

void SimWorker::PumpIngest() {
  const int64_t total = int64_t(opt_.batches) * opt_.batch_points;
  for (Job& j : jobs_) {
    if (j.done_sent || j.hold) continue;
    int64_t acked_batches = (j.acked_seq + 1) / opt_.batch_points;
    while (j.next_batch < opt_.batches && j.next_batch - acked_batches < opt_.window) {
      SendPoints(j.run, j.attempt, int64_t(j.next_batch) * opt_.batch_points, opt_.batch_points);
      ++j.next_batch;
    }
    if (j.acked_seq + 1 >= total) {
      SendDone(j.run, j.attempt, "succeeded");
      j.done_sent = true;
    }
  }
}

void SimWorker::OnAck(const std::string& body) {
  Json a = Json::parse(body, nullptr, false);
  if (a.is_discarded() || !a.contains("run") || !a.contains("attempt") || !a.contains("what")) {
    SetError("bad ACK body: " + body.substr(0, 200));
    return;
  }
  int64_t run = a["run"].get<int64_t>();
  int attempt = a["attempt"].get<int>();
  std::string what = a["what"].get<std::string>();
  if (what == wire::kDone) {
    runs_done_.fetch_add(1);
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (jobs_[i].run == run && jobs_[i].attempt == attempt) {
        jobs_.erase(jobs_.begin() + long(i));
        break;
      }
    }
    std::lock_guard<std::mutex> l(mu_);
    last_done_ack_ = Clock::now();
  } else if (what == wire::kMetrics) {
    int64_t seq = a.value("seq", int64_t(-1));
    for (Job& j : jobs_) {
      if (j.run != run || j.attempt != attempt || seq <= j.acked_seq) continue;
      points_acked_.fetch_add(seq - j.acked_seq);
      j.acked_seq = seq;
      std::lock_guard<std::mutex> l(mu_);
      last_metrics_ack_ = Clock::now();
    }
  }
}

void SimWorker::OnMessage(const std::string& command, const std::string& body) {
  if (command == wire::kWelcome) {
    Json w = Json::parse(body, nullptr, false);
    if (w.is_discarded() || !w.contains("session") || !w["session"].is_string()) {
      SetError("WELCOME without a session key: " + body.substr(0, 200));
      return;
    }
    session_ = w["session"].get<std::string>();
    welcomed_.store(true);
  } else if (command == wire::kRefuse) {
    SetError("REFUSE " + body);
    stop_.store(true);
  } else if (command == wire::kReregister) {
    reregisters_.fetch_add(1);
    welcomed_.store(false);
    SendReady();
  } else if (command == wire::kHeartbeat) {
    coordinator_heartbeats_.fetch_add(1);
    Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> l(mu_);
    if (last_coordinator_heartbeat_ != Clock::time_point{}) {
      max_heartbeat_gap_ = std::max(max_heartbeat_gap_, now - last_coordinator_heartbeat_);
      heartbeat_lateness_.push_back(std::chrono::duration<double>(now -
                                                                  last_coordinator_heartbeat_ -
                                                                  wire::kHeartbeatInterval)
                                        .count());
    }
    last_coordinator_heartbeat_ = now;
  } else if (command == wire::kAssign) {
    OnAssign(body);
  } else if (command == wire::kAck) {
    OnAck(body);
  } else if (command == wire::kCancel) {
    // E.g. an attempt the coordinator declared lost: stop streaming it and say so.
    Json c = Json::parse(body, nullptr, false);
    if (c.is_discarded() || !c.contains("run") || !c.contains("attempt")) return;
    int64_t run = c["run"].get<int64_t>();
    int attempt = c["attempt"].get<int>();
    for (Job& j : jobs_)
      if (j.run == run && j.attempt == attempt) j.done_sent = true;
    cancels_.fetch_add(1);
    SendDone(run, attempt, "cancelled");
  }
  // A HEARTBEAT needs no answer: ours go out on the timer.
}

void SimWorker::Open() {
  try {
    sock_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::dealer);
    sock_->set(zmq::sockopt::linger, 500);
    sock_->connect(opt_.endpoint);
    SendReady();
  } catch (const std::exception& e) {
    SetError(std::string("zmq: ") + e.what());
    sock_.reset();
  }
  next_heartbeat_ = Clock::now() + wire::kHeartbeatInterval;
}

void SimWorker::Service() {
  if (!sock_) return;
  try {
    std::vector<zmq::message_t> frames;
    while (zmq::recv_multipart(*sock_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
      if (frames.size() == 3 && frames[0].to_string() == wire::kProtocol)
        OnMessage(frames[1].to_string(), frames[2].to_string());
      else
        SetError("malformed message with " + std::to_string(frames.size()) + " frames");
      frames.clear();
    }
    if (!silent_.load() && welcomed_.load()) {  // like a real worker: nothing before WELCOME
      PumpIngest();
      if (Clock::now() >= next_heartbeat_) {
        SendHeartbeat();
        next_heartbeat_ = Clock::now() + wire::kHeartbeatInterval;
      }
    }
  } catch (const std::exception& e) {
    SetError(std::string("zmq: ") + e.what());
  }
}

void SimWorker::Close() {
  try {
    if (sock_ && !silent_.load()) Send(wire::kDisconnect, "{}");
  } catch (const std::exception& e) {
    SetError(std::string("zmq: ") + e.what());
  }
  sock_.reset();
  closed_.store(true);
}

void SimWorker::Loop() {
  Open();
  while (!stop_.load() && sock_) {
    zmq::pollitem_t item{sock_->handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) SetError(std::string("zmq: ") + e.what());
    }
    Service();
  }
  Close();
}

SimDriver::SimDriver(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    lanes_.push_back(std::make_unique<Lane>());
    Lane* lane = lanes_.back().get();
    lane->thread = std::thread([this, lane] { Run(lane); });
  }
}

SimDriver::~SimDriver() {
  stop_.store(true);
  for (auto& lane : lanes_) lane->thread.join();
}

void SimDriver::Add(SimWorker* sim) {
  Lane* lane = lanes_[next_++ % lanes_.size()].get();
  std::lock_guard<std::mutex> l(lane->mu);
  lane->incoming.push_back(sim);
}

void SimDriver::Run(Lane* lane) {
  std::vector<SimWorker*> sims;
  std::vector<zmq::pollitem_t> items;
  while (!stop_.load()) {
    {
      std::lock_guard<std::mutex> l(lane->mu);
      for (SimWorker* s : lane->incoming) {
        s->Open();
        sims.push_back(s);
      }
      lane->incoming.clear();
    }
    items.clear();
    for (SimWorker* s : sims)
      if (s->sock_) items.push_back({s->sock_->handle(), 0, ZMQ_POLLIN, 0});
    try {
      if (items.empty())
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      else
        zmq::poll(items, std::chrono::milliseconds(20));
    } catch (const zmq::error_t&) {
    }
    // Every sim is serviced each round (its timers too), not only those with input.
    for (auto it = sims.begin(); it != sims.end();) {
      SimWorker* s = *it;
      if (s->stop_.load() || !s->sock_) {
        s->Close();
        it = sims.erase(it);
        continue;
      }
      s->Service();
      ++it;
    }
  }
  for (SimWorker* s : sims) s->Close();
}

}  // namespace headlab::bench
