// `headlab wait EXP`: poll the experiment until no run is queued or running, drawing a
// progress bar on stderr (redrawn in place on a terminal, a line per change otherwise).
// It rides out coordinator restarts: an unreachable coordinator is retried until the
// deadline, since a grid outlives any one coordinator process.
#include "cli/wait.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "cli/commands.h"
#include "cli/resolve.h"

namespace headlab {

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(1000);
// Without a terminal, a line is printed on every change and at least this often.
constexpr double kQuietLineIntervalS = 30.0;

}  // namespace

bool Progress::Finished() const {
  return queued == 0 && running == 0 &&
         succeeded + failed + lost + cancelled >= total;
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
                ? exp["total"].get<int64_t>() : sum;
  return p;
}

std::string ProgressLine(const Progress& p, double elapsed_s, int bar_width) {
  std::string bar(bar_width, '.');
  if (p.total > 0) {
    auto cells = [&](int64_t n) { return int(std::floor(double(n) * bar_width / double(p.total))); };
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
      return Fail(ctx, Status::InvalidArgument("--timeout: expected seconds > 0, got \"" + t + "\""));
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
  while (true) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    auto exp = client.Call("GET", target);
    if (exp.ok()) {
      p = ProgressFromExperiment(exp.value());
      seen = true;
      last_error.clear();
      std::string line = ProgressLine(p, elapsed);
      // Compare without the elapsed-seconds suffix: a line per change, not per second.
      std::string key = line.substr(0, line.rfind("  "));
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
    PrintJson({{"experiment", id.value()}, {"total", p.total}, {"succeeded", p.succeeded},
               {"failed", p.failed}, {"lost", p.lost}, {"cancelled", p.cancelled},
               {"ok", p.AllSucceeded()}});
  } else {
    std::printf("experiment %lld: %s\n", static_cast<long long>(id.value()),
                p.AllSucceeded() ? "all runs succeeded"
                                 : (std::to_string(p.total - p.succeeded) + " of " +
                                    std::to_string(p.total) + " runs did not succeed").c_str());
  }
  return p.AllSucceeded() ? kExitOk : kExitFailed;
}

}  // namespace headlab
