// `headlab up` / `headlab down`: an embedded coordinator plus one local worker as child
// processes of the same binary (/proc/self/exe), in the foreground (stopped together on
// SIGINT/SIGTERM) or detached (pids in DIR/up.json for `headlab down`).
//
// up.json := {"coordinator_pid": int, "worker_pid": int, "url": "http://ADDR:PORT/",
//             "http": "ADDR:PORT", "workers": "tcp://ADDR:PORT", "data_dir": DIR}
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "cli/commands.h"
#include "common/child_process.h"
#include "common/files.h"

namespace headlab {

namespace {

constexpr auto kHealthDeadline = std::chrono::seconds(30);
constexpr auto kWorkerDeadline = std::chrono::seconds(20);
constexpr auto kStopGrace = std::chrono::seconds(10);  // SIGTERM, then SIGKILL
constexpr auto kPoll = std::chrono::milliseconds(100);

// A bind address reached locally: "0.0.0.0" / "*" / "" listen everywhere, so connect to
// loopback.
std::string LocalHost(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "*" ? "127.0.0.1" : host;
}

// Splits "ADDR:PORT" (the port must be numeric).
StatusOr<std::pair<std::string, std::string>> SplitHostPort(const std::string& s,
                                                            const std::string& what) {
  size_t colon = s.rfind(':');
  std::string port = colon == std::string::npos ? "" : s.substr(colon + 1);
  bool ok = !port.empty() && port.size() <= 5;
  for (char c : port) ok = ok && c >= '0' && c <= '9';
  if (!ok) return Status::InvalidArgument(what + ": expected ADDR:PORT, got \"" + s + "\"");
  return std::make_pair(s.substr(0, colon), port);
}

// Starts `argv` (argv[0] = the headlab binary) with stdout/stderr appended to `log` and
// stdin from /dev/null; in a new session when `detach`, else in its own process group (so
// a terminal's Ctrl-C reaches only `up`, which then stops the children in order).
StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log, bool detach) {
  SpawnOptions opt;
  opt.new_session = detach;
  opt.die_with_parent = false;  // `up --detach` leaves them running; `up` stops them itself
  opt.stdout_to = opt.stderr_to = SpawnOptions::Output::kFile;
  opt.output_file = log;
  auto child = ChildProcess::Spawn(argv, {}, opt);
  if (!child.ok()) return child.status();
  return (*child)->Release();
}

bool Alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

// Returns true iff `pid` is (still) a headlab process: pids are recycled, and `down` must
// never signal a stranger.
bool IsHeadlab(pid_t pid) {
  auto cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  return cmdline.ok() && cmdline->find("headlab") != std::string::npos;
}

// Reaps `pid` if it is our child; returns true iff it has exited.
bool Exited(pid_t pid, bool child) {
  if (child) {
    int status;
    return ::waitpid(pid, &status, WNOHANG) == pid || !Alive(pid);
  }
  if (!Alive(pid)) return true;
  // A zombie (exited, not yet reaped by its parent) no longer runs.
  auto stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return true;
  size_t close = stat->rfind(')');
  return close != std::string::npos && close + 2 < stat->size() && (*stat)[close + 2] == 'Z';
}

// SIGTERM, wait up to kStopGrace, then SIGKILL. Returns how it ended, for the message.
std::string Stop(pid_t pid, bool child) {
  if (pid <= 0 || Exited(pid, child)) return "already stopped";
  ::kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + kStopGrace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Exited(pid, child)) return "stopped";
    std::this_thread::sleep_for(kPoll);
  }
  ::kill(pid, SIGKILL);
  for (int i = 0; i < 50 && !Exited(pid, child); ++i) std::this_thread::sleep_for(kPoll);
  return "killed after " + std::to_string(kStopGrace.count()) + " s";
}

std::string Tail(const std::string& path, size_t bytes = 2000) {
  auto text = ReadFile(path);
  if (!text.ok()) return "";
  return text->size() > bytes ? text->substr(text->size() - bytes) : text.value();
}

// Waits until GET /api/v1/health answers ok, or the coordinator exits, or the deadline.
Status WaitHealthy(const std::string& url, pid_t coordinator, const std::string& log) {
  HttpClient client(url, "", std::chrono::seconds(2));
  auto deadline = std::chrono::steady_clock::now() + kHealthDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    auto h = client.Call("GET", "/api/v1/health");
    if (h.ok() && h->is_object() && h->value("ok", false)) return Status::Ok();
    if (Exited(coordinator, true))
      return Status::Unavailable("the coordinator exited before it was healthy; tail of " + log +
                                 ":\n" + Tail(log));
    std::this_thread::sleep_for(kPoll * 2);
  }
  return Status::Unavailable("the coordinator did not answer " + url +
                             "/api/v1/health within 30 s; tail of " + log + ":\n" + Tail(log));
}

// Waits until the coordinator lists an alive worker. A worker that exits first (e.g.
// refused: wrong token) is an error; one that is merely slow only earns a warning.
Status WaitWorker(const std::string& url, const std::string& token, pid_t worker,
                  const std::string& log) {
  HttpClient client(url, token, std::chrono::seconds(2));  // reads need it beyond loopback
  auto deadline = std::chrono::steady_clock::now() + kWorkerDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    auto w = client.Call("GET", "/api/v1/workers");
    if (w.ok() && w->is_array())
      for (const Json& x : w.value())
        if (x.is_object() && x.value("state", std::string()) == "alive") return Status::Ok();
    if (Exited(worker, true))
      return Status::Unavailable("the worker exited before it registered; tail of " + log + ":\n" +
                                 Tail(log));
    std::this_thread::sleep_for(kPoll * 2);
  }
  std::fprintf(stderr, "headlab up: warning: no worker registered within %d s (see %s)\n",
               int(kWorkerDeadline.count()), log.c_str());
  return Status::Ok();
}

}  // namespace

int RunUp(const CliContext& ctx, const ParsedArgs& args) {
  const std::string dir = ctx.data_dir;
  auto http = SplitHostPort(args.Get("--http", "127.0.0.1:8321"), "--http");
  if (!http.ok()) return Fail(ctx, http.status());
  std::string workers = args.Get("--workers", "tcp://127.0.0.1:8322");
  if (workers.compare(0, 6, "tcp://") != 0)
    return Fail(ctx, Status::InvalidArgument("--workers: expected tcp://ADDR:PORT, got \"" +
                                             workers + "\""));
  auto wk = SplitHostPort(workers.substr(6), "--workers");
  if (!wk.ok()) return Fail(ctx, wk.status());
  // A CPU-only local worker runs one run per core unless told otherwise (as `make demo`
  // does); with GPUs the worker runs one per GPU whatever this says.
  std::string slots =
      args.Get("--worker-slots", std::to_string(std::max(1u, std::thread::hardware_concurrency())));
  if (std::atoi(slots.c_str()) <= 0)
    return Fail(ctx, Status::InvalidArgument("--worker-slots: expected a positive integer, got \"" +
                                             slots + "\""));
  const bool detach = args.Has("--detach");
  Status st = MakeDirs(dir + "/worker");
  if (!st.ok()) return Fail(ctx, st);

  const std::string up_json = dir + "/up.json";
  if (PathExists(up_json)) {
    auto prev = ReadFile(up_json);
    auto j = prev.ok() ? ParseJson(prev.value(), up_json) : StatusOr<Json>(prev.status());
    if (j.ok() && j->is_object()) {
      pid_t pid = pid_t(j->value("coordinator_pid", 0));
      if (Alive(pid) && IsHeadlab(pid))
        return Fail(
            ctx, Status::Unavailable("already up in " + dir + " (coordinator pid " +
                                     std::to_string(pid) + ", " + j->value("url", std::string()) +
                                     "); run `headlab down --data-dir " + dir + "` first"));
    }
  }

  const std::string url = "http://" + LocalHost(http->first) + ":" + http->second;
  // Something already answering there would pass the health check in our coordinator's
  // place while ours fails to bind.
  if (HttpClient(url, "", std::chrono::seconds(2)).Call("GET", "/api/v1/health").ok())
    return Fail(ctx, Status::Unavailable("a coordinator already answers at " + url +
                                         " (another `headlab up`? see --http)"));
  const std::string exe = SelfExe();
  const std::string coord_log = dir + "/coordinator.log", worker_log = dir + "/worker.log";
  std::vector<std::string> coord_argv = {
      exe,         "coordinator", "--data-dir", dir, "--http", http->first + ":" + http->second,
      "--workers", workers};
  std::vector<std::string> worker_argv = {exe,
                                          "worker",
                                          "--coordinator",
                                          "tcp://" + LocalHost(wk->first) + ":" + wk->second,
                                          "--data-dir",
                                          dir + "/worker"};
  if (args.Has("--token-file"))
    coord_argv.insert(coord_argv.end(), {"--token-file", args.Get("--token-file")});
  // The worker gets the workers' own token (the coordinator creates it before it answers
  // health, and the worker starts after that): it cannot act as a user over HTTP.
  worker_argv.insert(worker_argv.end(), {"--token-file", dir + "/worker_token"});
  worker_argv.insert(worker_argv.end(), {"--slots", slots});

  // Foreground: block the signals we wait for before any child exists (no lost signal).
  sigset_t waitset;
  sigemptyset(&waitset);
  sigaddset(&waitset, SIGINT);
  sigaddset(&waitset, SIGTERM);
  sigaddset(&waitset, SIGCHLD);
  if (!detach) ::sigprocmask(SIG_BLOCK, &waitset, nullptr);

  auto coord = Spawn(coord_argv, coord_log, detach);
  if (!coord.ok()) return Fail(ctx, coord.status());
  st = WaitHealthy(url, coord.value(), coord_log);
  if (!st.ok()) {
    Stop(coord.value(), true);
    return Fail(ctx, st);
  }
  // Beyond loopback the coordinator encrypts the worker port (--worker-curve auto) with
  // the key pair it keeps in DIR, created before it answers health.
  const std::string& wh = wk->first;
  if (!(wh == "localhost" || wh.rfind("127.", 0) == 0 || wh == "[::1]"))
    worker_argv.insert(worker_argv.end(), {"--coordinator-key", dir + "/curve_server.pub"});
  auto worker = Spawn(worker_argv, worker_log, detach);
  if (!worker.ok()) {
    Stop(coord.value(), true);
    return Fail(ctx, worker.status());
  }
  // The coordinator has created DIR/token by now if no token was given.
  std::string token = ctx.token;
  if (token.empty()) {
    auto t = ReadFile(dir + "/token");
    if (t.ok()) token = t->substr(0, t->find_first_of(" \r\n"));
  }
  st = WaitWorker(url, token, worker.value(), worker_log);
  if (!st.ok()) {
    Stop(coord.value(), true);
    return Fail(ctx, st);
  }
  std::printf("headlab is up: dashboard %s/\n", url.c_str());
  std::printf("  coordinator pid %d (log %s), worker pid %d (log %s)\n", int(coord.value()),
              coord_log.c_str(), int(worker.value()), worker_log.c_str());
  // Commands run elsewhere find it through HEADLAB_URL (or --data-dir DIR, which reads
  // DIR/coordinator.json and DIR/token).
  std::printf("  for other shells: export HEADLAB_URL=%s\n", url.c_str());
  if (ctx.token_source.empty() || ctx.token_source == dir + "/token")
    std::printf(
        "  and its token (writes; reads beyond loopback): export HEADLAB_TOKEN=$(cat %s/token)\n",
        dir.c_str());
  std::printf(
      "  the local worker runs %s run(s) at once on the CPU (--worker-slots), one per GPU\n",
      slots.c_str());
  std::fflush(stdout);

  if (detach) {
    Json state = {{"coordinator_pid", coord.value()},
                  {"worker_pid", worker.value()},
                  {"url", url + "/"},
                  {"http", http->first + ":" + http->second},
                  {"workers", workers},
                  {"data_dir", dir}};
    st = WriteFileAtomic(up_json, state.dump(2) + "\n");
    if (!st.ok()) {
      Stop(worker.value(), true);
      Stop(coord.value(), true);
      return Fail(ctx, st);
    }
    std::printf("  detached; stop with: headlab down --data-dir %s\n", dir.c_str());
    return kExitOk;
  }

  std::printf("  press Ctrl-C to stop\n");
  std::fflush(stdout);
  int code = kExitOk;
  while (true) {
    int sig = 0;
    ::sigwait(&waitset, &sig);
    if (sig == SIGINT || sig == SIGTERM) break;
    // SIGCHLD: a child that exits on its own is a failure of `up`.
    bool coord_gone = Exited(coord.value(), true), worker_gone = Exited(worker.value(), true);
    if (coord_gone || worker_gone) {
      std::fprintf(stderr, "headlab up: the %s exited unexpectedly; see %s\n",
                   coord_gone ? "coordinator" : "worker",
                   (coord_gone ? coord_log : worker_log).c_str());
      code = kExitFailed;
      break;
    }
  }
  std::fprintf(stderr, "headlab up: stopping: worker %s, ", Stop(worker.value(), true).c_str());
  std::fprintf(stderr, "coordinator %s\n", Stop(coord.value(), true).c_str());
  return code;
}

int RunDown(const CliContext& ctx, const ParsedArgs&) {
  const std::string up_json = ctx.data_dir + "/up.json";
  if (!PathExists(up_json)) {
    std::fprintf(stderr, "headlab down: nothing to stop (%s not found)\n", up_json.c_str());
    return kExitOk;
  }
  auto text = ReadFile(up_json);
  if (!text.ok()) return Fail(ctx, text.status());
  auto state = ParseJson(text.value(), up_json);
  if (!state.ok()) return Fail(ctx, state.status());
  if (!state->is_object()) return Fail(ctx, Status::Corruption(up_json + ": expected an object"));
  // The worker first, so it does not see its coordinator vanish mid-run.
  for (const char* role : {"worker", "coordinator"}) {
    pid_t pid = pid_t(state->value(std::string(role) + "_pid", 0));
    if (pid > 0 && Alive(pid) && !IsHeadlab(pid)) {
      std::fprintf(stderr, "headlab down: pid %d is no longer a headlab %s; left alone\n", int(pid),
                   role);
      continue;
    }
    std::printf("%s (pid %d): %s\n", role, int(pid), Stop(pid, false).c_str());
  }
  ::unlink(up_json.c_str());
  return kExitOk;
}

}  // namespace headlab
