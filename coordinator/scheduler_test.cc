// Scheduler: resource matching, gang placement, exclusivity, fair share, priorities,
// reservations against starvation, the DB lookup.
#include "coordinator/scheduler.h"

#include <catch2/catch.hpp>

#include "coordinator/scheduler_lookup.h"
#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

Json Gpu(int index, double memory_gb, int cc_major, int cc_minor) {
  return {
      {"index", index},       {"name", "gpu"},        {"memory_bytes", int64_t(memory_gb * 1e9)},
      {"cc_major", cc_major}, {"cc_minor", cc_minor}, {"kind", "cuda"}};
}

// A worker with `n` identical GPUs (or a CPU worker with `slots` when n == 0).
WorkerInfo MakeWorker(const std::string& id, int n, double memory_gb = 80, int cc_major = 9,
                      int cc_minor = 0, int slots = 1) {
  WorkerInfo w;
  w.id = id;
  w.name = id;
  w.slots = slots;
  w.devices = Json::array();
  for (int i = 0; i < n; ++i) {
    w.devices.push_back(Gpu(i, memory_gb, cc_major, cc_minor));
    w.cuda_devices.push_back(i);
  }
  if (n == 0)
    w.devices.push_back({{"index", 0},
                         {"name", "cpu"},
                         {"memory_bytes", int64_t(64e9)},
                         {"cc_major", 0},
                         {"cc_minor", 0},
                         {"kind", "cpu"}});
  return w;
}

// A scheduler test bench: runs with demands, workers, and a loop that starts placements.
struct Bench {
  std::map<std::string, WorkerInfo> workers;
  std::map<int64_t, RunDemand> runs;
  Scheduler s;
  int next_attempt = 1;

  void Add(int64_t run, int64_t exp, Demand d = {}) {
    runs[run] = {exp, d};
    s.Push(run);
  }
  DemandLookup Lookup() {
    return [this](const std::vector<int64_t>& ids) {
      std::map<int64_t, RunDemand> out;
      for (int64_t id : ids) out[id] = runs.count(id) ? runs[id] : RunDemand{};
      return out;
    };
  }
  // One dispatch pass: every placement is started (added to its worker's running map).
  std::vector<Placement> Pass() {
    std::vector<Placement> out;
    s.BeginPass(workers, Lookup());
    while (auto p = s.Next()) {
      p->worker->running[AttemptRef{p->run, next_attempt++}] = p->devices;
      out.push_back(*p);
    }
    return out;
  }
  // Ends `run`'s attempt wherever it runs.
  void Finish(int64_t run) {
    for (auto& [id, w] : workers)
      for (auto it = w.running.begin(); it != w.running.end();)
        it = it->first.run == run ? w.running.erase(it) : std::next(it);
  }
};

Demand Gpus(int n, bool exclusive = false) {
  Demand d;
  d.gpus = n;
  d.exclusive = exclusive;
  return d;
}

}  // namespace

TEST_CASE("scheduler: demand from config, defaults when absent") {
  Demand d = DemandFromConfig(Json::parse(R"({"kind":"noop"})"));
  CHECK(d.gpus == 0);
  CHECK(!d.exclusive);
  CHECK(d.priority == 0);
  d = DemandFromConfig(Json::parse(
      R"({"resources":{"gpus":4,"min_memory_gb":40,"min_compute_capability":8.6,"exclusive":1},
          "priority":7})"));
  CHECK(d.gpus == 4);
  CHECK(d.min_memory_gb == 40);
  CHECK(d.min_cc == Approx(8.6));
  CHECK(d.exclusive);
  CHECK(d.priority == 7);
  CHECK(DescribeDemand(d) == "4 GPUs (>= 40 GB, cc >= 8.6, exclusive)");
  CHECK(DescribeDemand(Demand{}) == "1 slot");
}

TEST_CASE("scheduler: memory and compute capability are matched per device") {
  Bench b;
  b.workers["small"] = MakeWorker("small", 2, 16, 7, 5);
  b.workers["big"] = MakeWorker("big", 1, 80, 9, 0);
  Demand need;
  need.min_memory_gb = 40;
  b.Add(1, 1, need);
  Demand cc;
  cc.min_cc = 8.0;
  b.Add(2, 1, cc);
  Demand any;
  b.Add(3, 1, any);
  auto ps = b.Pass();
  REQUIRE(ps.size() == 2);
  CHECK(ps[0].run == 1);
  CHECK(ps[0].worker->id == "big");
  // Run 2 needs cc 8.0: only "big" has it and it is busy; run 3 takes a small GPU.
  CHECK(ps[1].run == 3);
  CHECK(ps[1].worker->id == "small");
  b.Finish(1);
  ps = b.Pass();
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].run == 2);
  CHECK(ps[0].worker->id == "big");
}

TEST_CASE("scheduler: a demand no worker can meet waits with a reason") {
  Bench b;
  b.workers["a"] = MakeWorker("a", 2);
  b.Add(1, 1, Gpus(4));
  CHECK(b.Pass().empty());
  CHECK(b.s.size() == 1);
  CHECK(b.s.WaitReason(1) == "needs 4 GPUs: no registered worker has that");
  // A CPU worker never takes a GPU demand, nor one with a compute capability.
  Bench c;
  c.workers["cpu"] = MakeWorker("cpu", 0, 0, 0, 0, 4);
  c.Add(1, 1, Gpus(1));
  Demand cc;
  cc.min_cc = 7.0;
  c.Add(2, 1, cc);
  c.Add(3, 1);
  auto ps = c.Pass();
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].run == 3);
  CHECK(ps[0].devices.empty());
}

TEST_CASE("scheduler: gang placement puts all GPUs of a run on one worker") {
  Bench b;
  b.workers["a"] = MakeWorker("a", 2);
  b.workers["b"] = MakeWorker("b", 4);
  b.Add(1, 1, Gpus(3));
  b.Add(2, 1, Gpus(2));
  auto ps = b.Pass();
  REQUIRE(ps.size() == 2);
  CHECK(ps[0].run == 1);
  CHECK(ps[0].worker->id == "b");
  CHECK(ps[0].devices == std::vector<int>{0, 1, 2});
  CHECK(ps[1].run == 2);
  CHECK(ps[1].worker->id == "a");
  CHECK(ps[1].devices == std::vector<int>{0, 1});
  CHECK(b.workers["b"].FreeSlots() == 1);
  CHECK(b.workers["a"].FreeSlots() == 0);
}

TEST_CASE("scheduler: single-GPU runs pack tightly, keeping whole workers for gangs") {
  Bench b;
  b.workers["a"] = MakeWorker("a", 4);
  b.workers["b"] = MakeWorker("b", 4);
  for (int r = 1; r <= 3; ++r) b.Add(r, 1, Gpus(1));
  auto ps = b.Pass();
  REQUIRE(ps.size() == 3);
  CHECK(ps[0].worker == ps[1].worker);
  CHECK(ps[1].worker == ps[2].worker);
  b.Add(4, 2, Gpus(4));
  ps = b.Pass();
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].run == 4);
  CHECK(ps[0].devices == std::vector<int>{0, 1, 2, 3});
  CHECK(ps[0].worker->running.size() == 1);  // the worker the single-GPU runs left empty
}

TEST_CASE("scheduler: a blocked gang run reserves a worker instead of starving") {
  Bench b;
  b.workers["a"] = MakeWorker("a", 2);
  b.Add(1, 1, Gpus(1));
  REQUIRE(b.Pass().size() == 1);  // run 1 holds GPU 0
  b.Add(2, 1, Gpus(2));           // needs both GPUs
  for (int r = 3; r <= 6; ++r) b.Add(r, 1, Gpus(1));
  // GPU 1 is free but kept for run 2: the later single-GPU runs must not take it.
  CHECK(b.Pass().empty());
  CHECK(b.s.ReservedFor(2) == "a");
  b.Finish(1);
  auto ps = b.Pass();
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].run == 2);
  CHECK(ps[0].devices == std::vector<int>{0, 1});
  CHECK(b.s.ReservedFor(2) == "");
}

TEST_CASE("scheduler: an exclusive run gets an idle worker to itself") {
  Bench b;
  b.workers["a"] = MakeWorker("a", 2);
  b.workers["b"] = MakeWorker("b", 2);
  b.Add(1, 1, Gpus(1));
  REQUIRE(b.Pass().size() == 1);
  std::string busy = b.workers["a"].running.empty() ? "b" : "a";
  std::string idle = busy == "a" ? "b" : "a";
  b.Add(2, 1, Gpus(1, /*exclusive=*/true));
  b.Add(3, 1, Gpus(1));
  b.Add(4, 1, Gpus(1));
  auto ps = b.Pass();
  REQUIRE(ps.size() == 2);
  CHECK(ps[0].run == 2);
  CHECK(ps[0].worker->id == idle);
  CHECK(ps[0].exclusive);
  // Run 3 goes to the busy worker's free GPU, not beside the exclusive run; run 4 waits.
  CHECK(ps[1].run == 3);
  CHECK(ps[1].worker->id == busy);
  CHECK(b.s.size() == 1);
  CHECK(b.Pass().empty());
  // An exclusive run waits for a busy worker to drain and then blocks later runs from it.
  Bench c;
  c.workers["a"] = MakeWorker("a", 2);
  c.Add(1, 1, Gpus(1));
  REQUIRE(c.Pass().size() == 1);
  c.Add(2, 1, Gpus(1, true));
  c.Add(3, 1, Gpus(1));
  CHECK(c.Pass().empty());
  c.Finish(1);
  auto qs = c.Pass();
  REQUIRE(qs.size() == 1);
  CHECK(qs[0].run == 2);
}

TEST_CASE("scheduler: priorities are strict; grid order within an experiment") {
  Bench b;
  b.workers["cpu"] = MakeWorker("cpu", 0, 0, 0, 0, 1);
  Demand low, high;
  high.priority = 5;
  low.priority = -1;
  b.Add(1, 1, low);
  b.Add(2, 1);
  b.Add(3, 2, high);
  b.Add(4, 2, high);
  std::vector<int64_t> order;
  for (int i = 0; i < 4; ++i) {
    auto ps = b.Pass();
    REQUIRE(ps.size() == 1);
    order.push_back(ps[0].run);
    b.Finish(ps[0].run);
  }
  CHECK(order == std::vector<int64_t>{3, 4, 2, 1});
}

TEST_CASE("scheduler: fair share across experiments of equal priority") {
  Bench b;
  b.workers["cpu"] = MakeWorker("cpu", 0, 0, 0, 0, 4);
  for (int r = 1; r <= 10; ++r) b.Add(r, 1);   // an early, large experiment
  for (int r = 11; r <= 12; ++r) b.Add(r, 2);  // a later, small one
  auto ps = b.Pass();
  REQUIRE(ps.size() == 4);
  std::map<int64_t, int> per_exp;
  for (const auto& p : ps) ++per_exp[p.experiment];
  CHECK(per_exp[1] == 2);
  CHECK(per_exp[2] == 2);
  // Experiment 1 holds 2 slots; when one of its runs ends it gets the slot back first
  // only once experiment 2 has nothing left.
  b.Finish(ps[0].run);
  auto next = b.Pass();
  REQUIRE(next.size() == 1);
  CHECK(next[0].experiment == 1);
}

TEST_CASE("scheduler: CPU runs spread over workers; cancelled and undone placements") {
  Bench b;
  b.workers["a"] = MakeWorker("a", 0, 0, 0, 0, 2);
  b.workers["b"] = MakeWorker("b", 0, 0, 0, 0, 2);
  b.Add(1, 1);
  b.Add(2, 1);
  b.Add(3, 1);
  b.s.Remove(3);
  b.s.BeginPass(b.workers, b.Lookup());
  auto p1 = b.s.Next();
  REQUIRE(p1);
  b.s.Undo(*p1);  // e.g. waiting for its parent: not started, not queued
  auto p2 = b.s.Next();
  REQUIRE(p2);
  CHECK(p2->run == 2);
  CHECK(!b.s.Next());
  CHECK(b.s.empty());
  b.Add(4, 1);
  b.Add(5, 1);
  auto ps = b.Pass();
  REQUIRE(ps.size() == 2);
  CHECK(ps[0].worker != ps[1].worker);
}

TEST_CASE("scheduler: the database lookup reads resources and priority") {
  TempDir dir;
  Store store;
  REQUIRE(store.Open(dir.path() + "/h.db").ok());
  Grid g = TestGrid({"a"}, 2);
  g.runs[1].config["resources"] = {{"gpus", 2}, {"exclusive", 1}};
  g.runs[1].config["priority"] = 3;
  auto res = store.InsertExperiment(g, {}, false);
  REQUIRE(res.ok());
  REQUIRE(res->queued.size() == 2);
  auto found = DbDemandLookup(store.db())({res->queued[0], res->queued[1], 999999});
  REQUIRE(found.size() == 3);
  CHECK(found[res->queued[0]].experiment == res->experiment_id);
  CHECK(found[res->queued[0]].demand == Demand{});
  CHECK(found[res->queued[1]].demand.gpus == 2);
  CHECK(found[res->queued[1]].demand.exclusive);
  CHECK(found[res->queued[1]].demand.priority == 3);
  CHECK(found[999999].experiment == 0);
  REQUIRE(store.StartAttempt({res->queued[1], 1}, "w1", {2, 3}, nullptr, res->experiment_id).ok());
  auto devices = AttemptDevices(store.db(), {res->queued[1], 1});
  REQUIRE(devices);
  CHECK(*devices == std::vector<int>{2, 3});
  CHECK(!AttemptDevices(store.db(), {res->queued[1], 2}));
}

TEST_CASE("scheduler: a pinned run waits for its worker and devices") {
  Bench b;
  b.workers["a"] = MakeWorker("a", 2);
  b.workers["b"] = MakeWorker("b", 2);
  b.Add(1, 1, Gpus(1));
  b.Add(2, 1, Gpus(1));
  b.s.Pin(2, "b", {1});
  b.Add(3, 1, Gpus(1));
  auto ps = b.Pass();
  REQUIRE(ps.size() == 3);
  CHECK(ps[1].run == 2);
  CHECK(ps[1].worker->id == "b");
  CHECK(ps[1].devices == std::vector<int>{1});
  b.Add(4, 1, Gpus(1));
  b.s.Pin(4, "b", {1});  // busy: waits, and later runs keep off worker b
  b.Add(5, 1, Gpus(1));
  ps = b.Pass();
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].run == 5);
  CHECK(ps[0].worker->id == "a");
  CHECK(b.s.ReservedFor(4) == "b");
  b.Finish(2);
  ps = b.Pass();
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].run == 4);
  CHECK(ps[0].devices == std::vector<int>{1});
}

}  // namespace headlab::coord
