// What the HTTP server decides from a request's head, before any handler runs and before
// its body is read: which credential it needs, whether it has it, how large its body may
// be and which pool runs it; and the limits that keep the server's work bounded
// (schema/http_api.md, "Access" and "Limits"). No I/O here: http_server.cc applies it.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace headlab::coord {

// Request bodies. Writes carry grids (10^4 runs are a few hundred KiB); reads carry at
// most one SQL statement.
constexpr size_t kMaxWriteBodyBytes = size_t(64) << 20;
constexpr size_t kMaxReadBodyBytes = size_t(1) << 20;
// A request's head (request line and headers).
constexpr size_t kMaxHeaderBytes = size_t(16) << 10;
// Open connections: at most this many, and at most half the process's file descriptors
// (ZeroMQ's worker connections and SQLite need the rest). When full, the connection that
// has waited longest for a request is closed to admit the new one.
constexpr size_t kMaxHttpConnections = 4096;
// Connections from any one address beyond loopback (local clients all share one address,
// and are bounded by the cap above with eviction instead).
constexpr size_t kMaxConnectionsPerPeer = 256;
// Live streams (GET /api/v1/stream) among them; more are refused with 503.
constexpr size_t kMaxStreams = 256;
// A connection waiting for the next request (keep-alive or a fresh one) is closed after
// this; a request's body must arrive within kBodyTimeout of its head.
constexpr std::chrono::seconds kIdleTimeout{30};
constexpr std::chrono::seconds kBodyTimeout{60};
// After a refusal whose body was not read, the server reads and discards at most this much
// for at most this long before closing, so the client sees the answer rather than a reset.
constexpr size_t kLingerBytes = size_t(1) << 20;
constexpr std::chrono::seconds kLingerTimeout{2};
// An accept that fails (e.g. EMFILE) is retried after this rather than at once: a loop
// that retries at once spins a core and starves every other connection.
constexpr std::chrono::milliseconds kAcceptRetry{100};
// SQL queries (POST /api/v1/query) run on their own pool so that runaway queries (each
// killed at its time limit, coordinator/query_child.h) cannot hold the threads that serve
// everything else. A pool thread only waits for its query's child process, so there are
// enough for slow queries not to hold up quick ones. A query that waits longer than
// kQueryMaxWait for a thread is answered 503 unrun.
constexpr int kQueryThreads = 4;
constexpr size_t kMaxQueuedQueries = 32;
constexpr std::chrono::seconds kQueryMaxWait{10};
// Every other data read (GET under /api/ but health) runs on a pool of its own as well:
// however many clients read long series or recompute results, the I/O threads stay free
// for health, writes and the dashboard's files, and at most kReadThreads answers are
// being built at once (what bounds the memory reads can hold, with the page limits).
constexpr int kReadThreads = 4;
constexpr size_t kMaxQueuedReads = 64;
// Grids (POST /api/v1/experiments, dry runs too) are expanded and stored one at a time on
// a thread of their own: an expansion holds up to a few hundred MB (common/grid.cc,
// kMaxExpandedBytes) and seconds of CPU, which must neither occupy the I/O threads nor
// add up across clients.
constexpr int kGridThreads = 1;
constexpr size_t kMaxQueuedGrids = 8;
// The read pool's threads and the SQL children run at this nice value: what clients read
// yields the CPU to health, writes and the worker loop. The grid thread does not: a
// submit is a write the user waits for (at nice 10 a 10,000-run submit took 1.5 times as
// long on a loaded machine).
constexpr int kPoolNice = 10;
// A dry run over HTTP lists at most this many runs' configs (`configs_truncated` says so);
// `headlab submit --dry-run` expands locally and prints them all.
constexpr size_t kMaxDryRunConfigs = 1000;
// GET /runs/ID/metrics: at most this many points per answer (the default); a longer
// series is read in pages through the answer's `next` cursor.
constexpr int64_t kMaxMetricsPage = 100000;
// GET /experiments/ID/results?recompute=1: at most this many experiments are recomputed
// at once; a request for one already being recomputed waits for that answer.
constexpr size_t kMaxRecomputes = 2;

// Which credential a request needs.
enum class Access {
  kPublic,  // GET /api/v1/health and the dashboard's static files
  kRead,    // every other GET/HEAD under /api/ (the live stream too) and POST /api/v1/query
  kWrite,   // every other request under /api/
};

// Returns the access `method` on `target` (path and query) needs.
Access RequiredAccess(const std::string& method, const std::string& target);

// Returns the largest body a request needing `access` may carry.
size_t BodyLimitFor(Access access);

// Returns true iff the request is an SQL query (runs on the query pool).
bool IsQueryRequest(const std::string& method, const std::string& target);
// Returns true iff the request reads data other than by SQL (runs on the read pool).
bool IsPooledRead(const std::string& method, const std::string& target);
// Returns true iff the request submits a grid (runs on the grid pool).
bool IsGridRequest(const std::string& method, const std::string& target);

// Who may do what. Writes need `write_token` as "Authorization: Bearer <token>". Reads are
// open when `open_reads`; otherwise they need the write token or `read_token` (when not
// empty), as a bearer token or as the cookie kTokenCookie (which the dashboard's live
// stream sends: EventSource cannot set headers). A cookie never authorises a write, so a
// page elsewhere cannot make a browser write (cross-site request forgery).
struct AccessPolicy {
  std::string write_token;
  std::string read_token;
  bool open_reads = true;
  // Names a request's Host header may carry besides IP literals and "localhost"
  // (ScreenBrowser): the machine's own names and those given with --allow-host.
  std::vector<std::string> host_names;
};
constexpr const char* kTokenCookie = "headlab_token";

// A request refused before any handler runs.
struct Refusal {
  int status;  // 400 or 401
  std::string message;
};

// Returns why the request must be refused, or nullopt: 400 when `target` is not UTF-8,
// 401 when the credentials do not grant RequiredAccess(method, target). `authorization`
// and `cookie` are the raw header values ("" if absent).
std::optional<Refusal> ScreenRequest(const AccessPolicy& policy, const std::string& method,
                                     const std::string& target, const std::string& authorization,
                                     const std::string& cookie);

// What a web page in a browser must not be able to do (schema/http_api.md, "Browsers"):
// reach the API under another name (DNS rebinding: Host is then the attacker's name),
// read data or change state from another origin, or send a "simple" cross-origin POST
// that needs no CORS preflight (text/plain, form encodings). Returns why the request must
// be refused, or nullopt:
// - 421 unless `host` (the Host header; "" when absent, as HTTP/1.0 allows) is an IP
//   literal, "localhost" or one of policy.host_names, with or without a port;
// - 403 when `origin` (the Origin header, "" if absent) is present on a request that
//   needs more than kPublic access and is not the origin of `host` itself;
// - 415 when a request other than GET/HEAD under /api/ does not declare
//   `content_type` application/json.
std::optional<Refusal> ScreenBrowser(const AccessPolicy& policy, const std::string& method,
                                     const std::string& target, const std::string& host,
                                     const std::string& origin, const std::string& content_type);

// Returns the host of a Host header or URL authority ("h:8321" -> "h", "[::1]:80" ->
// "::1"), lowercased.
std::string HostOfAuthority(const std::string& authority);

// Returns the value of cookie `name` in a Cookie header ("a=1; b=2"), "" if absent.
std::string CookieValue(const std::string& header, const std::string& name);

// Returns true iff the host part of "ADDR:PORT" ("127.0.0.1:8321", "[::1]:0",
// "localhost:8321") is a loopback address: only processes on this machine can connect.
bool IsLoopbackListenAddress(const std::string& address);

// Returns the number of connections to admit given the process's file-descriptor limit
// (RLIMIT_NOFILE, soft): min(kMaxHttpConnections, limit / 2), at least 16.
size_t MaxHttpConnections();

}  // namespace headlab::coord
