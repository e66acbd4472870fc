// `headlab wait EXP`: poll the experiment until no run is queued or running, drawing a
// progress bar on stderr (redrawn in place on a terminal, a line per change otherwise).
// It rides out coordinator restarts: an unreachable coordinator is retried until the
// deadline, since a grid outlives any one coordinator process.
#include "cli/wait.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/resolve.h"

namespace headlab {

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(1000);
// Without a terminal, a line is printed on every change and at least this often.
constexpr double kQuietLineIntervalS = 30.0;

// The experiment's timing from its attempts (POST /api/v1/query, read-only SQL): the mean
// duration of succeeded attempts and the elapsed time of each running one.
std::string TimingSql(int64_t experiment) {
  const std::string e = std::to_string(experiment);
  const char* seconds =
      "(julianday(%s) - julianday(coalesce(a.accepted_at, a.assigned_at))) * 86400.0";
  char finished[160], now[160];
  std::snprintf(finished, sizeof finished, seconds, "a.finished_at");
  std::snprintf(now, sizeof now, seconds, "'now'");
  return std::string("SELECT 'mean', avg(") + finished +
         ") FROM attempts a JOIN runs r ON r.id = a.run_id WHERE r.experiment_id = " + e +
         " AND a.status = 'succeeded' AND a.finished_at IS NOT NULL UNION ALL SELECT 'running', " +
         now +
         " FROM runs r JOIN attempts a ON a.run_id = r.id AND a.attempt = r.attempts "
         "WHERE r.experiment_id = " +
         e + " AND r.status = 'running'";
}

// Returns the timing, or nullopt when the query failed (the ETA is then left out).
std::optional<Timing> LoadTiming(HttpClient& client, int64_t experiment) {
  Json body = {{"sql", TimingSql(experiment)}};
  auto res = client.Call("POST", "/api/v1/query", &body);
  if (!res.ok() || !res->is_object() || !(*res)["rows"].is_array()) return std::nullopt;
  Timing t;
  for (const Json& row : (*res)["rows"]) {
    if (!row.is_array() || row.size() != 2 || !row[1].is_number()) continue;
    if (row[0] == "mean")
      t.mean_s = row[1].get<double>();
    else
      t.running_elapsed_s.push_back(row[1].get<double>());
  }
  return t;
}

// How often the timing is queried (the progress is polled every second).
constexpr double kTimingIntervalS = 5.0;

}  // namespace

bool Progress::Finished() const {
  return queued == 0 && running == 0 && succeeded + failed + lost + cancelled >= total;
}

Progress ProgressFromExperiment(const Json& exp) {
  Progress p;
  Json c = exp.is_object() ? exp.value("counts", Json::object()) : Json::object();
  auto get = [&c](const char* k) -> int64_t {
    return c.is_object() && c.contains(k) && c[k].is_number() ? c[k].get<int64_t>() : 0;
  };
  p.succeeded = get("succeeded");
  p.failed = get("failed");
  p.running = get("running");
  p.queued = get("queued");
  p.lost = get("lost");
  p.cancelled = get("cancelled");
  int64_t sum = p.succeeded + p.failed + p.running + p.queued + p.lost + p.cancelled;
  p.total = exp.is_object() && exp.contains("total") && exp["total"].is_number()
                ? exp["total"].get<int64_t>()
                : sum;
  return p;
}

double EstimateRemainingS(const Progress& p, const Timing& t) {
  if (p.queued + p.running == 0) return 0;
  if (!(t.mean_s > 0)) return -1;
  double left = double(p.queued) * t.mean_s;
  for (double e : t.running_elapsed_s) left += std::max(0.0, t.mean_s - e);
  // Running runs the timing query did not see (between two polls) take a full duration.
  left += double(std::max<int64_t>(0, p.running - int64_t(t.running_elapsed_s.size()))) * t.mean_s;
  return left / double(std::max<int64_t>(1, p.running));
}

std::string FormatDuration(double s) {
  const int64_t n = int64_t(std::llround(std::max(0.0, s)));
  char buf[32];
  if (n < 60)
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(n));
  else if (n < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(n / 60),
                  static_cast<long long>(n % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(n / 3600),
                  static_cast<long long>(n / 60 % 60));
  return buf;
}

std::string ProgressLine(const Progress& p, double elapsed_s, int bar_width, double eta_s) {
  std::string bar(bar_width, '.');
  if (p.total > 0) {
    auto cells = [&](int64_t n) {
      return int(std::floor(double(n) * bar_width / double(p.total)));
    };
    int ok = cells(p.succeeded);
    int bad = cells(p.succeeded + p.failed + p.lost + p.cancelled) - ok;
    int run = cells(p.succeeded + p.failed + p.lost + p.cancelled + p.running) - ok - bad;
    bar = std::string(ok, '#') + std::string(bad, 'x') + std::string(run, '>') +
          std::string(bar_width - ok - bad - run, '.');
  }
  int64_t done = p.succeeded + p.failed + p.lost + p.cancelled;
  std::string s = "[" + bar + "] " + std::to_string(done) + "/" + std::to_string(p.total) +
                  " done  succeeded " + std::to_string(p.succeeded) + "  failed " +
                  std::to_string(p.failed);
  if (p.lost) s += "  lost " + std::to_string(p.lost);
  if (p.cancelled) s += "  cancelled " + std::to_string(p.cancelled);
  s += "  running " + std::to_string(p.running) + "  queued " + std::to_string(p.queued) + "  " +
       std::to_string(int64_t(elapsed_s)) + "s";
  if (eta_s >= 0 && !p.Finished()) s += "  ETA ≈ " + FormatDuration(eta_s);
  return s;
}

int RunWait(const CliContext& ctx, const ParsedArgs& args) {
  auto id = ResolveExperiment(ctx, args.positional()[0]);
  if (!id.ok()) return Fail(ctx, id.status());
  double timeout_s = 0;  // 0 = no deadline
  if (args.Has("--timeout")) {
    char* end = nullptr;
    std::string t = args.Get("--timeout");
    timeout_s = std::strtod(t.c_str(), &end);
    if (t.empty() || *end != '\0' || !(timeout_s > 0))
      return Fail(ctx,
                  Status::InvalidArgument("--timeout: expected seconds > 0, got \"" + t + "\""));
  }
  const bool tty = ::isatty(STDERR_FILENO);
  const bool quiet = args.Has("--quiet");
  const std::string target = "/api/v1/experiments/" + std::to_string(id.value());
  HttpClient client = ctx.Client();
  client.set_timeout(std::chrono::seconds(10));
  auto start = std::chrono::steady_clock::now();
  std::string last_line, last_error;
  double last_print_s = -1e9;
  Progress p;
  bool seen = false;
  std::optional<Timing> timing;
  double timing_at = -1e9;
  while (true) {
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    auto exp = client.Call("GET", target);
    if (exp.ok()) {
      p = ProgressFromExperiment(exp.value());
      seen = true;
      last_error.clear();
      // Compare without the elapsed-seconds and ETA suffixes: a line per change, not per second.
      std::string key = ProgressLine(p, 0, 30);
      key = key.substr(0, key.rfind("  "));
      if (!quiet && !p.Finished() &&
          (key != last_line || elapsed - timing_at >= kTimingIntervalS)) {
        timing = LoadTiming(client, id.value());
        timing_at = elapsed;
      }
      const double estimate = timing ? EstimateRemainingS(p, *timing) : -1;
      const double eta = estimate < 0 ? -1 : std::max(0.0, estimate - (elapsed - timing_at));
      std::string line = ProgressLine(p, elapsed, 30, eta);
      if (!quiet && tty) {
        std::fprintf(stderr, "\r\033[K%s", line.c_str());
      } else if (!quiet && (key != last_line || elapsed - last_print_s >= kQuietLineIntervalS)) {
        std::fprintf(stderr, "%s\n", line.c_str());
        last_print_s = elapsed;
      }
      last_line = key;
      if (p.Finished()) break;
    } else if (ExitCodeFor(exp.status()) == kExitBadInput ||
               exp.status().code() == Status::Code::kPermissionDenied) {
      if (tty && seen) std::fprintf(stderr, "\n");
      return Fail(ctx, exp.status());
    } else if (exp.status().message() != last_error) {
      // Unreachable or a server error: keep trying until the deadline (a restart is normal).
      last_error = exp.status().message();
      std::fprintf(stderr, "%s%s; retrying\n", tty && seen ? "\n" : "", last_error.c_str());
    }
    if (timeout_s > 0 && elapsed >= timeout_s) {
      if (tty && seen) std::fprintf(stderr, "\n");
      return Fail(ctx, Status::Unavailable(
                           "experiment " + std::to_string(id.value()) + " not finished after " +
                           std::to_string(int64_t(timeout_s)) + "s" +
                           (seen ? " (" + ProgressLine(p, elapsed, 0).substr(3) + ")" : "")));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  if (tty && !quiet) std::fprintf(stderr, "\n");
  if (args.Has("--json")) {
    PrintJson({{"experiment", id.value()},
               {"total", p.total},
               {"succeeded", p.succeeded},
               {"failed", p.failed},
               {"lost", p.lost},
               {"cancelled", p.cancelled},
               {"ok", p.AllSucceeded()}});
  } else {
    std::printf("experiment %lld: %s\n", static_cast<long long>(id.value()),
                p.AllSucceeded() ? "all runs succeeded"
                                 : (std::to_string(p.total - p.succeeded) + " of " +
                                    std::to_string(p.total) + " runs did not succeed")
                                       .c_str());
  }
  return p.AllSucceeded() ? kExitOk : kExitFailed;
}

}  // namespace headlab
