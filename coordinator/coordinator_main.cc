// `headlab coordinator`: flags, token, signals; the work is in server.cc.
#include "coordinator/coordinator_main.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/files.h"
#include "common/flags.h"
#include "common/json.h"
#include "common/log.h"
#include "coordinator/curve_keys.h"
#include "coordinator/server.h"
#include "coordinator/token.h"

namespace headlab {
namespace {

// The coordinator's options, for ParseFlags and the --help text alike.
const FlagsSpec& CoordinatorSpec() {
  static const FlagsSpec kSpec{
      "headlab coordinator",
      {{"--data-dir", "", "DIR", "database, token and logs (default .headlab)"},
       {"--workers", "", "EP", "worker socket (default tcp://127.0.0.1:8322; port 0 = any free)"},
       {"--http", "", "ADDR:PORT", "HTTP API (default 127.0.0.1:8321; port 0 = any free)"},
       {"--token-file", "", "FILE",
        "the user's token (HTTP writes; workers may use it too); default:\n"
        "$HEADLAB_TOKEN, else DIR/token (created with mode 0600 if missing).\n"
        "Workers should use DIR/worker_token (created too): it is\n"
        "accepted on the worker port only, never over HTTP"},
       {"--dashboard", "", "DIR",
        "static files served at / (default: the source tree's dashboards/)"},
       {"--reads", "", "MODE",
        "who may read over HTTP (GET endpoints, SQL, the live stream):\n"
        "auto (default): anyone when --http is a loopback address, else\n"
        "only with the token; open: anyone; token: only with the token"},
       {"--read-token-file", "", "FILE", "a second token that grants reads only (for viewers)"},
       {"--worker-curve", "", "MODE",
        "encrypt the worker port with ZeroMQ CURVE (key pair in\n"
        "DIR/curve_server.{key,pub}; workers need --coordinator-key\n"
        "DIR/curve_server.pub): auto (default): when --workers is not a\n"
        "loopback address; on; off"},
       {"--allow-host", "", "NAME",
        "a host name browsers may reach the HTTP API by, besides IP\n"
        "addresses, localhost and this machine's name (e.g. the name\n"
        "of a reverse proxy)",
        true}},
      /*args=*/"",
      /*min_positional=*/0,
      /*max_positional=*/0};
  return kSpec;
}

void PrintHelp(FILE* out) {
  std::fputs(
      HelpText(
          CoordinatorSpec(),
          "Runs the coordinator: stores experiments in DIR/headlab.db (SQLite, WAL), dispatches\n"
          "runs to workers over ZeroMQ and serves the HTTP/JSON API and the dashboard.\n",
          "SIGTERM or SIGINT stops it gracefully (exit 0). Exit 1: cannot start (e.g. a port in\n"
          "use, another coordinator on DIR, a damaged database: the message says what to do)\n"
          "or the database cannot be written; exit 2: bad arguments.\n")
          .c_str(),
      out);
}

// Raises the soft file-descriptor limit to the hard one: the HTTP server admits
// connections up to half of it (http_policy.h MaxHttpConnections), and a distribution's
// default soft limit (1,024) would let a few hundred slow clients fill it.
void RaiseFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  const rlim_t before = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &lim) == 0)
    LogInfo("file descriptor limit raised from " + std::to_string(before) + " to " +
            std::to_string(lim.rlim_cur));
}

}  // namespace

int CoordinatorMain(int argc, char** argv) {
  SetLogRole("coordinator");
  coord::ServerOptions opts;
  auto args = ParseFlags(CoordinatorSpec(), std::vector<std::string>(argv, argv + argc));
  if (!args.ok()) {
    std::fprintf(stderr, "%s\n", args.status().message().c_str());
    return 2;
  }
  if (args->help()) {
    PrintHelp(stdout);
    return 0;
  }
  opts.data_dir = args->Get("--data-dir", opts.data_dir);
  opts.workers = args->Get("--workers", opts.workers);
  opts.http = args->Get("--http", opts.http);
  opts.allow_hosts = args->All("--allow-host");
  const std::string token_file = args->Get("--token-file");
  const std::string reads = args->Get("--reads", "auto");
  const std::string read_token_file = args->Get("--read-token-file");
  opts.static_root =
      args->Has("--dashboard") ? args->Get("--dashboard") : coord::DefaultStaticRoot();
  opts.query_binary = SelfExe();  // SQL runs in `headlab query-child` (query_child.h)
  if (reads == "auto")
    opts.reads = coord::ServerOptions::Reads::kAuto;
  else if (reads == "open")
    opts.reads = coord::ServerOptions::Reads::kOpen;
  else if (reads == "token")
    opts.reads = coord::ServerOptions::Reads::kToken;
  else {
    std::fprintf(stderr, "headlab coordinator: --reads: expected auto, open or token, got '%s'\n",
                 reads.c_str());
    return 2;
  }
  if (!read_token_file.empty()) {
    auto t = ReadTokenFile(read_token_file);
    if (!t.ok()) {
      std::fprintf(stderr, "headlab coordinator: --read-token-file: %s\n",
                   t.status().message().c_str());
      return 2;
    }
    opts.read_token = t.value();
  }

  Status st = MakeDirs(opts.data_dir);
  if (!st.ok()) {
    LogError(st.message());
    return 1;
  }
  auto token = coord::LoadOrCreateToken(opts.data_dir, token_file);
  if (!token.ok()) {
    LogError("token: " + token.status().message());
    return token.status().code() == Status::Code::kInvalidArgument ? 2 : 1;
  }
  opts.token = *token;
  auto worker_token = coord::LoadOrCreateWorkerToken(opts.data_dir);
  if (!worker_token.ok()) {
    LogError("worker token: " + worker_token.status().message());
    return 1;
  }
  opts.worker_token = *worker_token;
  const std::string curve = args->Get("--worker-curve", "auto");
  if (curve != "auto" && curve != "on" && curve != "off") {
    std::fprintf(stderr,
                 "headlab coordinator: --worker-curve: expected auto, on or off, got '%s'\n",
                 curve.c_str());
    return 2;
  }
  if (curve == "on" || (curve == "auto" && !coord::IsLocalEndpoint(opts.workers))) {
    auto keys = coord::LoadOrCreateCurveKeys(opts.data_dir);
    if (!keys.ok()) {
      LogError("worker port encryption: " + keys.status().message());
      return 1;
    }
    opts.curve_secret_key = keys->secret_key;
  }

  // Signals are taken synchronously by this thread (sigtimedwait); every other thread
  // inherits the blocked mask. SIGPIPE: a peer closing mid-write is an error code, not death.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  RaiseFileLimit();
  coord::Server server;
  st = server.Start(opts);
  if (!st.ok()) {
    LogError("cannot start: " + st.message());
    server.Stop();
    return 1;
  }

  LogInfo("listening: http://" + server.http_address() + " (HTTP API), " +
          server.workers_endpoint() + " (workers); database " + server.db_path() +
          (opts.static_root.empty() ? "" : "; dashboard " + opts.static_root) +
          (server.reads_need_token() ? "; HTTP reads need the token" : "; HTTP reads are open") +
          (opts.curve_secret_key.empty() ? "" : "; worker port encrypted (CURVE)"));
  Json endpoints = {{"pid", int64_t(::getpid())},
                    {"http", server.http_address()},
                    {"workers", server.workers_endpoint()}};
  // Where workers find the key of an encrypted worker port (common/token_lookup.h
  // WorkerKeyFile): an absolute path, for `up` and the Slurm launcher to pass on.
  if (!opts.curve_secret_key.empty()) {
    char abs[PATH_MAX];
    std::string dir = ::realpath(opts.data_dir.c_str(), abs) ? abs : opts.data_dir;
    endpoints["worker_key"] = dir + "/" + coord::kCurvePublicFile;
  }
  WriteFileAtomic(opts.data_dir + "/coordinator.json", endpoints.dump() + "\n");

  int code = 0;
  while (true) {
    timespec ts{0, 200 * 1000 * 1000};
    int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig == SIGTERM || sig == SIGINT) {
      LogInfo(std::string("received ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") + "; stopping");
      break;
    }
    if (server.loop_ended()) {
      LogError("the coordinator loop stopped: " + server.loop_status().ToString());
      code = 1;
      break;
    }
  }
  server.Stop();
  LogInfo("stopped");
  return code;
}

}  // namespace headlab
