#include "worker/attempt.h"

#include <poll.h>

#include <catch2/catch.hpp>
#include <set>

#include "common/metric_names.h"

namespace headlab {
namespace {

struct Sent {
  std::string command;
  Json body;
};

// Runs `script` under /bin/sh as an attempt until it finishes (or `cancel_after` passes,
// then cancels it). Returns everything it emitted.
std::vector<Sent> RunScript(const std::string& script, AttemptOptions opt = {},
                            std::chrono::milliseconds cancel_after = std::chrono::hours(1),
                            bool abandon = false) {
  std::vector<Sent> sent;
  auto a = Attempt::Start(Json(7), 2, {"/bin/sh", "-c", script}, {{"HEADLAB_TEST_VAR", "x"}},
                          Json{{"host", "h"}}, opt, [&](const std::string& c, Json b) {
                            sent.push_back({c, std::move(b)});
                          });
  REQUIRE(a.ok());
  Attempt& at = **a;
  at.ReportProvenance();
  auto start = Attempt::Clock::now();
  while (!at.finished()) {
    auto now = Attempt::Clock::now();
    REQUIRE(now - start < std::chrono::seconds(20));
    if (now - start >= cancel_after) abandon ? at.Abandon(now) : at.Cancel(now);
    std::vector<pollfd> fds;
    for (int fd : at.Fds()) fds.push_back({fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 10);
    for (const pollfd& p : fds)
      if (p.revents) at.OnReadable(p.fd);
    at.Tick(Attempt::Clock::now());
  }
  return sent;
}

std::vector<Sent> Only(const std::vector<Sent>& all, const std::string& cmd) {
  std::vector<Sent> r;
  for (const Sent& s : all)
    if (s.command == cmd) r.push_back(s);
  return r;
}

}  // namespace

TEST_CASE("Attempt relays events and reports a failing exit with the stderr tail") {
  const char* script = R"(
echo '{"ev":"metric","step":0,"key":"train.loss","value":5.5,"t":1.5}'
echo 'this is not an event'
echo '{"ev":"metric","step":10,"key":"train.loss","value":4.0,"t":2.5}'
echo '{"ev":"artifact","kind":"checkpoint","path":"/tmp/c.pt","sha256":"ab","bytes":3,"step":10}'
echo '{"ev":"provenance","fields":{"libtorch_version":"1.13","host":"exec-says","attention_paths":{"sdpa[16]":[0]}}}'
echo '{"ev":"provenance","fields":{"attention_paths":{"fused[16]":[0]}}}'
echo '{"ev":"summary","values":{"eval.ppl":9.0}}'
echo "var=$HEADLAB_TEST_VAR" >&2
printf '{"ev":"metric","step":11,"key":"k","value":1}'
exit 3
)";
  std::vector<Sent> sent = RunScript(script);
  REQUIRE(sent.front().command == "PROVENANCE");  // host facts first
  CHECK(sent.front().body["fields"]["host"] == "h");

  std::vector<Json> points;
  for (const Sent& s : Only(sent, "METRICS")) {
    CHECK(s.body["run"] == 7);
    CHECK(s.body["attempt"] == 2);
    for (const Json& p : s.body["points"]) points.push_back(p);
  }
  REQUIRE(points.size() == 3);  // the unterminated last line counts too
  for (size_t i = 0; i < points.size(); ++i) CHECK(points[i][0] == int64_t(i));
  CHECK(points[1] == Json::array({1, 10, "train.loss", 4.0, 2.5}));

  auto arts = Only(sent, "ARTIFACT");
  REQUIRE(arts.size() == 1);
  CHECK(arts[0].body["seq"] == 0);
  CHECK(arts[0].body["sha256"] == "ab");

  auto prov = Only(sent, "PROVENANCE");
  REQUIRE(prov.size() == 3);
  CHECK(prov[1].body["fields"]["libtorch_version"] == "1.13");
  CHECK(prov[1].body["fields"]["host"] == "h");  // the worker's own facts win
  // exec's later fields replace its earlier ones (a re-planned layer's paths), and the
  // fields it sent once stay.
  CHECK(prov[2].body["fields"]["attention_paths"] == Json{{"fused[16]", {0}}});
  CHECK(prov[2].body["fields"]["libtorch_version"] == "1.13");
  CHECK(prov[2].body["fields"]["host"] == "h");

  REQUIRE(sent.back().command == "DONE");
  const Json& done = sent.back().body;
  CHECK(done["status"] == "failed");
  CHECK(done["exit_code"] == 3);
  CHECK(done["error"] == "exit 3");
  CHECK(done["stderr_tail"] == "var=x\n");
  CHECK(done["summary"]["eval.ppl"] == 9.0);
}

TEST_CASE("Attempt reports success, and batches many metrics") {
  AttemptOptions opt;
  opt.metrics_batch = 1000;
  std::vector<Sent> sent = RunScript(
      "i=0; while [ $i -lt 2500 ]; do echo \"{\\\"ev\\\":\\\"metric\\\",\\\"step\\\":$i,"
      "\\\"key\\\":\\\"k\\\",\\\"value\\\":$i,\\\"t\\\":0}\"; i=$((i+1)); done; exit 0",
      opt);
  int64_t expect = 0;
  for (const Sent& s : Only(sent, "METRICS")) {
    CHECK(s.body["points"].size() <= 1000);
    for (const Json& p : s.body["points"]) CHECK(p[0] == expect++);
  }
  CHECK(expect == 2500);
  CHECK(sent.back().body["status"] == "succeeded");
  CHECK(sent.back().body["error"] == "");
  CHECK(sent.back().body["exit_code"] == 0);
}

TEST_CASE("Attempt reports a child killed by a signal as failed") {
  std::vector<Sent> sent = RunScript("echo boom >&2; kill -9 $$");
  const Json& done = sent.back().body;
  CHECK(done["status"] == "failed");
  CHECK(done["error"] == "killed by signal 9");
  CHECK(done["exit_code"] == 128 + 9);
  CHECK(done["stderr_tail"] == "boom\n");
}

TEST_CASE("Attempt cancel: SIGTERM to the group ends it as cancelled") {
  auto t0 = Attempt::Clock::now();
  std::vector<Sent> sent = RunScript("sleep 30", {}, std::chrono::milliseconds(100));
  CHECK(Attempt::Clock::now() - t0 < std::chrono::seconds(5));
  CHECK(sent.back().body["status"] == "cancelled");
  CHECK(sent.back().body["error"] == "cancelled (killed by signal 15)");
}

TEST_CASE("Attempt cancel: SIGKILL after the grace period when SIGTERM is ignored") {
  AttemptOptions opt;
  opt.cancel_grace = std::chrono::milliseconds(200);
  std::vector<Sent> sent = RunScript("trap '' TERM; echo ready; sleep 30; sleep 30", opt,
                                     std::chrono::milliseconds(100));
  CHECK(sent.back().body["status"] == "cancelled");
  CHECK(sent.back().body["error"] == "cancelled (killed by signal 9)");
}

TEST_CASE("Attempt abandoned by a stopping worker flushes its results but sends no DONE") {
  std::vector<Sent> sent =
      RunScript("echo '{\"ev\":\"metric\",\"step\":1,\"key\":\"k\",\"value\":1,\"t\":0}'; sleep 30",
                {}, std::chrono::milliseconds(200), /*abandon=*/true);
  CHECK(Only(sent, "DONE").empty());
  CHECK(Only(sent, "METRICS").size() == 1);
}

TEST_CASE("Attempt killed by an outside SIGTERM waits briefly for the worker's own stop") {
  // As under Slurm: the job step's processes all get SIGTERM; the worker stops just after.
  std::vector<Sent> sent = RunScript("kill -TERM $$", {}, std::chrono::milliseconds(300),
                                     /*abandon=*/true);
  CHECK(Only(sent, "DONE").empty());
  // Nobody stops the worker: after the grace the attempt fails as before.
  auto t0 = Attempt::Clock::now();
  sent = RunScript("kill -TERM $$");
  CHECK(Attempt::Clock::now() - t0 >= std::chrono::milliseconds(1900));
  REQUIRE(Only(sent, "DONE").size() == 1);
  CHECK(sent.back().body["status"] == "failed");
  CHECK(sent.back().body["error"] == "killed by signal 15");
}

TEST_CASE("Attempt::Start fails cleanly for a missing binary") {
  auto a = Attempt::Start(Json(1), 0, {"/nonexistent/headlab"}, {}, Json::object(), {},
                          [](const std::string&, Json) {});
  REQUIRE(!a.ok());
  CHECK(a.status().message().find("/nonexistent/headlab") != std::string::npos);
}

}  // namespace headlab

namespace headlab {

TEST_CASE("Attempt samples the child's RSS once it logs metrics, one point per second") {
  AttemptOptions opt;
  opt.system_period = std::chrono::milliseconds(50);
  auto sent = RunScript(R"(
echo '{"ev":"metric","step":1,"key":"train.loss","value":2.0,"t":1.0}'
sleep 2.2
)",
                        opt);
  std::vector<Json> sys;
  std::set<int64_t> steps;
  int64_t last_seq = -1;
  for (const Sent& m : Only(sent, wire::kMetrics))
    for (const Json& p : m.body["points"]) {
      CHECK(p[0].get<int64_t>() > last_seq);  // one seq space with the child's points
      last_seq = p[0];
      if (p[2] == metric::kSysHostRssBytes) {
        sys.push_back(p);
        CHECK(steps.insert(p[1].get<int64_t>()).second);  // never two at one step
      }
      CHECK(p[2] != metric::kSysGpuUtilPct);  // no GPUs given: no GPU series
    }
  // Seconds 0, 1 and 2 (a loaded machine may miss one).
  REQUIRE(sys.size() >= 2);
  CHECK(sys.size() <= 3);
  for (const Json& p : sys) {
    CHECK(p[3].get<double>() > 100 * 1024);  // /bin/sh + sleep hold more than 100 KiB
    CHECK(p[3].get<double>() < 1024.0 * 1024 * 1024);
    CHECK(p[4].get<double>() > 1.6e9);  // unix seconds
  }
}

TEST_CASE("Attempt takes no system sample before the child's first metric") {
  AttemptOptions opt;
  opt.system_period = std::chrono::milliseconds(20);
  auto sent = RunScript("sleep 0.3", opt);
  CHECK(Only(sent, wire::kMetrics).empty());
}

}  // namespace headlab
