#include "common/grid.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>

#include "common/files.h"
#include "common/run_config.h"
#include "common/sha256.h"
#include "common/source_dir.h"
#include "common/utf8.h"

using headlab::ExpandGrid;
using headlab::Json;

namespace {

constexpr const char* kGrid = R"({
  // a comment
  "name": "g1",
  "base": {"model": {"layers": 1, "heads": 2, "width": 32}, "train": {"steps": 10}},
  "axes": {"seed": [1, 2], "train.lr": [1e-3, 3e-3, 1e-2]},
  /* two arms */
  "arms": {"wide": {"model.width": 64}, "narrow": {}},
  "comparisons": [{"name": "wide vs narrow", "baseline": "narrow", "treatment": "wide",
                   "metric": "eval.ppl", "stat": "delta_pct"}],
  "max_attempts": 2
})";

// Returns the error of expanding `text` with `sets` (empty when it succeeded).
std::string ErrorOf(const std::string& text, const std::vector<std::string>& sets = {}) {
  auto g = ExpandGrid(text, "g.jsonc", sets);
  return g.ok() ? "" : g.status().message();
}

}  // namespace

TEST_CASE("Expansion order: arms lexicographic, then axes with the last varying fastest") {
  auto g = ExpandGrid(kGrid, "g.jsonc", {});
  REQUIRE(g.ok());
  CHECK(g->name == "g1");
  CHECK(g->max_attempts == 2);
  CHECK(g->arms == std::vector<std::string>{"narrow", "wide"});
  CHECK(g->pair_by == std::vector<std::string>{"seed"});
  REQUIRE(g->runs.size() == 12);
  REQUIRE(g->comparisons.size() == 1);
  CHECK(g->comparisons[0].stat == "delta_pct");
  // Axes in key order: "seed" < "train.lr"; train.lr varies fastest.
  for (int i = 0; i < 12; ++i) {
    const auto& r = g->runs[i];
    CHECK(r.index == i);
    CHECK(r.arm == (i < 6 ? "narrow" : "wide"));
    CHECK(r.config["seed"] == 1 + (i % 6) / 3);
    double lrs[] = {1e-3, 3e-3, 1e-2};
    CHECK(r.config["train"]["lr"].get<double>() == Approx(lrs[i % 3]));
    CHECK(r.config["model"]["width"] == (i < 6 ? 32 : 64));
    CHECK(r.config["model"]["layers"] == 1);
    CHECK(r.config["train"]["steps"] == 10);
    CHECK(r.config_hash == headlab::Sha256Hex(headlab::CanonicalJson(r.config)));
    CHECK(r.pair_key == "[" + std::to_string(1 + (i % 6) / 3) + "]");
  }
  // Runs of the same arm have distinct hashes; the same seed pairs across arms.
  CHECK(g->runs[0].config_hash != g->runs[1].config_hash);
  CHECK(g->runs[0].pair_key == g->runs[6].pair_key);
}

TEST_CASE("Identical grids expand identically; hashes are stable") {
  auto a = ExpandGrid(kGrid, "a.jsonc", {});
  auto b = ExpandGrid(kGrid, "b.jsonc", {});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  for (size_t i = 0; i < a->runs.size(); ++i)
    CHECK(a->runs[i].config_hash == b->runs[i].config_hash);
  // A default config's hash is pinned: changing a default or the canonical form changes it.
  auto d = ExpandGrid(R"({"name": "d", "base": {}})", "d", {});
  REQUIRE(d.ok());
  REQUIRE(d->runs.size() == 1);
  CHECK(d->runs[0].arm == "main");
  CHECK(d->runs[0].config == headlab::DefaultRunConfig());
  CHECK(d->runs[0].config_hash == headlab::Sha256Hex(headlab::DefaultRunConfig().dump()));
  CHECK(d->runs[0].pair_key == "[0]");
}

TEST_CASE("--set adds and overrides axes") {
  auto g = ExpandGrid(kGrid, "g.jsonc", {"seed=7,8,9", "model.layers=2"});
  REQUIRE(g.ok());
  CHECK(g->runs.size() == 2 * 3 * 3 * 1);
  CHECK(g->runs[0].config["seed"] == 7);
  CHECK(g->runs[0].config["model"]["layers"] == 2);
  CHECK(g->source["axes"]["seed"] == Json::parse("[7,8,9]"));
  g = ExpandGrid(kGrid, "g.jsonc", {"train.device=cpu"});
  REQUIRE(g.ok());
  CHECK(g->runs[0].config["train"]["device"] == "cpu");
  CHECK(ErrorOf(kGrid, {"train.lrr=1"})
            .rfind("g.jsonc: --set \"train.lrr=1\": unknown config key \"train.lrr\"; did you mean "
                   "\"train.lr\"?",
                   0) == 0);
  CHECK(ErrorOf(kGrid, {"seed="}) == "g.jsonc: --set \"seed=\": empty axis");
  CHECK(ErrorOf(kGrid, {"noequals"}) ==
        "g.jsonc: --set \"noequals\": expected KEY=V1,V2,... or KEY=[V1, V2, ...]");
  CHECK(ErrorOf(kGrid, {"model.layers=two"}) ==
        "g.jsonc: --set \"model.layers=two\": expected an integer in [1, 128], got \"two\"");
}

// A value with commas (a head list) needs the JSON-list form; a key given twice was
// silently the last one.
TEST_CASE("--set takes a JSON list of values and refuses a key given twice") {
  auto g = ExpandGrid(kGrid, "g.jsonc",
                      {R"(model.head_modes=["0.0=local:16,0.1=pruned", "*.*=local:8"])"});
  REQUIRE(g.ok());
  CHECK(g->source["axes"]["model.head_modes"] ==
        Json::array({"0.0=local:16,0.1=pruned", "*.*=local:8"}));
  CHECK(g->runs.size() == 2 * 2 * 3 * 2);
  g = ExpandGrid(kGrid, "g.jsonc", {"seed=[3, 4, 5]"});
  REQUIRE(g.ok());
  CHECK(g->source["axes"]["seed"] == Json::parse("[3,4,5]"));
  CHECK(ErrorOf(kGrid, {"seed=1", "seed=2"}) ==
        "g.jsonc: --set \"seed=2\": seed is already set by --set \"seed=1\"; give every value "
        "in one: --set seed=V1,V2");
  CHECK(ErrorOf(kGrid, {"seed=[]"})
            .rfind("g.jsonc: --set \"seed=[]\": expected a non-empty JSON list of values", 0) == 0);
  CHECK(ErrorOf(kGrid, {"seed=[1, 1]"}) ==
        "g.jsonc: --set \"seed=[1, 1]\": duplicate value 1 (runs would repeat)");
}

// Head lists fail at submit, at the run that names a head the model lacks, not on a worker.
TEST_CASE("Head lists are checked against the model's layers and heads at submit") {
  // kGrid's model: 1 layer x 2 heads.
  CHECK(ErrorOf(kGrid, {"model.head_modes=9.9=local:16"}) ==
        "g.jsonc: run 0 (arm \"narrow\", model.head_modes=\"9.9=local:16\", seed=1, "
        "train.lr=0.001): $.model.head_modes: head 9.9 is outside the model's 1 x 2");
  CHECK(ErrorOf(kGrid, {"model.head_modes=garbage"})
            .find("$.model.head_modes: expected LAYER.HEAD=MODE, got \"garbage\"") !=
        std::string::npos);
  CHECK(ErrorOf(kGrid, {"saf.heads=0.2"})
            .find("$.saf.heads: head 0.2 is outside the model's 1 x 2") != std::string::npos);
  CHECK(
      ErrorOf(kGrid, {R"(prune.heads=["0.1,0.1"])"}).find("$.prune.heads: head 0.1 listed twice") !=
      std::string::npos);
  // A string key takes a value typed as a number as its text.
  auto saf = ExpandGrid(kGrid, "g.jsonc", {"saf.heads=0.1,0.0"});
  REQUIRE(saf.ok());
  CHECK(saf->source["axes"]["saf.heads"] == Json::array({"0.1", "0.0"}));
  CHECK(
      ErrorOf(kGrid, {"bench.fixed_heads=1.*"}).find("$.bench.fixed_heads: head 1.* is outside") !=
      std::string::npos);
  CHECK(ExpandGrid(kGrid, "g.jsonc",
                   {R"(model.head_modes=["0.0=local:16,0.1=pruned", "*.*=streaming:1:4"])"})
            .ok());
}

// Random search: samples x axes x arms, the sampled keys in every run; a key searched and
// swept or set by an arm is refused.
TEST_CASE("A search section expands its samples like an axis of points") {
  const std::string grid = R"({"name": "rs", "base": {"kind": "noop"},
    "axes": {"seed": [1, 2]}, "arms": {"a": {}, "b": {"noop.metrics": 1}},
    "search": {"samples": 3, "seed": 11, "space": {"train.lr": {"log_uniform": [1e-4, 1e-2]},
                                                   "train.warmup_steps": {"uniform": [0, 9]}}}})";
  auto g = ExpandGrid(grid, "g.jsonc", {});
  REQUIRE(g.ok());
  REQUIRE(g->runs.size() == 2 * 3 * 2);
  // Arm a: sample 0 seed 1, sample 0 seed 2, sample 1 seed 1, ...; arm b repeats the samples.
  for (int i = 0; i < 6; ++i) {
    const Json& ca = g->runs[size_t(i)].config;
    const Json& cb = g->runs[size_t(6 + i)].config;
    CHECK(ca["seed"] == 1 + i % 2);
    CHECK(ca["train"]["lr"] == cb["train"]["lr"]);
    CHECK(ca["train"]["warmup_steps"] == cb["train"]["warmup_steps"]);
    const double lr = ca["train"]["lr"].get<double>();
    CHECK((lr >= 1e-4 && lr <= 1e-2));
  }
  CHECK(g->runs[0].config["train"]["lr"] == g->runs[1].config["train"]["lr"]);
  CHECK(g->runs[0].config["train"]["lr"] != g->runs[2].config["train"]["lr"]);
  CHECK(g->runs[0].pair_key == g->runs[6].pair_key);
  auto again = ExpandGrid(grid, "g.jsonc", {});
  CHECK(again->runs[4].config_hash == g->runs[4].config_hash);
  auto with = [&](const std::string& patch) {
    Json j = Json::parse(grid);
    j.merge_patch(Json::parse(patch));
    return ErrorOf(j.dump());
  };
  CHECK(with(R"({"axes": {"train.lr": [0.001, 0.01]}})") ==
        "g.jsonc: $.search.space.train.lr: also an axis: search or sweep a key, not both");
  CHECK(with(R"({"arms": {"b": {"train.warmup_steps": 3}}})") ==
        "g.jsonc: $.arms.b.train.warmup_steps: also searched ($.search.space): the arm would "
        "override every draw");
  CHECK(with(R"({"search": {"samples": 0}})").find("$.search.samples") != std::string::npos);
}

TEST_CASE("Strata: axes of two or more values outside pair_by, then searched keys") {
  auto g = ExpandGrid(kGrid, "g.jsonc", {"model.layers=1"});  // one value: no stratum
  REQUIRE(g.ok());
  CHECK(headlab::StrataKeys(g->source, g->pair_by) == std::vector<std::string>{"train.lr"});
  CHECK(headlab::StrataKeys(g->source, {"seed", "train.lr"}).empty());
  Json search = Json::parse(R"({"axes": {"seed": [1, 2]}, "search": {"samples": 2,
      "space": {"train.lr": {"uniform": [0.1, 0.2]}}}})");
  CHECK(headlab::StrataKeys(search, {}) == std::vector<std::string>{"seed", "train.lr"});
  search["search"]["samples"] = 1;
  CHECK(headlab::StrataKeys(search, {"seed"}).empty());
}

// One submit names every bad field, not the first of them.
TEST_CASE("A grid with several bad fields reports all of them") {
  const std::string text = R"({"name": "x", "bogus": 1,
    "base": {"train": {"lr": 2, "device": "gpu"}, "model": {"heds": 2}},
    "axes": {"seed": [1, 1]}, "max_attempts": 0})";
  const std::string m = ErrorOf(text);
  INFO(m);
  CHECK(m.rfind("g.jsonc: 6 problems:\n  g.jsonc: $.bogus: unknown key", 0) == 0);
  for (const char* part : {"\n  g.jsonc: $.base.model.heds: unknown key; did you mean \"heads\"?",
                           "\n  g.jsonc: $.base.train.device: expected one of \"auto\", \"cpu\", "
                           "\"cuda\", got \"gpu\" (did you "
                           "mean \"cuda\"?)",
                           "\n  g.jsonc: $.base.train.lr: expected a number in (0, 1], got 2",
                           "\n  g.jsonc: $.axes.seed[1]: duplicate value 1 (runs would repeat)",
                           "\n  g.jsonc: $.max_attempts: expected an integer in [1, 20], got 0"})
    CHECK(m.find(part) != std::string::npos);
}

TEST_CASE("Bad grids: every error names the file, the JSON path and the expectation") {
  auto with = [](const std::string& patch) {
    Json g = Json::parse(kGrid, nullptr, true, true);
    g.merge_patch(Json::parse(patch));
    return ErrorOf(g.dump());
  };
  CHECK(with(R"({"base": {"model": {"layers": "two"}}})") ==
        "g.jsonc: $.base.model.layers: expected an integer in [1, 128], got \"two\"");
  CHECK(with(R"({"base": {"model": {"heds": 2}}})")
            .rfind("g.jsonc: $.base.model.heds: unknown key; did you mean \"heads\"? (known in "
                   "model: layers, heads, width, context, "
                   "mlp_ratio, vocab, preset",
                   0) == 0);
  CHECK(with(R"({"base": {"train": {"lr": 2}}})") ==
        "g.jsonc: $.base.train.lr: expected a number in (0, 1], got 2");
  CHECK(with(R"({"axes": {"train.lr": []}})") == "g.jsonc: $.axes.train.lr: empty axis");
  CHECK(with(R"({"axes": {"train.lr": [0.1, 5]}})") ==
        "g.jsonc: $.axes.train.lr[1]: expected a number in (0, 1], got 5");
  CHECK(with(R"({"axes": {"seed": [1, 1]}})") ==
        "g.jsonc: $.axes.seed[1]: duplicate value 1 (runs would repeat)");
  CHECK(with(R"({"axes": {"train.lr": 0.1}})") ==
        "g.jsonc: $.axes.train.lr: expected a non-empty list of values, got 0.1");
  CHECK(with(R"({"axes": {"model.heds": [1]}})")
            .rfind("g.jsonc: $.axes.model.heds: unknown config key \"model.heds\"; did you mean "
                   "\"model.heads\"? ",
                   0) == 0);
  CHECK(with(R"({"comparisons": [{"name": "x", "baseline": "narrow", "treatment": "saf",
                                  "metric": "eval.ppl", "stat": "diff"}]})") ==
        "g.jsonc: $.comparisons[0].treatment: unknown arm \"saf\" (arms: narrow, wide)");
  CHECK(with(R"({"comparisons": [{"name": "x", "baseline": "narrow", "treatment": "wide",
                                  "metric": "eval.ppl", "stat": "mean"}]})") ==
        "g.jsonc: $.comparisons[0].stat: expected one of \"delta_pct\", \"diff\", \"ratio\", "
        "\"speedup\", "
        "got \"mean\"");
  CHECK(with(R"({"comparisons": [{"name": "x", "baseline": "narrow", "treatment": "wide",
                                  "stat": "diff"}]})") ==
        "g.jsonc: $.comparisons[0].metric: required: a metric name such as \"eval.ppl\"");
  CHECK(with(R"({"comparisons": [{"name": "x", "baseline": "narrow", "treatment": "narrow",
                                  "metric": "eval.ppl", "stat": "diff"}]})") ==
        "g.jsonc: $.comparisons[0].treatment: expected an arm other than the baseline, got "
        "\"narrow\"");
  CHECK(with(R"({"max_attempts": 0})") ==
        "g.jsonc: $.max_attempts: expected an integer in [1, 20], got 0");
  CHECK(with(R"({"max_attempts": 21})") ==
        "g.jsonc: $.max_attempts: expected an integer in [1, 20], got 21");
  CHECK(with(R"({"pair_by": ["sed"]})")
            .rfind("g.jsonc: $.pair_by[0]: unknown config key \"sed\"; did you mean \"seed\"?",
                   0) == 0);
  CHECK(with(R"({"pair_by": "seed"})") ==
        "g.jsonc: $.pair_by: expected a list of config keys, got \"seed\"");
  CHECK(with(R"({"name": "has space"})") ==
        "g.jsonc: $.name: expected a name matching [A-Za-z0-9_.-]{1,64}, got \"has space\"");
  CHECK(with(R"({"arms": {"wide": {"model.layers": 0}}})") ==
        "g.jsonc: $.arms.wide.model.layers: expected an integer in [1, 128], got 0");
  CHECK(with(R"({"arms": {"wide": {"train.lr": 0.5}}})") ==
        "g.jsonc: $.arms.wide.train.lr: also an axis: the override would make that axis's "
        "runs identical");
  CHECK(with(R"({"arms": []})") ==
        "g.jsonc: $.arms: expected an object of arm name -> overrides, got []");
  CHECK(with(R"({"extra": 1})") ==
        "g.jsonc: $.extra: unknown key (known: name, description, base, axes, arms, pair_by, "
        "comparisons, max_attempts, search)");
  CHECK(ErrorOf(R"({"base": {}})") ==
        "g.jsonc: $.name: required: a name matching [A-Za-z0-9_.-]{1,64}");
  CHECK(ErrorOf(R"({"name": "x"})") == "g.jsonc: $.base: required: a run config object");
  CHECK(ErrorOf("[]") == "g.jsonc: $: expected an object (a grid), got []");
  CHECK(ErrorOf("{\"name\": ").rfind("g.jsonc: invalid JSON at byte", 0) == 0);
  // A cross-field error is reported for the run that breaks it.
  CHECK(with(R"({"axes": {"model.heads": [2, 3]}})") ==
        "g.jsonc: run 6 (arm \"narrow\", model.heads=3, seed=1, train.lr=0.001): "
        "$.model.width: expected a multiple of model.heads (3), got 32");
}

TEST_CASE("A 10,000-run grid expands") {
  std::string text = R"({"name": "big", "base": {"kind": "noop"},
    "axes": {"seed": [)";
  for (int i = 0; i < 1000; ++i) text += (i ? "," : "") + std::to_string(i);
  text += R"(], "noop.duration_ms": [0,1,2,3,4,5,6,7,8,9]}})";
  auto g = ExpandGrid(text, "big.jsonc", {});
  REQUIRE(g.ok());
  REQUIRE(g->runs.size() == 10000);
  CHECK(g->runs[9999].config["seed"] == 999);
  CHECK(g->runs[9999].config["noop"]["duration_ms"] == 9);
  CHECK(g->runs[9999].index == 9999);
}

TEST_CASE("A grid whose configs would exceed the byte bound is refused before expansion") {
  // 100 keys of 4,000 bytes over 2,000 seeds: each key within its limits, 800 MB in all.
  std::string params;
  for (int i = 0; i < 100; ++i)
    params += (i ? ", \"p" : "\"p") + std::to_string(i) + "\": \"" + std::string(4000, 'x') + "\"";
  std::string seeds;
  for (int i = 1; i <= 2000; ++i) seeds += (i > 1 ? "," : "") + std::to_string(i);
  const std::string text = R"({"name": "wide", "base": {"kind": "command",
    "command": {"program": "x.py"}, "params": {)" +
                           params + R"(}}, "axes": {"seed": [)" + seeds + "]}}";
  auto start = std::chrono::steady_clock::now();
  std::string err = ErrorOf(text);
  CHECK(err.find("g.jsonc: $: the grid's 2000 runs of up to") == 0);
  CHECK(err.find("MiB of configs") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  // The same keys over 20 seeds (8 MB) expand.
  std::string few = text.substr(0, text.find("\"seed\": [")) +
                    R"("seed": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]}})";
  CHECK(ErrorOf(few) == "");
}

TEST_CASE("The byte bound counts each run's defaults, not only the grid's text") {
  // A no-op run's complete config is about 2.7 KB though its grid says only its kind:
  // 100,000 of them (a 2 GB expansion) are refused, 10,000 expand.
  auto noop = [](int runs) {
    std::string seeds;
    for (int i = 1; i <= runs; ++i) seeds += (i > 1 ? "," : "") + std::to_string(i);
    return R"({"name": "n", "base": {"kind": "noop"}, "axes": {"seed": [)" + seeds + "]}}";
  };
  std::string err = ErrorOf(noop(100000));
  CHECK(err.find("g.jsonc: $: the grid's 100000 runs of up to") == 0);
  CHECK(err.find("MiB of configs") != std::string::npos);
  CHECK(ErrorOf(noop(10000)) == "");
}

TEST_CASE("The repository's grid files expand or fail as documented") {
  auto load = [](const std::string& rel) {
    std::string path = std::string(headlab::SourceDir()) + "/experiments/" + rel;
    auto text = headlab::ReadFile(path);
    REQUIRE(text.ok());
    return ExpandGrid(text.value(), rel, {});
  };
  auto demo = load("demo.jsonc");
  REQUIRE(demo.ok());
  CHECK(demo->runs.size() == 4);
  CHECK(demo->runs[0].config["model"]["width"] == 128);
  CHECK(demo->runs[0].config["train"]["threads"] == 1);
  auto six = load("tests/six_runs.jsonc");
  REQUIRE(six.ok());
  CHECK(six->runs.size() == 6);
  // SAF App. C.5's four-GPU 1B update benchmark: 3 arms x 4 ABBA reps, every leg a gang of
  // 4 GPUs with 4 ranks and 2 x 8 x 4 x 8192 = 524,288 tokens per update.
  auto gang = load("measure/saf_update_1b_4gpu.jsonc");
  REQUIRE(gang.ok());
  REQUIRE(gang->runs.size() == 12);
  for (const auto& run : gang->runs) {
    const headlab::Json& c = run.config;
    CHECK(c["resources"]["gpus"] == 4);
    CHECK(c["train"]["ranks"] == 4);
    CHECK(c["model"]["layers"] == 32);
    CHECK(c["train"]["batch_size"].get<double>() * c["train"]["grad_accum"].get<double>() *
              c["train"]["ranks"].get<double>() * c["model"]["context"].get<double>() ==
          524288);
  }
  struct Bad {
    const char* file;
    const char* message;
  };
  const Bad bad[] = {
      {"tests/bad_unknown_key.jsonc",
       "tests/bad_unknown_key.jsonc: $.base.model.heds: unknown key"},
      {"tests/bad_wrong_type.jsonc",
       "tests/bad_wrong_type.jsonc: $.base.model.layers: expected an integer in [1, 128], got "
       "\"two\""},
      {"tests/bad_out_of_range.jsonc",
       "tests/bad_out_of_range.jsonc: $.axes.train.lr[1]: expected a number in (0, 1], got 5"},
      {"tests/bad_empty_axis.jsonc", "tests/bad_empty_axis.jsonc: $.axes.seed: empty axis"},
      {"tests/bad_unknown_arm.jsonc",
       "tests/bad_unknown_arm.jsonc: $.comparisons[0].treatment: unknown arm \"saf\""},
  };
  for (const Bad& b : bad) {
    auto g = load(b.file);
    REQUIRE(!g.ok());
    CHECK(g.status().code() == headlab::Status::Code::kInvalidArgument);
    CHECK(g.status().message().rfind(b.message, 0) == 0);
  }
}

TEST_CASE("Hostile grid files are bad input naming the file, never a crash") {
  // Nested 100,000 deep under a run-config key: before the depth limit the parse
  // succeeded and flattening the config overflowed the stack.
  std::string deep = R"({"name": "deep", "base": {"model": )" + std::string(100000, '[') +
                     std::string(100000, ']') + "}}";
  CHECK(ErrorOf(deep) == "g.jsonc: JSON nested deeper than 64 levels at byte 97");
  // Bytes that are not UTF-8, in a comment (which the JSON parser would skip) and in a
  // string: the first one is named with its line.
  CHECK(ErrorOf("{\"name\": \"x\", // caf\xe9\n \"base\": {}}") ==
        "g.jsonc: byte 20 (line 1): not valid UTF-8 (a grid file is UTF-8 text)");
  CHECK(ErrorOf("{\n\"name\": \"\xff\"}") ==
        "g.jsonc: byte 11 (line 2): not valid UTF-8 (a grid file is UTF-8 text)");
  CHECK(ErrorOf(R"({"name": "x", "base": {}})", {"train.lr=\xff"}) ==
        "g.jsonc: --set \"train.lr=\\xff\": not valid UTF-8");
  // A number beyond the double range: bad input (the CLI's exit 2), not an exception.
  std::string huge = ErrorOf(R"({"name": "x", "base": {"train": {"lr": 1e999}}})");
  CHECK(huge.rfind("g.jsonc: invalid JSON", 0) == 0);
  CHECK(huge.find("1e999") != std::string::npos);
  // Binary garbage that happens to be ASCII (NULs and controls included).
  const char kGarbage[] = "\x00\x01{\x7f[\x02\"";
  std::string garbage = ErrorOf(std::string(kGarbage, sizeof kGarbage - 1));
  CHECK(garbage.rfind("g.jsonc: invalid JSON at byte", 0) == 0);
  CHECK(headlab::IsValidUtf8(garbage));
}

TEST_CASE("A value quoted in an error is never cut inside a character (found by grid_fuzz)") {
  // A grid that is one string of euro signs (3 bytes each): the message quotes it,
  // shortened to 57 bytes, which used to end two bytes into a sign.
  std::string text = "\"";
  for (int i = 0; i < 30; ++i) text += "\xe2\x82\xac";
  text += "\"";
  std::string error = ErrorOf(text);
  CHECK(error.rfind("g.jsonc: $: expected an object (a grid), got \"", 0) == 0);
  CHECK(headlab::IsValidUtf8(error));
}

namespace {

std::string GridError(const std::string& text, const std::vector<std::string>& sets = {}) {
  auto g = headlab::ExpandGrid(text, "g.jsonc", sets);
  return g.ok() ? "" : g.status().message();
}

}  // namespace

// "metric": "eval.perplexity" used to be stored and give n pairs 0 without a word.
TEST_CASE("A comparison on a metric no run kind reports is refused") {
  const std::string grid = R"({"name": "g", "base": {"kind": "train"},
      "arms": {"a": {}, "b": {"train.lr": 1e-3}},
      "comparisons": [{"name": "c", "baseline": "a", "treatment": "b",
                       "metric": "eval.perplexity", "stat": "delta_pct"}]})";
  std::string err = GridError(grid);
  CHECK(err.rfind("g.jsonc: $.comparisons[0].metric: no run kind of this grid reports "
                  "\"eval.perplexity\"",
                  0) == 0);
  CHECK(err.find("eval.ppl") != std::string::npos);  // the eval metrics are listed
  std::string typo = grid;
  typo.replace(typo.find("eval.perplexity"), 15, "eval.pll");
  CHECK(GridError(typo).find("did you mean \"eval.ppl\"?") != std::string::npos);
  std::string fine = grid;
  fine.replace(fine.find("eval.perplexity"), 15, "eval.ppl");
  CHECK(GridError(fine).empty());
  // A command run's program names its own metrics.
  std::string command = grid;
  command.replace(command.find(R"({"kind": "train"})"), 17,
                  R"({"kind": "command", "command.program": "t.py"})");
  CHECK(GridError(command).empty());
}

// The README's `--set train.lr=1e-3,3e-3` on the demo grid used to say only "also an
// axis" at a path the user never wrote.
TEST_CASE("--set on a key the arms set says so at the --set argument") {
  const std::string grid = R"({"name": "g", "base": {}, "axes": {"seed": [1, 2]},
      "arms": {"lr_3e-3": {"train.lr": 3e-3}, "lr_1e-3": {"train.lr": 1e-3}}})";
  std::string err = GridError(grid, {"train.lr=1e-3,3e-3"});
  CHECK(err.rfind("g.jsonc: --set \"train.lr=1e-3,3e-3\": arm \"lr_1e-3\" sets train.lr itself",
                  0) == 0);
  CHECK(err.find("--set seed=1,2,3") != std::string::npos);
  auto seeds = headlab::ExpandGrid(grid, "g.jsonc", {"seed=1,2,3"});
  REQUIRE(seeds.ok());
  CHECK(seeds->runs.size() == 6);
}

// Every grid in experiments/ (but the deliberately bad ones) expands; a continuation grid
// is given the parent its header asks for (--set parent.run=... or parent.experiment=...).
TEST_CASE("Every repository grid file expands") {
  namespace fs = std::filesystem;
  int files = 0;
  for (const auto& e :
       fs::recursive_directory_iterator(std::string(headlab::SourceDir()) + "/experiments")) {
    const std::string path = e.path().string();
    if (e.path().extension() != ".jsonc" || path.find("/tests/bad_") != std::string::npos) continue;
    auto text = headlab::ReadFile(path);
    REQUIRE(text.ok());
    std::vector<std::string> sets;
    if (text->find("parent.experiment") != std::string::npos)
      sets.push_back("parent.experiment=1");
    else if (text->find("\"parent.run\"") != std::string::npos)
      sets.push_back("parent.run=1,2");
    if (text->find("--set time_match.experiment") != std::string::npos)
      sets.push_back("time_match.experiment=2");
    auto g = ExpandGrid(text.value(), path, sets);
    INFO(path << (g.ok() ? "" : ": " + g.status().message()));
    CHECK(g.ok());
    ++files;
  }
  CHECK(files > 40);
}
