// The coordinator benchmark. Five phases against one coordinator child process:
//   1. accept: POST a grid of `runs` no-op runs; the figure is the request's wall time.
//   2. dispatch: `workers` SimWorkers (slots 1 each) answer every ASSIGN at once; the
//      figure is runs / (last DONE ACK - first READY).
//   3. ingestion: each SimWorker streams `batches` METRICS of `batch_points` points for
//      one run (4 batches in flight); the figure is points ACKed / (last ACK - first
//      send), and headlab.db must then hold exactly that many points.
//      Meanwhile an SseProbe follows the first runs over GET /api/v1/stream; the figure
//      "live update latency" is the 99th percentile of (arrival - send) of their points.
//   4. heartbeat lateness: the longest gap between two coordinator HEARTBEATs any
//      simulated worker saw during phases 2 and 3, less the 1 s interval (with
//      --workers 1000: a thousand workers' heartbeats while the coordinator dispatches
//      and ingests).
//   5. results: a grid of `results_runs` runs in two arms paired by seed, with two eval
//      comparisons, runs on the fleet, each run leaving a logprobs artifact (a file the
//      coordinator reads, checks by SHA-256 and bootstraps 2,000 times per comparison)
//      and eval summaries. Three windows of `results_window_s` follow: quiet (the fleet
//      idles), compute (a client asks GET .../results?recompute=1 back to back, so the
//      results of the whole grid are being computed throughout) and stored (plain GET
//      .../results back to back). The figures are the 99th percentile of the
//      coordinator's HEARTBEAT lateness (gap less the 1 s interval, every HEARTBEAT of
//      every simulated worker) during the compute window, and the median time of a plain
//      GET .../results (served from the store once the experiment has finished).
//   6. requeue: a SimWorker accepts a run, sends one HEARTBEAT and goes silent; the
//      figure is the time from that heartbeat until a second SimWorker gets ASSIGN of
//      the same run as attempt 2.
// The simulated workers run in this process and share its CPU with the coordinator, as
// a real worker fleet would not: the figures are a lower bound for the coordinator alone.
#include "bench/coordinator_bench.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "bench/coordinator_process.h"
#include "bench/sim_worker.h"
#include "bench/sse_probe.h"
#include "cli/http_client.h"
#include "common/json.h"
#include "common/wire.h"
#include "coordinator/db.h"

namespace headlab::bench {
namespace {

using Seconds = std::chrono::duration<double>;
using Sims = std::vector<std::unique_ptr<SimWorker>>;

// Returns the text of a grid of `runs` runs of the no-op kind (axis: seed).
std::string NoopGrid(const std::string& name, int runs, const Json& noop) {
  Json seeds = Json::array();
  for (int i = 0; i < runs; ++i) seeds.push_back(i);
  Json grid = {{"name", name},
               {"description", "headlab bench coordinator"},
               {"base", {{"kind", "noop"}, {"noop", noop}}},
               {"axes", {{"seed", seeds}}},
               {"max_attempts", 3}};
  return grid.dump();
}

// POSTs a grid; returns the experiment id and sets *seconds to the request's wall time.
StatusOr<int64_t> Submit(const CoordinatorProcess& c, const std::string& name,
                         const std::string& text, int expect_runs, double* seconds) {
  Json body = {{"file", name + ".jsonc"},
               {"text", text},
               {"sets", Json::array()},
               {"rerun", true},
               {"dry_run", false}};
  HttpClient http(c.url(), c.token(), std::chrono::seconds(120));
  auto t0 = Clock::now();
  auto j = http.Call("POST", "/api/v1/experiments", &body);
  if (seconds) *seconds = Seconds(Clock::now() - t0).count();
  if (!j.ok()) return j.status();
  if (!j->contains("experiment") || j->value("runs", -1) != expect_runs)
    return Status::Internal("submit response without experiment id or with runs != " +
                            std::to_string(expect_runs) + ": " + j->dump().substr(0, 300));
  return (*j)["experiment"].get<int64_t>();
}

// Runs one `SELECT count(*) ...` on a read-only connection to the coordinator's database.
StatusOr<int64_t> Count(const CoordinatorProcess& c, const std::string& sql) {
  coord::Db db;
  HEADLAB_RETURN_IF_ERROR(db.Open(c.db_path(), coord::Db::Mode::kReadOnly));
  sqlite3_busy_timeout(db.raw(), 5000);
  auto st = db.Prepare(sql);
  if (!st.ok()) return st.status();
  Status err;
  if (!st->Step(&err)) return err.ok() ? Status::Internal("no row: " + sql) : err;
  return st->Int(0);
}

// Returns the number of workers /api/v1/workers reports alive, or -1.
int AliveWorkers(const CoordinatorProcess& c) {
  auto j = HttpClient(c.url(), "", std::chrono::seconds(10)).Call("GET", "/api/v1/workers");
  if (!j.ok() || !j->is_array()) return -1;
  int n = 0;
  for (const Json& w : *j) n += w.value("state", "") == "alive";
  return n;
}

// Polls `done` every 5 ms until it returns true or `timeout_s` passes; returns done().
template <typename F>
bool WaitFor(double timeout_s, F done) {
  auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Returns the first error any simulated worker reported, or "".
std::string FirstSimError(const Sims& sims) {
  for (const auto& s : sims)
    if (!s->error().empty()) return s->error();
  return "";
}

void Progress(const std::string& msg) { std::fprintf(stderr, "bench: %s\n", msg.c_str()); }

std::string Fmt(const char* fmt, double v) {
  char buf[128];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// Creates the benchmark's data dir under $TMPDIR (or /tmp).
StatusOr<std::string> MakeTempDir() {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/headlab-bench-XXXXXX";
  if (!mkdtemp(tmpl.data()))
    return Status::IoError("mkdtemp " + tmpl + ": " + std::strerror(errno));
  return tmpl;
}

// One benchmark run: the coordinator, the simulated fleet and the figures so far.
class Bench {
 public:
  Bench(const CoordinatorBenchOptions& o, CoordinatorProcess* c, CoordinatorBenchResult* r)
      : opt_(o), c_(c), r_(r) {
    // A large fleet: past ZeroMQ's default of 1,023 sockets per context, and served by a
    // few driver threads instead of one thread per simulated worker.
    ctx_.set(zmq::ctxopt::max_sockets, std::max(1024, 2 * opt_.workers + 64));
    if (opt_.workers > 64)
      driver_ = std::make_unique<SimDriver>(std::min(8, (opt_.workers + 127) / 128));
  }

  void AcceptGrid();
  void Dispatch();
  void Ingest();
  void LiveLatency(SseProbe* probe);
  void Requeue();
  void Results();
  void StopFleet();
  // The coordinator's heartbeat lateness seen by the fleet over the dispatch and
  // ingestion phases (a figure).
  void HeartbeatLateness();

 private:
  // Returns the fleet's HEARTBEAT lateness samples since the last call.
  std::vector<double> TakeLateness() {
    std::vector<double> all;
    for (auto& s : fleet_) {
      std::vector<double> d = s->TakeHeartbeatLateness();
      all.insert(all.end(), d.begin(), d.end());
    }
    return all;
  }
  // Records the fleet's longest gap between two coordinator HEARTBEATs so far.
  void CollectHeartbeatGaps() {
    for (auto& s : fleet_) max_gap_ = std::max(max_gap_, s->max_heartbeat_gap());
  }
  std::unique_ptr<SimWorker> NewSim(const std::string& name, SimWorker::Mode mode) {
    SimWorker::Options o;
    o.endpoint = c_->worker_endpoint();
    o.token = c_->worker_token();
    o.identity = "worker-bench-" + std::to_string(::getpid()) + "-" + name;
    o.name = name;
    o.mode = mode;
    o.batches = opt_.batches;
    o.batch_points = opt_.batch_points;
    o.window = opt_.window;
    o.work_dir = r_->data_dir + "/sim/" + name;
    return std::make_unique<SimWorker>(&ctx_, o);
  }
  void Note(const std::string& n) {
    Progress(n);
    r_->notes.push_back(n);
  }
  // Checks `sql` counts `want`; notes the outcome.
  bool Verify(const std::string& what, const std::string& sql, int64_t want) {
    auto n = Count(*c_, sql);
    if (!n.ok()) {
      Note("check FAILED: " + what + ": " + n.status().ToString());
      return false;
    }
    bool good = n.value() == want;
    Note(std::string(good ? "check ok: " : "check FAILED: ") + what + " = " +
         std::to_string(n.value()) + (good ? "" : " (expected " + std::to_string(want) + ")"));
    return good;
  }

  // Returns the number of succeeded runs of `exp` (-1 on error).
  int64_t Succeeded(int64_t exp) {
    auto n = Count(*c_,
                   "SELECT count(*) FROM runs WHERE status = 'succeeded' AND "
                   "experiment_id = " +
                       std::to_string(exp));
    return n.ok() ? n.value() : -1;
  }
  // Notes the coordinator's CPU time since `cpu0` and `n` `what` per CPU-second: a figure
  // that other load on the machine does not scale down the way wall time does.
  void NoteCpu(const std::string& phase, double cpu0, int64_t n, const std::string& what) {
    double cpu = c_->CpuSeconds() - cpu0;
    if (cpu0 < 0 || cpu <= 0) return;
    Note(phase + ": coordinator CPU " + Fmt("%.2f s", cpu) + " = " + Fmt("%.0f ", double(n) / cpu) +
         what + " per coordinator CPU-second");
  }
  // Notes attempts of `exp` the coordinator declared lost although every simulated worker
  // kept heartbeating (a sign the coordinator fell behind its own liveness deadlines).
  void NoteLost(const std::string& phase, int64_t exp) {
    auto n = Count(*c_,
                   "SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id WHERE "
                   "a.status = 'lost' AND r.experiment_id = " +
                       std::to_string(exp));
    int64_t cancels = 0;
    for (auto& s : fleet_) cancels += s->cancels();
    if (!n.ok() || n.value() > 0 || cancels > 0)
      Note(phase + ": attempts of live simulated workers declared lost: " +
           (n.ok() ? std::to_string(n.value()) : n.status().ToString()) +
           ", CANCELs received: " + std::to_string(cancels));
  }

  const CoordinatorBenchOptions& opt_;
  CoordinatorProcess* c_;
  CoordinatorBenchResult* r_;
  zmq::context_t ctx_{2};
  std::unique_ptr<SimDriver> driver_;  // null: one thread per simulated worker
  Sims fleet_;
  int64_t dispatch_exp_ = 0;
  Clock::duration max_gap_{};
  Clock::time_point fleet_started_{};
};

void Bench::AcceptGrid() {
  Figure f{"grid accept (" + std::to_string(opt_.runs) + " runs)", "s", Figure::Cmp::kLess, 2};
  std::string text = NoopGrid("bench_dispatch", opt_.runs, {{"duration_ms", 0}, {"metrics", 1}});
  double s = 0;
  auto exp = Submit(*c_, "bench_dispatch", text, opt_.runs, &s);
  if (!exp.ok()) {
    f.note = exp.status().ToString();
    Note("accept failed: " + f.note);
  } else {
    dispatch_exp_ = exp.value();
    f.measured = true;
    f.value = s;
    f.note = "POST /api/v1/experiments wall time, " + std::to_string(text.size()) + " byte grid";
    Verify("queued runs stored",
           "SELECT count(*) FROM runs WHERE status = 'queued' AND "
           "experiment_id = " +
               std::to_string(dispatch_exp_),
           opt_.runs);
  }
  r_->figures.push_back(f);
}

void Bench::Dispatch() {
  Figure f{"dispatch throughput (" + std::to_string(opt_.workers) + " workers)", "runs/s",
           Figure::Cmp::kGreaterEq, 500};
  for (int i = 0; i < opt_.workers; ++i)
    fleet_.push_back(NewSim("sim" + std::to_string(i), SimWorker::Mode::kNoop));
  if (dispatch_exp_ == 0) {
    f.note = "no grid to dispatch";
    r_->figures.push_back(f);
    return;
  }
  Progress("dispatching " + std::to_string(opt_.runs) + " runs to " + std::to_string(opt_.workers) +
           " simulated workers");
  std::string e = std::to_string(dispatch_exp_);
  double cpu0 = c_->CpuSeconds();
  auto t0 = Clock::now();
  fleet_started_ = t0;
  for (auto& s : fleet_) s->Start(driver_.get());
  auto done = [&] {
    int64_t n = 0;
    for (auto& s : fleet_) n += s->runs_done();
    return n;
  };
  bool finished = WaitFor(opt_.phase_timeout_s, [&] {
    return (done() >= opt_.runs && Succeeded(dispatch_exp_) >= opt_.runs) ||
           !FirstSimError(fleet_).empty();
  });
  Clock::time_point t1{};
  for (auto& s : fleet_) t1 = std::max(t1, s->last_done_ack());
  std::string err = FirstSimError(fleet_);
  if (!err.empty()) {
    f.note = "simulated worker error: " + err;
  } else if (!finished) {
    f.note = "only " + std::to_string(done()) + " of " + std::to_string(opt_.runs) +
             " runs done after " + Fmt("%.0f s", opt_.phase_timeout_s);
  } else {
    f.measured = true;
    f.value = opt_.runs / Seconds(t1 - t0).count();
    f.note = Fmt("%.2f s from the first READY to the last DONE ACK", Seconds(t1 - t0).count());
  }
  Note("dispatch: " + f.note);
  if (f.measured) NoteCpu("dispatch", cpu0, opt_.runs, "runs");
  CollectHeartbeatGaps();
  r_->figures.push_back(f);
  NoteLost("dispatch", dispatch_exp_);
  Verify("succeeded runs",
         "SELECT count(*) FROM runs WHERE status = 'succeeded' AND "
         "experiment_id = " +
             e,
         opt_.runs);
  Verify("succeeded attempt rows (one per run)",
         "SELECT count(*) FROM attempts a JOIN runs r "
         "ON r.id = a.run_id WHERE a.status = 'succeeded' AND r.experiment_id = " +
             e,
         opt_.runs);
}

void Bench::Ingest() {
  const int64_t per_run = int64_t(opt_.batches) * opt_.batch_points;
  const int64_t total = per_run * opt_.workers;
  Figure f{"metric ingestion", "points/s", Figure::Cmp::kGreaterEq, 200000};
  for (auto& s : fleet_) {
    s->ResetStats();
    s->set_mode(SimWorker::Mode::kIngest);
  }
  Progress("ingesting " + std::to_string(total) + " metric points (" +
           std::to_string(opt_.workers) + " workers x " + std::to_string(opt_.batches) +
           " batches x " + std::to_string(opt_.batch_points) + ")");
  std::string text =
      NoopGrid("bench_ingest", opt_.workers, {{"duration_ms", 0}, {"metrics", per_run}});
  double cpu0 = c_->CpuSeconds();
  auto exp = Submit(*c_, "bench_ingest", text, opt_.workers, nullptr);
  if (!exp.ok()) {
    f.note = exp.status().ToString();
    Note("ingest submit failed: " + f.note);
    r_->figures.push_back(f);
    return;
  }
  // The live stream follows the first runs while the whole fleet ingests.
  std::unique_ptr<SseProbe> probe;
  auto first_runs =
      Count(*c_, "SELECT min(id) FROM runs WHERE experiment_id = " + std::to_string(exp.value()));
  if (first_runs.ok()) {
    std::vector<int64_t> runs;
    for (int i = 0; i < std::min(opt_.workers, 8); ++i) runs.push_back(first_runs.value() + i);
    probe = std::make_unique<SseProbe>(c_->http_port(), runs);
    Status st = probe->Start();
    if (!st.ok()) {
      Note("live stream probe: " + st.ToString());
      probe.reset();
    }
  }
  auto acked = [&] {
    int64_t n = 0;
    for (auto& s : fleet_) n += s->points_acked();
    return n;
  };
  bool finished = WaitFor(opt_.phase_timeout_s, [&] {
    return (acked() >= total && Succeeded(exp.value()) >= opt_.workers) ||
           !FirstSimError(fleet_).empty();
  });
  Clock::time_point first = Clock::time_point::max(), last{};
  for (auto& s : fleet_) {
    if (s->first_metrics_sent() != Clock::time_point{})
      first = std::min(first, s->first_metrics_sent());
    last = std::max(last, s->last_metrics_ack());
  }
  std::string err = FirstSimError(fleet_);
  if (!err.empty()) {
    f.note = "simulated worker error: " + err;
  } else if (!finished) {
    f.note = std::to_string(acked()) + " of " + std::to_string(total) + " points ACKed after " +
             Fmt("%.0f s", opt_.phase_timeout_s);
  } else {
    f.measured = true;
    f.value = double(acked()) / Seconds(last - first).count();
    f.note = std::to_string(acked()) + " points ACKed in " +
             Fmt("%.2f s", Seconds(last - first).count());
  }
  Note("ingestion: " + f.note);
  if (f.measured) NoteCpu("ingestion", cpu0, acked(), "points");
  CollectHeartbeatGaps();
  r_->figures.push_back(f);
  LiveLatency(probe.get());
  NoteLost("ingestion", exp.value());
  Verify("metric points of the succeeded attempts in headlab.db",
         "SELECT count(*) FROM metrics m JOIN attempts a ON a.run_id = m.run_id AND "
         "a.attempt = m.attempt JOIN runs r ON r.id = m.run_id WHERE a.status = 'succeeded' "
         "AND r.experiment_id = " +
             std::to_string(exp.value()),
         total);
}

void Bench::LiveLatency(SseProbe* probe) {
  Figure f{"live update latency (p99, during ingestion)", "s", Figure::Cmp::kLessEq, 1};
  if (!probe) {
    f.note = "no stream probe";
  } else {
    // Points still in flight arrive within the target or count as late.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    probe->Stop();
    std::vector<double> d = probe->delays();
    if (!probe->error().empty()) {
      f.note = "stream error: " + probe->error();
    } else if (d.empty()) {
      f.note = "no points arrived over the stream";
    } else {
      std::sort(d.begin(), d.end());
      auto at = [&](double q) { return d[std::min(d.size() - 1, size_t(q * double(d.size())))]; };
      f.measured = true;
      f.value = at(0.99);
      f.note = std::to_string(d.size()) + " points streamed: median " + Fmt("%.3f s", at(0.5)) +
               ", p99 " + Fmt("%.3f s", at(0.99)) + ", max " + Fmt("%.3f s", d.back()) +
               " from send to arrival";
    }
  }
  Note("live stream: " + f.note);
  r_->figures.push_back(f);
}

void Bench::HeartbeatLateness() {
  Figure f{"heartbeat lateness (max, " + std::to_string(opt_.workers) + " workers)", "s",
           Figure::Cmp::kLessEq, 1};
  // Small runs end within a heartbeat interval: the fleet then idles (heartbeating) until
  // it has been up for a liveness window plus one interval, so every figure has gaps.
  std::this_thread::sleep_until(fleet_started_ + wire::kLiveness + wire::kHeartbeatInterval);
  CollectHeartbeatGaps();
  int64_t heartbeats = 0;
  for (auto& s : fleet_) heartbeats += s->coordinator_heartbeats();
  if (heartbeats == 0) {
    f.note = "no coordinator HEARTBEAT was received";
  } else {
    f.measured = true;
    f.value = std::max(0.0, Seconds(max_gap_ - wire::kHeartbeatInterval).count());
    f.note = std::to_string(heartbeats) +
             " coordinator HEARTBEATs received during dispatch "
             "and ingestion (at least 4 s); longest gap " +
             Fmt("%.3f s", Seconds(max_gap_).count()) + " (one is due every " +
             Fmt("%.1f s", Seconds(wire::kHeartbeatInterval).count()) +
             "; the liveness window is " + Fmt("%.0f s", Seconds(wire::kLiveness).count()) + ")";
  }
  Note("heartbeats: " + f.note);
  r_->figures.push_back(f);
}

namespace {

// The q-quantile (nearest rank) of `v`, sorted in place; NaN when empty.
double Quantile(std::vector<double>& v, double q) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

std::string Distribution(std::vector<double> v, const char* unit_fmt) {
  if (v.empty()) return "no samples";
  const double median = Quantile(v, 0.5), p99 = Quantile(v, 0.99);  // sorts v
  return std::to_string(v.size()) + " samples: median " + Fmt(unit_fmt, median) + ", p99 " +
         Fmt(unit_fmt, p99) + ", max " + Fmt(unit_fmt, v.back());
}

// Text of the results grid: `runs` runs in arms base and treat (noop.metrics 1, which the
// simulated workers read as the treatment), paired by seed, two eval comparisons.
std::string ResultsGrid(int runs) {
  Json seeds = Json::array();
  for (int i = 0; i < runs / 2; ++i) seeds.push_back(i);
  Json grid = {{"name", "bench_results"},
               {"description", "headlab bench coordinator: results while heartbeating"},
               {"base", {{"kind", "noop"}}},
               {"axes", {{"seed", seeds}}},
               {"arms", {{"base", Json::object()}, {"treat", {{"noop.metrics", 1}}}}},
               {"comparisons", Json::array({{{"name", "ppl"},
                                             {"baseline", "base"},
                                             {"treatment", "treat"},
                                             {"metric", "eval.ppl"},
                                             {"stat", "delta_pct"}},
                                            {{"name", "loss"},
                                             {"baseline", "base"},
                                             {"treatment", "treat"},
                                             {"metric", "eval.loss"},
                                             {"stat", "diff"}}})},
               {"max_attempts", 3}};
  return grid.dump();
}

}  // namespace

void Bench::Results() {
  const int runs = std::max(2, opt_.results_runs / 2 * 2);
  const std::string n = std::to_string(runs);
  Figure hb{"results computing: heartbeat lateness p99 (" + n + " runs)", "s", Figure::Cmp::kLessEq,
            0.1};
  Figure get{"results answer, stored (" + n + " runs, median)", "s", Figure::Cmp::kLessEq, 0.05};
  auto window = std::chrono::milliseconds(int64_t(opt_.results_window_s * 1000));
  // Quiet: the fleet idles, heartbeating.
  TakeLateness();
  std::this_thread::sleep_for(window);
  std::vector<double> quiet = TakeLateness();
  Note("results: heartbeat lateness, quiet: " + Distribution(quiet, "%.3f s"));

  for (auto& s : fleet_) s->set_mode(SimWorker::Mode::kResults);
  Progress("running the " + n + "-run results grid");
  auto exp = Submit(*c_, "bench_results", ResultsGrid(runs), runs, nullptr);
  if (!exp.ok()) {
    hb.note = get.note = "submit failed: " + exp.status().ToString();
    Note("results: " + hb.note);
    r_->figures.push_back(hb);
    r_->figures.push_back(get);
    return;
  }
  const std::string e = std::to_string(exp.value());
  bool finished = WaitFor(opt_.phase_timeout_s, [&] {
    return Succeeded(exp.value()) >= runs || !FirstSimError(fleet_).empty();
  });
  for (auto& s : fleet_) s->set_mode(SimWorker::Mode::kNoop);
  std::string err = FirstSimError(fleet_);
  Verify("succeeded runs of the results grid",
         "SELECT count(*) FROM runs WHERE status = "
         "'succeeded' AND experiment_id = " +
             e,
         runs);
  Verify("logprobs artifacts of the results grid",
         "SELECT count(*) FROM artifacts a JOIN runs r "
         "ON r.id = a.run_id WHERE a.kind = 'logprobs' AND r.experiment_id = " +
             e,
         runs);
  if (!finished || !err.empty()) {
    hb.note = get.note = !err.empty() ? "simulated worker error: " + err
                                      : "the results grid did not finish within " +
                                            Fmt("%.0f s", opt_.phase_timeout_s);
    Note("results: " + hb.note);
    r_->figures.push_back(hb);
    r_->figures.push_back(get);
    return;
  }

  // Back-to-back GETs of the results for one window; returns their times, counts stored
  // answers and keeps the first error.
  const std::string path = "/api/v1/experiments/" + e + "/results";
  std::string get_error;
  auto ask = [&](const std::string& target, int* stored) {
    std::vector<double> times;
    HttpClient http(c_->url(), "", std::chrono::seconds(120));
    auto end = Clock::now() + window;
    while (Clock::now() < end) {
      auto t0 = Clock::now();
      auto j = http.Call("GET", target);
      times.push_back(Seconds(Clock::now() - t0).count());
      if (!j.ok() || !j->contains("comparisons")) {
        if (get_error.empty())
          get_error = j.ok() ? j->dump().substr(0, 200) : j.status().ToString();
        break;
      }
      if (j->value("stored", false)) ++*stored;
    }
    return times;
  };
  // Compute: the whole grid's results computed again and again.
  int stored_compute = 0, stored_plain = 0;
  TakeLateness();
  std::vector<double> computes = ask(path + "?recompute=1", &stored_compute);
  std::vector<double> during = TakeLateness();
  // Stored: what a dashboard polling the results costs once the experiment has finished.
  std::vector<double> plain = ask(path, &stored_plain);
  std::vector<double> after = TakeLateness();
  Note("results: GET ?recompute=1 back to back: " + Distribution(computes, "%.3f s"));
  Note("results: heartbeat lateness, computing: " + Distribution(during, "%.3f s"));
  Note("results: GET back to back: " + Distribution(plain, "%.4f s") + "; " +
       std::to_string(stored_plain) + " answered from the store");
  Note("results: heartbeat lateness, answering stored results: " + Distribution(after, "%.3f s"));
  NoteLost("results", exp.value());
  if (!get_error.empty()) {
    hb.note = get.note = "GET " + path + ": " + get_error;
  } else {
    if (!during.empty()) {
      hb.measured = true;
      hb.value = std::max(0.0, Quantile(during, 0.99));  // a gap a little under 1 s: on time
      hb.note = std::to_string(computes.size()) + " computations of the results in " +
                Fmt("%.0f s", opt_.results_window_s) + "; quiet p99 " +
                Fmt("%.3f s", Quantile(quiet, 0.99));
    } else {
      hb.note = "no coordinator HEARTBEAT arrived while computing";
    }
    if (!plain.empty()) {
      get.measured = true;
      get.value = Quantile(plain, 0.5);
      get.note = std::to_string(stored_plain) + " of " + std::to_string(plain.size()) +
                 " answers stored; a computed answer took " +
                 Fmt("%.3f s", Quantile(computes, 0.5)) + " (median)";
    }
  }
  r_->figures.push_back(hb);
  r_->figures.push_back(get);
}

void Bench::StopFleet() {
  for (auto& s : fleet_) s->Stop();
  fleet_.clear();
}

void Bench::Requeue() {
  Figure f{"dead-worker requeue latency", "s", Figure::Cmp::kLessEq, 5};
  StopFleet();  // each sends DISCONNECT
  if (!WaitFor(15, [&] { return AliveWorkers(*c_) == 0; }))
    Note("requeue: the coordinator still lists alive workers after DISCONNECT");
  std::string text = NoopGrid("bench_requeue", 1, {{"duration_ms", 1}, {"metrics", 0}});
  auto exp = Submit(*c_, "bench_requeue", text, 1, nullptr);
  if (!exp.ok()) {
    f.note = exp.status().ToString();
    r_->figures.push_back(f);
    return;
  }
  auto dead = NewSim("dead", SimWorker::Mode::kSilentAfterAccept);
  dead->Start(driver_.get());
  if (!WaitFor(30, [&] { return dead->silent(); })) {
    f.note = "the run was not assigned to the first simulated worker within 30 s";
    Note("requeue: " + f.note);
    r_->figures.push_back(f);
    return;
  }
  int64_t run = dead->assignments().front().run;
  auto heir = NewSim("heir", SimWorker::Mode::kNoop);
  heir->Start(driver_.get());
  SimWorker::Assignment again{};
  bool got = WaitFor(30, [&] {
    for (const auto& a : heir->assignments())
      if (a.run == run && a.attempt >= 2) {
        again = a;
        return true;
      }
    return false;
  });
  if (!got) {
    auto st = Count(*c_, "SELECT count(*) FROM attempts WHERE status = 'lost' AND run_id = " +
                             std::to_string(run));
    f.note = "run " + std::to_string(run) + " was not reassigned to the second worker within " +
             "30 s (second worker: " + (heir->welcomed() ? "welcomed" : "not welcomed") +
             (heir->error().empty() ? "" : ", error " + heir->error()) + "; lost attempts of " +
             "the run: " + (st.ok() ? std::to_string(st.value()) : st.status().ToString()) + ")";
  } else {
    f.measured = true;
    f.value = Seconds(again.at - dead->last_heartbeat()).count();
    f.note = "last HEARTBEAT of the silent worker -> ASSIGN attempt " +
             std::to_string(again.attempt) + " to another worker";
  }
  Note("requeue: " + f.note);
  r_->figures.push_back(f);
  WaitFor(10, [&] { return heir->runs_done() >= 1; });
  Verify("attempt 1 of the dead worker's run marked lost",
         "SELECT count(*) FROM attempts WHERE "
         "status = 'lost' AND attempt = 1 AND run_id = " +
             std::to_string(run),
         1);
  heir->Stop();
  dead->Stop();
}

}  // namespace

StatusOr<CoordinatorBenchResult> RunCoordinatorBench(const CoordinatorBenchOptions& opt) {
  CoordinatorBenchResult result;
  auto dir = MakeTempDir();
  if (!dir.ok()) return dir.status();
  result.data_dir = dir.value();
  Progress("starting the coordinator in " + result.data_dir);
  auto c = CoordinatorProcess::Start(opt.binary, result.data_dir + "/data");
  if (!c.ok()) return c.status();
  {
    Bench b(opt, c.value().get(), &result);
    b.AcceptGrid();
    b.Dispatch();
    b.Ingest();
    b.HeartbeatLateness();
    b.Results();
    b.Requeue();
    b.StopFleet();
  }
  auto rc = c.value()->Stop(10);
  std::string shutdown = rc.ok()
                             ? "coordinator exited " + std::to_string(rc.value()) + " on SIGTERM"
                             : rc.status().ToString();
  Progress(shutdown);
  result.notes.push_back(shutdown);
  if (!opt.keep) {
    std::error_code ec;
    std::filesystem::remove_all(result.data_dir, ec);
  }
  return result;
}

}  // namespace headlab::bench
