// The query child and the coordinator's side of it.
#include "coordinator/query_child.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/child_process.h"
#include "common/json.h"

namespace headlab::coord {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The child's answer on stdout: a first line "ok" followed by the answer's JSON text, or
// "error CODE" (Status::Code as a number) followed by the message.
constexpr char kOkLine[] = "ok\n";
constexpr char kErrorPrefix[] = "error ";
// A request is the SQL (at most a read body, http_policy.h) and a few numbers.
constexpr size_t kMaxRequestBytes = size_t(4) << 20;

Status TimeLimitHit(const QueryLimits& limits) {
  return Status::InvalidArgument("query exceeded the " + std::to_string(limits.time.count()) +
                                 " ms limit");
}

// Rebuilds the child's error; codes it cannot send (out of range) are Internal.
Status ChildError(int code, std::string message) {
  switch (static_cast<Status::Code>(code)) {
    case Status::Code::kInvalidArgument:
      return Status::InvalidArgument(std::move(message));
    case Status::Code::kNotFound:
      return Status::NotFound(std::move(message));
    case Status::Code::kIoError:
      return Status::IoError(std::move(message));
    case Status::Code::kCorruption:
      return Status::Corruption(std::move(message));
    case Status::Code::kUnavailable:
      return Status::Unavailable(std::move(message));
    default:
      return Status::Internal(std::move(message));
  }
}

// Parses what the child wrote; `how` says how it ended.
StatusOr<std::string> ParseAnswer(std::string out, const std::string& err, const ExitInfo& how) {
  const size_t line = out.find('\n');
  if (out.compare(0, sizeof kOkLine - 1, kOkLine) == 0 && how.exit_code == 0)
    return out.substr(line + 1);
  if (line != std::string::npos && out.compare(0, sizeof kErrorPrefix - 1, kErrorPrefix) == 0)
    return ChildError(std::atoi(out.c_str() + sizeof kErrorPrefix - 1), out.substr(line + 1));
  std::string tail = err.size() > 300 ? err.substr(err.size() - 300) : err;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  return Status::Internal("the query's process ended without an answer (" +
                          (how.Describe().empty() ? std::string("exit 0") : how.Describe()) +
                          (tail.empty() ? "" : ": " + tail) + ")");
}

// Writes all of `data` to fd 1; false on error.
bool WriteAll(const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(1, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

}  // namespace

StatusOr<std::string> RunQueryInChild(const std::string& binary, const std::string& db_path,
                                      const std::string& sql, const QueryLimits& limits,
                                      const std::atomic<bool>* client_gone) {
  auto gone = [&] { return client_gone && client_gone->load(); };
  if (gone()) return Status::Cancelled("the client left before the query ran");
  const std::string request = JsonText(Json{{"db", db_path},
                                            {"sql", sql},
                                            {"time_ms", limits.time.count()},
                                            {"max_rows", limits.max_rows},
                                            {"max_bytes", limits.max_bytes}});
  SpawnOptions opt;
  opt.stdin_pipe = true;
  auto spawned = ChildProcess::Spawn({binary, "query-child"}, {}, opt);
  if (!spawned.ok()) return Status::Internal("query: " + spawned.status().message());
  ChildProcess& child = **spawned;
  // The answer's JSON is about limits.max_bytes (query.h counts values, not escapes).
  const size_t max_out = 2 * limits.max_bytes + (size_t(1) << 20);
  const auto deadline = SteadyClock::now() + limits.time + kQueryKillGrace;
  std::string out, err;
  size_t written = 0;
  Status killed_for;  // why the child was killed; OK while it was not
  while (child.stdout_fd() >= 0 || child.stderr_fd() >= 0) {
    if (gone())
      killed_for = Status::Cancelled("the client left; the query was stopped");
    else if (SteadyClock::now() >= deadline)
      killed_for = TimeLimitHit(limits);
    else if (out.size() > max_out)
      killed_for =
          Status::Internal("the query's answer is over " + std::to_string(max_out) + " bytes");
    if (!killed_for.ok()) {
      child.SignalGroup(SIGKILL);
      break;
    }
    std::vector<pollfd> fds;
    for (int fd : {child.stdout_fd(), child.stderr_fd()})
      if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    if (child.stdin_fd() >= 0) fds.push_back({child.stdin_fd(), POLLOUT, 0});
    // Short waits: the client leaving is seen within one.
    ::poll(fds.data(), fds.size(), 50);
    if (child.stdin_fd() >= 0) child.Write(request, &written);
    if (child.stdout_fd() >= 0) child.Read(child.stdout_fd(), &out);
    if (child.stderr_fd() >= 0 && err.size() < 65536) child.Read(child.stderr_fd(), &err);
  }
  child.ClosePipes();
  ExitInfo how = child.Wait();
  if (!killed_for.ok()) return killed_for;
  return ParseAnswer(std::move(out), err, how);
}

int QueryChildMain(int argc, char** argv) {
  if (argc > 1 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::printf(
        "usage: headlab query-child\n\n"
        "Runs one read-only SQL query for the coordinator (POST /api/v1/query): reads\n"
        "{db, sql, time_ms, max_rows, max_bytes} as JSON from stdin and writes \"ok\"\n"
        "and the answer's JSON, or \"error CODE\" and the message, to stdout. Started\n"
        "and killed by the coordinator; not meant to be run by hand.\n");
    return 0;
  }
  // Behind the coordinator's own threads, and bounded in memory: a query that builds
  // huge values fails with "out of memory" instead of growing without end.
  ::setpriority(PRIO_PROCESS, 0, kQueryChildNice);
  const rlimit mem{kQueryChildMaxMemory, kQueryChildMaxMemory};
  ::setrlimit(RLIMIT_AS, &mem);
  std::string request;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    request.append(buf, size_t(n));
    if (request.size() > kMaxRequestBytes) break;
  }
  auto answer = [&]() -> StatusOr<std::string> {
    auto j = ParseJsonBounded(request, "query request",
                              JsonLimits{kMaxJsonDepth, kMaxRequestBytes, false});
    if (!j.ok()) return j.status();
    const Json& r = *j;
    if (!r.is_object() || !r.contains("db") || !r["db"].is_string() || !r.contains("sql") ||
        !r["sql"].is_string() || !r.value("time_ms", Json()).is_number_unsigned() ||
        !r.value("max_rows", Json()).is_number_unsigned() ||
        !r.value("max_bytes", Json()).is_number_unsigned())
      return Status::InvalidArgument(
          "query request: expected {db, sql, time_ms, max_rows, max_bytes}");
    QueryLimits limits;
    limits.time = std::chrono::milliseconds(r["time_ms"].get<int64_t>());
    limits.max_rows = r["max_rows"].get<size_t>();
    limits.max_bytes = r["max_bytes"].get<size_t>();
    auto result = RunReadOnlyQuery(r["db"].get<std::string>(), r["sql"].get<std::string>(), limits);
    if (!result.ok()) return result.status();
    return JsonText(*result);
  }();
  bool ok = answer.ok() ? WriteAll(kOkLine) && WriteAll(*answer)
                        : WriteAll(kErrorPrefix + std::to_string(int(answer.status().code())) +
                                   "\n" + answer.status().message());
  return ok ? 0 : 1;
}

}  // namespace headlab::coord
