// Routing and handlers of the HTTP/JSON API.
#include "coordinator/http_api.h"

#include <malloc.h>
#include <sys/stat.h>

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "common/files.h"
#include "common/grid.h"
#include "common/log.h"
#include "common/utf8.h"
#include "coordinator/bulk_requests.h"
#include "coordinator/db.h"
#include "coordinator/experiment_panels.h"
#include "coordinator/http_api_research.h"
#include "coordinator/http_policy.h"
#include "coordinator/query.h"
#include "coordinator/query_child.h"
#include "coordinator/query_string.h"
#include "coordinator/results_store.h"
#include "coordinator/runs_page.h"
#include "coordinator/views.h"

namespace headlab::coord {
namespace {

HttpResponse JsonResponse(int status, const Json& j) {
  HttpResponse r;
  r.status = status;
  r.body = JsonText(j);  // stored strings may hold bytes that are not UTF-8
  return r;
}

HttpResponse Error(int status, const std::string& msg) {
  return JsonResponse(status, {{"error", msg}});
}

HttpResponse FromStatus(const Status& st) { return Error(HttpStatusFor(st), st.message()); }

HttpResponse FromResult(const StatusOr<Json>& r) {
  return r.ok() ? JsonResponse(200, r.value()) : FromStatus(r.status());
}

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// Parses a positive decimal id; returns 0 if it is not one.
int64_t ParseId(const std::string& s) {
  if (s.empty() || s.size() > 15) return 0;
  for (char c : s)
    if (c < '0' || c > '9') return 0;
  return std::strtoll(s.c_str(), nullptr, 10);
}

// A read-only connection per HTTP thread, opened on first use.
StatusOr<Db*> ReaderFor(const std::string& path) {
  thread_local std::unique_ptr<Db> db;
  thread_local std::string db_path;
  if (!db || db_path != path) {
    db = std::make_unique<Db>();
    db_path = path;
    Status st = db->Open(path, Db::Mode::kReadOnly);
    if (!st.ok()) {
      db.reset();
      return st;
    }
  }
  return db.get();
}

const char* ContentType(const std::string& path) {
  auto ends = [&](const char* ext) {
    size_t n = std::strlen(ext);
    return path.size() >= n && path.compare(path.size() - n, n, ext) == 0;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js") || ends(".mjs")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".json")) return "application/json";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  if (ends(".ico")) return "image/x-icon";
  if (ends(".woff2")) return "font/woff2";
  return "application/octet-stream";
}

// Keeps the first `keep` entries of each comparison's per_pair list (and its control's and
// log-prob part's), none when keep is 0, and says how many there were in n_pairs.
void LimitPerPair(Json* results, size_t keep) {
  if (!results->is_object() || !results->contains("comparisons")) return;
  for (Json& c : (*results)["comparisons"]) {
    for (Json* part : {&c, c.contains("control") ? &c["control"] : nullptr,
                       c.contains("logprob_diff") ? &c["logprob_diff"] : nullptr}) {
      if (!part || !part->is_object() || !part->contains("per_pair")) continue;
      Json& list = (*part)["per_pair"];
      const size_t n = list.is_array() ? list.size() : 0;
      if (keep > 0 && n <= keep) continue;
      (*part)["n_pairs"] = n;
      if (keep == 0)
        part->erase("per_pair");
      else
        list.erase(list.begin() + std::ptrdiff_t(keep), list.end());
    }
  }
}

}  // namespace

int HttpStatusFor(const Status& st) {
  switch (st.code()) {
    case Status::Code::kInvalidArgument:
      return 400;
    case Status::Code::kNotFound:
      return 404;
    case Status::Code::kPermissionDenied:
      return 403;
    case Status::Code::kUnavailable:
      return 409;
    default:
      return 500;
  }
}

HttpApi::HttpApi(Options options, Router* router) : options_(std::move(options)), router_(router) {}

HttpResponse HttpApi::Handle(const HttpRequest& req) {
  std::string path = req.target, query;
  size_t q = path.find('?');
  if (q != std::string::npos) {
    query = path.substr(q + 1);
    path = path.substr(0, q);
  }
  bool api = path.rfind("/api/", 0) == 0;
  // Credentials and encoding first (coordinator/http_policy.h): nothing below runs for a
  // refused request, and every message that echoes the request is valid UTF-8.
  if (auto refusal = ScreenRequest({options_.token, options_.read_token, options_.open_reads},
                                   req.method, req.target, req.authorization, req.cookie))
    return Error(refusal->status, refusal->message);
  if (size_t bad = FirstInvalidUtf8(req.body); bad != std::string::npos)
    return Error(400, "request body: byte " + std::to_string(bad) + " is not valid UTF-8");
  try {
    if (req.method == "GET" || req.method == "HEAD") {
      return api ? Get(path, query) : Static(path);
    }
    if (req.method == "POST" && path == "/api/v1/query") return Query(req);
    if (req.method == "POST" && api) return Post(path, req.body);
    if (api) return Error(405, "method " + req.method + " not allowed on " + path);
    return Error(405, "method not allowed");
  } catch (const std::exception& e) {
    // Programming errors must not take the daemon down; say what happened.
    LogError("HTTP " + req.method + " " + req.target + ": " + e.what());
    return Error(500, std::string("internal error: ") + e.what());
  }
}

HttpResponse HttpApi::Get(const std::string& path, const std::string& query) {
  std::vector<std::string> p = Split(path);  // "api", "v1", ...
  if (p.size() < 3 || p[1] != "v1") return Error(404, "no route " + path);
  if (p.size() == 3 && p[2] == "health")
    return JsonResponse(200, {{"ok", true}, {"version", options_.version}});
  auto db = ReaderFor(options_.db_path);
  if (!db.ok()) return FromStatus(db.status());
  Db* d = *db;
  if (p.size() == 3 && p[2] == "status") {
    Json s = StatusView(d);
    auto live =
        router_
            ? router_->Call([](Core& c) -> StatusOr<Json> { return c.WorkersJson(Clock::now()); })
            : StatusOr<Json>(Json::array());
    s["workers"] = live.ok() ? *live : Json::array();
    return JsonResponse(200, s);
  }
  if (p.size() == 3 && p[2] == "workers") {
    // Live workers from memory (heartbeat ages), then the others the database remembers.
    auto live =
        router_
            ? router_->Call([](Core& c) -> StatusOr<Json> { return c.WorkersJson(Clock::now()); })
            : StatusOr<Json>(Json::array());
    Json out = live.ok() ? *live : Json::array();
    std::set<std::string> seen;
    for (const Json& w : out) seen.insert(w["id"].get<std::string>());
    for (Json& w : WorkerRowsView(d)) {
      if (seen.count(w["id"].get<std::string>())) continue;
      if (w["state"] == "alive") w["state"] = "unknown";  // not (yet) re-registered
      w["running"] = Json::array();
      w["last_heartbeat_age_s"] = nullptr;
      out.push_back(w);
    }
    return JsonResponse(200, out);
  }
  if (p[2] == "experiments") {
    if (p.size() == 3) return JsonResponse(200, ExperimentsView(d));
    int64_t id = ParseId(p[3]);
    if (!id) return Error(400, "bad experiment id '" + p[3] + "'");
    if (p.size() == 4) return FromResult(ExperimentView(d, id));
    if (p.size() == 5 && p[4] == "runs") {
      if (!WantsRunsPage(query)) return FromResult(ExperimentRunsView(d, id));
      auto req = ParseRunsPage(query);
      if (!req.ok()) return FromStatus(req.status());
      return FromResult(RunsPageView(d, id, *req));
    }
    if (p.size() == 5 && p[4] == "results") return Results(d, id, query);
    if (p.size() == 6 && p[4] == "panels") return Panel(d, id, p[5], query);
  }
  if (p[2] == "runs" && p.size() >= 4) {
    int64_t id = ParseId(p[3]);
    if (!id) return Error(400, "bad run id '" + p[3] + "'");
    if (p.size() == 4) return FromResult(RunView(d, id));
    if (p.size() == 5 && p[4] == "metrics") return Metrics(d, id, query);
  }
  if (auto r = ResearchGet(d, p, query)) return *r;
  return Error(404, "no route GET " + path);
}

HttpResponse HttpApi::Panel(Db* db, int64_t experiment, const std::string& panel,
                            const std::string& query) {
  auto req = ParsePanelRequest(panel, query);
  if (!req.ok()) return FromStatus(req.status());
  auto text = panel_cache_.Answer(db, experiment, req->CacheKey(), [&]() -> StatusOr<std::string> {
    auto answer = PanelView(db, experiment, *req);
    if (!answer.ok()) return answer.status();
    return JsonText(*answer);
  });
  if (!text.ok()) return FromStatus(text.status());
  HttpResponse r;
  r.body = std::move(*text);
  return r;
}

HttpResponse HttpApi::Metrics(Db* db, int64_t run, const std::string& query) {
  MetricsPage page;
  page.key = QueryParam(query, "key");
  // Every number must parse whole; the page size is bounded (http_policy.h).
  auto num = [&](const char* name, int64_t def, int64_t lo, int64_t hi, int64_t* v) {
    const std::string s = QueryParam(query, name);
    char* end = nullptr;
    long long x = s.empty() ? def : std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && (*end || x < lo || x > hi)) return false;
    *v = x;
    return true;
  };
  int64_t attempt = 0;
  if (!num("after", -1, -1, INT64_MAX, &page.after) || !num("attempt", 0, 0, INT32_MAX, &attempt))
    return Error(400, "after and attempt must be integers (after >= -1, attempt >= 0)");
  page.attempt = int(attempt);
  if (!num("limit", kMaxMetricsPage, 1, kMaxMetricsPage, &page.limit))
    return Error(400, "limit must be an integer from 1 to " + std::to_string(kMaxMetricsPage) +
                          " (read longer series in pages: the answer's next is the cursor)");
  if (const std::string c = QueryParam(query, "cursor"); !c.empty()) {
    int used = 0;
    if (std::sscanf(c.c_str(), "%" SCNd64 ":%" SCNd64 "%n", &page.cursor_attempt, &page.cursor_seq,
                    &used) != 2 ||
        size_t(used) != c.size())
      return Error(400, "cursor must be ATTEMPT:SEQ (the previous answer's next), got '" + c + "'");
  }
  auto text = RunMetricsView(db, run, page);
  if (!text.ok()) return FromStatus(text.status());
  HttpResponse r;
  r.body = std::move(*text);
  return r;
}

HttpResponse HttpApi::Results(Db* db, int64_t experiment, const std::string& query) {
  const std::string r = QueryParam(query, "recompute");
  if (!r.empty() && r != "0" && r != "1" && r != "true" && r != "false")
    return Error(400, "recompute must be 0, 1, true or false, got '" + r + "'");
  const bool recompute = r == "1" || r == "true";
  const std::string pairs = QueryParam(query, "per_pair");
  if (!pairs.empty() && pairs != "0" && pairs != "1")
    return Error(400, "per_pair must be 0 or 1, got '" + pairs + "'");
  // pair_limit=N: with per_pair=1, the first N pairs of each comparison (a reader that
  // shows a few need not move 10^5 of them).
  const std::string limit_text = QueryParam(query, "pair_limit");
  size_t pair_limit = 0;
  if (!limit_text.empty()) {
    char* end = nullptr;
    const long long v = std::strtoll(limit_text.c_str(), &end, 10);
    if (*end || v < 1 || v > 1000000)
      return Error(400, "pair_limit must be an integer in [1, 1000000], got '" + limit_text + "'");
    pair_limit = size_t(v);
  }
  auto options = ParseResultsOptions(QueryParam(query, "by"), QueryParam(query, "level"));
  if (!options.ok()) return FromResult(options.status());
  auto compute = [&] {
    std::optional<ComputedResults> to_store;
    auto answer = AnswerResults(db, experiment, recompute, &to_store, *options);
    // A finished experiment's answer is worth keeping: the loop stores it unless something
    // it was computed from changed meanwhile (StoreResults).
    if (answer.ok() && to_store && router_)
      router_->Post([res = std::move(*to_store)](Core& core) { core.StoreResultsOf(res); });
    return answer;
  };
  // Each pair's values only when asked (per_pair=1): at 10^5 runs they are most of the
  // answer, and a page that lists comparisons needs only their counts. Per request: a
  // coalesced answer serves requests that asked for different lists.
  auto reply = [&](StatusOr<Json> answer) {
    if (answer.ok() && (pairs != "1" || pair_limit > 0))
      LimitPerPair(&answer.value(), pairs == "1" ? pair_limit : 0);
    return FromResult(answer);
  };
  // Only the default answer is stored; any other is computed each time, like a recompute.
  // Without per-pair lists, the stored answer is read from memory while it stays current.
  if (!recompute && options->IsDefault() && pairs != "1")
    return FromResult(
        results_cache_.Answer(db, experiment, compute, [](Json* j) { LimitPerPair(j, 0); }));
  if (!recompute && options->IsDefault()) return reply(compute());
  // Recomputes are coalesced: a request for an answer already being recomputed (the same
  // experiment and options) takes that answer, and at most kMaxRecomputes are computed at
  // once.
  std::string key = std::to_string(experiment) + "?level=" + std::to_string(options->level);
  for (const std::string& k : options->by) key += "&by=" + k;
  std::promise<StatusOr<Json>> mine;
  std::shared_future<StatusOr<Json>> theirs;
  {
    std::lock_guard<std::mutex> l(recompute_mu_);
    if (auto it = recomputing_.find(key); it != recomputing_.end()) {
      theirs = it->second;
    } else if (recomputing_.size() >= kMaxRecomputes) {
      return Error(503, "too many experiments being recomputed (" + std::to_string(kMaxRecomputes) +
                            "); retry later");
    } else {
      recomputing_.emplace(key, mine.get_future().share());
    }
  }
  if (theirs.valid()) return reply(theirs.get());
  StatusOr<Json> answer = Status::Internal("recompute failed");
  try {
    answer = compute();
  } catch (const std::exception& e) {
    answer = Status::Internal(std::string("recompute failed: ") + e.what());
  }
  mine.set_value(answer);
  {
    std::lock_guard<std::mutex> l(recompute_mu_);
    recomputing_.erase(key);
  }
  return reply(std::move(answer));
}

HttpResponse HttpApi::Write(std::function<StatusOr<Json>(Core&)> fn) {
  if (!router_) return Error(503, "this server is read-only");
  return FromResult(router_->Call(std::move(fn)));
}

HttpResponse HttpApi::Post(const std::string& path, const std::string& body) {
  std::vector<std::string> p = Split(path);
  if (p.size() < 3 || p[1] != "v1") return Error(404, "no route " + path);
  if (p.size() == 3 && p[2] == "experiments") return Submit(body);
  if (p.size() == 5 && p[2] == "experiments" && p[4] == "cancel") {
    int64_t id = ParseId(p[3]);
    if (!id) return Error(400, "bad experiment id '" + p[3] + "'");
    if (!router_) return Error(503, "this server is read-only");
    return FromResult(router_->CallInSteps(std::make_unique<CancelExperimentRequest>(id)));
  }
  if (p.size() == 5 && p[2] == "runs" && (p[4] == "cancel" || p[4] == "retry")) {
    int64_t id = ParseId(p[3]);
    if (!id) return Error(400, "bad run id '" + p[3] + "'");
    if (p[4] == "cancel") return Write([id](Core& c) { return c.CancelRun(id); });
    return Write([id](Core& c) { return c.RetryRun(id); });
  }
  if (auto w = ResearchWrite(p, body)) {
    if (!w->ok()) return FromStatus(w->status());
    return Write(std::move(w->value()));
  }
  return Error(404, "no route POST " + path);
}

HttpResponse HttpApi::Submit(const std::string& body) {
  // Everything here up to Router::Call only reads: a bad grid leaves the database as it was.
  auto req = ParseJson(body, "request body");
  if (!req.ok()) return FromStatus(req.status());
  if (!req->is_object()) return Error(400, "request body: expected a JSON object");
  const Json& r = *req;
  auto text = r.find("text");
  if (text == r.end() || !text->is_string())
    return Error(400, "request body: \"text\" must be the grid file's contents (a string)");
  std::string file = r.value("file", Json("grid")).is_string() ? r.value("file", "grid") : "grid";
  std::vector<std::string> sets;
  if (auto s = r.find("sets"); s != r.end() && !s->is_null()) {
    if (!s->is_array()) return Error(400, "request body: \"sets\" must be an array of strings");
    for (const Json& x : *s) {
      if (!x.is_string()) return Error(400, "request body: \"sets\" must be an array of strings");
      sets.push_back(x.get<std::string>());
    }
  }
  auto flag = [&](const char* k) {
    auto it = r.find(k);
    return it != r.end() && it->is_boolean() && it->get<bool>();
  };
  bool rerun = flag("rerun"), dry_run = flag("dry_run");
  auto grid = ExpandGrid(text->get<std::string>(), file, sets);
  if (!grid.ok()) return Error(400, grid.status().message());
  if (dry_run) {
    HttpResponse answer;
    {
      // The first kMaxDryRunConfigs runs (http_policy.h): the answer stays small.
      Json configs = Json::array();
      const size_t n = grid->runs.size();
      for (size_t i = 0; i < std::min(n, kMaxDryRunConfigs); ++i) {
        ExpandedRun& run = grid->runs[i];
        configs.push_back({{"index", run.index},
                           {"arm", run.arm},
                           {"config", std::move(run.config)},
                           {"config_hash", run.config_hash},
                           {"pair_key", run.pair_key}});
      }
      grid->runs = {};
      answer = JsonResponse(200, {{"runs", n},
                                  {"configs", std::move(configs)},
                                  {"configs_truncated", n > kMaxDryRunConfigs},
                                  {"strata", StrataKeys(grid->source, grid->pair_by)}});
    }
    // A large dry run's trees are freed by now; hand the pages back to the system rather
    // than keep them in malloc's free lists for the coordinator's lifetime.
    malloc_trim(0);
    return answer;
  }
  if (!router_) return Error(503, "this server is read-only");
  // What the comparisons will be broken down by: said at submit, not found in results.
  const std::vector<std::string> strata = StrataKeys(grid->source, grid->pair_by);
  // In steps on the loop (bulk_requests.h): a 100,000-run grid must not stall it.
  auto submitted =
      router_->CallInSteps(std::make_unique<SubmitRequest>(std::move(grid.value()), sets, rerun));
  if (submitted.ok() && submitted->is_object()) (*submitted)["strata"] = strata;
  return FromResult(submitted);
}

HttpResponse HttpApi::Query(const HttpRequest& http) {
  auto req = ParseJson(http.body, "request body");
  if (!req.ok()) return FromStatus(req.status());
  if (!req->is_object() || !req->contains("sql") || !(*req)["sql"].is_string())
    return Error(400, "request body: expected {\"sql\": \"SELECT ...\"}");
  const std::string& sql = (*req)["sql"].get_ref<const std::string&>();
  if (options_.query_binary.empty())
    return FromResult(RunReadOnlyQuery(options_.db_path, sql, options_.query_limits));
  auto text = RunQueryInChild(options_.query_binary, options_.db_path, sql, options_.query_limits,
                              http.client_gone.get());
  if (!text.ok()) return FromStatus(text.status());
  HttpResponse r;
  r.body = std::move(*text);
  return r;
}

HttpResponse HttpApi::Static(const std::string& raw_path) {
  if (options_.static_root.empty()) return Error(404, "no dashboard is installed");
  std::string path = UrlDecode(raw_path);
  // No traversal: every segment must be a plain name (no "..", no hidden files).
  for (const std::string& seg : Split(path))
    if (seg == ".." || seg[0] == '.' || seg.find('\\') != std::string::npos ||
        seg.find('\0') != std::string::npos)
      return Error(404, "not found");
  std::string file = options_.static_root + (path.empty() || path[0] != '/' ? "/" : "") + path;
  struct stat st;
  if (::stat(file.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) file += "/index.html";
  if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return Error(404, "not found");
  auto data = ReadFile(file);
  if (!data.ok()) return Error(404, "not found");
  HttpResponse r;
  r.content_type = ContentType(file);
  r.body = std::move(*data);
  // Vite names what it writes under assets/ by a hash of the contents: a browser keeps
  // them (and the code it compiled from them) across visits, and a new build is new names
  // in index.html, which is never kept.
  if (path.rfind("/assets/", 0) == 0) r.cache_control = "public, max-age=31536000, immutable";
  return r;
}

}  // namespace headlab::coord
