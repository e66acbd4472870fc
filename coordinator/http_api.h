// The HTTP/JSON API (schema/http_api.md), independent of the HTTP transport: a request in,
// a response out. Reads run on the calling (HTTP) thread with read-only connections;
// writes go to the loop thread through Router::Call. Thread-safe.
#pragma once

#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "coordinator/db.h"
#include "coordinator/panel_cache.h"
#include "coordinator/query.h"
#include "coordinator/results_cache.h"
#include "coordinator/router.h"

namespace headlab::coord {

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // path and query, e.g. "/api/v1/runs/3/metrics?after=10"
  std::string authorization;  // the Authorization header, "" if absent
  std::string body;
  std::string cookie;  // the Cookie header, "" if absent
  // Becomes true when the client leaves while the request runs (set for SQL queries,
  // which are then stopped); null: never.
  std::shared_ptr<const std::atomic<bool>> client_gone;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Answers change from one request to the next; the dashboard's content-hashed files
  // (Static, assets/) never do.
  std::string cache_control = "no-store";
};

class HttpApi {
 public:
  struct Options {
    std::string db_path;
    std::string token;
    std::string static_root;  // dashboard files served at "/" ("" = none)
    std::string version = "0.1.0";
    // Reads (coordinator/http_policy.h AccessPolicy): open, or needing `token` or
    // `read_token`. The transport checks the same policy before reading a body.
    std::string read_token;
    bool open_reads = true;
    QueryLimits query_limits;  // POST /api/v1/query
    // The headlab executable that runs queries in a child process (query_child.h); ""
    // runs them on the calling thread, where a deadline holds only between VM steps.
    std::string query_binary;
  };
  // `router` may be null for read-only use (tests); writes then answer 503.
  HttpApi(Options options, Router* router);

  HttpResponse Handle(const HttpRequest& req);

 private:
  HttpResponse Get(const std::string& path, const std::string& query);
  HttpResponse Post(const std::string& path, const std::string& body);
  HttpResponse Submit(const std::string& body);
  HttpResponse Query(const HttpRequest& req);
  HttpResponse Static(const std::string& path);
  // GET /runs/ID/metrics?key=K&after=SEQ&attempt=A&limit=N&cursor=A:S, one bounded page.
  HttpResponse Metrics(Db* db, int64_t run, const std::string& query);
  // GET /experiments/ID/results[?recompute=1] (results_store.h AnswerResults).
  HttpResponse Results(Db* db, int64_t experiment, const std::string& query);
  HttpResponse Panel(Db* db, int64_t experiment, const std::string& panel,
                     const std::string& query);
  // Runs a write on the loop thread and renders its result.
  HttpResponse Write(std::function<StatusOr<Json>(Core&)> fn);

  const Options options_;
  Router* const router_;
  std::mutex recompute_mu_;
  // Answers being recomputed (experiment and options) -> the answer their requests wait
  // for. Guarded by recompute_mu_.
  std::map<std::string, std::shared_future<StatusOr<Json>>> recomputing_;
  ResultsCache results_cache_;  // GET .../results without per-pair lists
  PanelCache panel_cache_;      // GET .../panels/NAME of finished experiments
};

// Returns the HTTP status for a Status code: InvalidArgument 400, NotFound 404,
// PermissionDenied 403, Unavailable 409 (state conflict), others 500.
int HttpStatusFor(const Status& st);

}  // namespace headlab::coord
