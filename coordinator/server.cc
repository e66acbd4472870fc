// Wiring of Store, Core, Router, HttpApi and HttpServer.
#include "coordinator/server.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include <unistd.h>

#include "common/files.h"
#include "common/log.h"
#include "common/source_dir.h"
#include "coordinator/core.h"
#include "coordinator/data_dir_guard.h"
#include "coordinator/http_api.h"
#include "coordinator/http_policy.h"
#include "coordinator/http_server.h"
#include "coordinator/paired_stats_worker.h"
#include "coordinator/router.h"
#include "coordinator/store.h"
#include "coordinator/token.h"
#include "coordinator/wal_checkpointer.h"

namespace headlab::coord {

struct Server::Impl {
  ServerOptions options;
  std::unique_ptr<DataDirLock> lock;  // held from Start to destruction
  MetricFeed feed;  // outlives the store that publishes and the HTTP sessions that follow
  Store store;
  std::unique_ptr<Core> core;
  std::unique_ptr<Router> router;
  std::unique_ptr<PairedStatsWorker> stats;       // computes off the loop, writes through it
  std::unique_ptr<WalCheckpointer> checkpointer;  // the loop's commits never checkpoint
  std::unique_ptr<HttpApi> api;
  std::unique_ptr<HttpServer> http;
  std::thread loop;
  std::atomic<bool> loop_ended{false};
  mutable std::mutex mu;
  Status loop_status;  // guarded by mu
  bool stopped = false;
};

Server::Server() : impl_(std::make_unique<Impl>()) {}

Server::~Server() { Stop(); }

Status Server::Start(const ServerOptions& options) {
  Impl& m = *impl_;
  m.options = options;
  if (options.token.empty()) return Status::InvalidArgument("no token");
  if (options.worker_token.empty()) return Status::InvalidArgument("no worker token");
  // The two credentials must differ, or a worker host could write as the user.
  if (TokenEquals(options.token, options.worker_token))
    return Status::InvalidArgument("the worker token is the user's token: give workers their own");
  HEADLAB_RETURN_IF_ERROR(MakeDirs(options.data_dir));
  // One coordinator per data directory: a second one would rewrite coordinator.json and
  // declare the first one's attempts lost. Then no start on a damaged database.
  auto lock = DataDirLock::Acquire(options.data_dir);
  if (!lock.ok()) return lock.status();
  m.lock = std::move(lock.value());
  if (PathExists(db_path())) HEADLAB_RETURN_IF_ERROR(CheckDatabaseIntegrity(db_path()));
  HEADLAB_RETURN_IF_ERROR(m.store.Open(db_path()));
  HEADLAB_RETURN_IF_ERROR(m.store.db()->Exec("PRAGMA wal_autocheckpoint=0"));
  m.checkpointer = std::make_unique<WalCheckpointer>(db_path());
  m.store.SetMetricFeed(&m.feed);
  m.core = std::make_unique<Core>(&m.store, options.worker_token);
  m.core->Recover(Clock::now());
  m.router = std::make_unique<Router>(m.core.get());
  HEADLAB_RETURN_IF_ERROR(m.router->Bind(options.workers, options.curve_secret_key));
  Router* router = m.router.get();
  m.stats = std::make_unique<PairedStatsWorker>(db_path(), [router](ComputedResults res) {
    router->Post([res = std::move(res)](Core& core) { core.StoreResultsOf(res); });
  });
  m.core->SetFinishedSink([stats = m.stats.get()](int64_t exp) { stats->Enqueue(exp); });
  HttpApi::Options api_opts;
  api_opts.db_path = db_path();
  api_opts.token = options.token;
  api_opts.static_root = options.static_root;
  api_opts.read_token = options.read_token;
  api_opts.query_binary = options.query_binary;
  api_opts.open_reads = !reads_need_token();
  m.api = std::make_unique<HttpApi>(api_opts, m.router.get());
  AccessPolicy policy{options.token, options.read_token, api_opts.open_reads, options.allow_hosts};
  // The machine's own name is one a browser may rightly use (http://HOST:8321/).
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && host[0]) policy.host_names.push_back(host);
  m.http = std::make_unique<HttpServer>(m.api.get(), &m.feed, std::move(policy));
  m.http->SetReadGate(m.checkpointer->gate());
  HEADLAB_RETURN_IF_ERROR(m.http->Listen(options.http));
  m.loop = std::thread([this] {
    Status st = impl_->router->Run();
    {
      std::lock_guard<std::mutex> l(impl_->mu);
      impl_->loop_status = st;
    }
    impl_->loop_ended = true;
  });
  m.http->Start(std::max(1, options.http_threads));
  return Status::Ok();
}

void Server::Stop() {
  Impl& m = *impl_;
  if (m.stopped) return;
  m.stopped = true;
  // HTTP first: a request waiting on the loop still gets its answer.
  if (m.http) m.http->Stop();
  if (m.router) m.router->Stop();
  if (m.loop.joinable()) m.loop.join();
  m.stats.reset();  // its last answers have nowhere to go: the loop is gone
  m.checkpointer.reset();
  m.http.reset();
  m.api.reset();
  m.router.reset();
  m.core.reset();
  m.store.Close();
}

bool Server::loop_ended() const { return impl_->loop_ended; }

Status Server::loop_status() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  return impl_->loop_status;
}

std::string Server::workers_endpoint() const {
  return impl_->router ? impl_->router->endpoint() : "";
}
std::string Server::http_address() const { return impl_->http ? impl_->http->address() : ""; }
std::string Server::db_path() const { return impl_->options.data_dir + "/headlab.db"; }

bool Server::reads_need_token() const {
  const ServerOptions& o = impl_->options;
  return o.reads == ServerOptions::Reads::kToken ||
         (o.reads == ServerOptions::Reads::kAuto && !IsLoopbackListenAddress(o.http));
}

std::string DefaultStaticRoot() {
  std::string src = SourceDir();
  for (const std::string& d : {src + "/dashboards/dist", src + "/dashboards"})
    if (PathExists(d + "/index.html")) return d;
  return "";
}

}  // namespace headlab::coord
