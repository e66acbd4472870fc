#include "common/run_config.h"

#include <catch2/catch.hpp>

using headlab::Json;
using headlab::NormalizeRunConfig;

namespace {

// Returns the error message of normalising `config` (empty when it succeeded).
std::string ErrorOf(const Json& config) {
  auto r = NormalizeRunConfig(config, "f.jsonc");
  return r.ok() ? "" : r.status().message();
}

}  // namespace

TEST_CASE("Default run config matches schema/grid.md") {
  Json d = headlab::DefaultRunConfig();
  CHECK(d["kind"] == "train");
  CHECK(d["seed"] == 0);
  CHECK(d["model"]["layers"] == 2);
  CHECK(d["model"]["heads"] == 4);
  CHECK(d["model"]["width"] == 128);
  CHECK(d["model"]["context"] == 128);
  CHECK(d["model"]["vocab"] == 256);
  CHECK(d["model"]["preset"] == "");
  CHECK(d["train"]["lr"].get<double>() == Approx(3e-3));
  CHECK(d["train"]["device"] == "auto");
  CHECK(d["data"]["source"] == "builtin");
  CHECK(d["noop"]["duration_ms"] == 0);
  // Every leaf of the defaults is a schema key and vice versa.
  CHECK(d.flatten().size() == headlab::RunConfigKeys().size());
  auto n = NormalizeRunConfig(Json::object(), "f");
  REQUIRE(n.ok());
  CHECK(n.value() == d);
}

TEST_CASE("Presets fill their fields; explicit fields win") {
  auto r = NormalizeRunConfig(Json::parse(R"({"model": {"preset": "124m"}})"), "f");
  REQUIRE(r.ok());
  CHECK(r.value()["model"]["layers"] == 12);
  CHECK(r.value()["model"]["heads"] == 12);
  CHECK(r.value()["model"]["width"] == 768);
  CHECK(r.value()["model"]["context"] == 4096);
  CHECK(r.value()["model"]["vocab"] == 50304);
  r = NormalizeRunConfig(Json::parse(R"({"model": {"preset": "1b", "layers": 4}})"), "f");
  REQUIRE(r.ok());
  CHECK(r.value()["model"]["layers"] == 4);
  CHECK(r.value()["model"]["width"] == 1536);
  CHECK(r.value()["model"]["context"] == 8192);
  r = NormalizeRunConfig(Json::parse(R"({"model": {"preset": "tiny"}})"), "f");
  REQUIRE(r.ok());
  CHECK(r.value()["model"]["width"] == 128);
  // A pretrained family's shape fills its run-config keys too (the rest of its architecture
  // is exec's: payload/exec/import_test.cc compares it with the published config.json).
  r = NormalizeRunConfig(Json::parse(R"({"model": {"preset": "llama3.1-8b", "context": 32768}})"),
                         "f");
  REQUIRE(r.ok());
  const Json& m = r.value()["model"];
  CHECK(m["layers"] == 32);
  CHECK(m["heads"] == 32);
  CHECK(m["kv_heads"] == 8);
  CHECK(m["width"] == 4096);
  CHECK(m["vocab"] == 128256);
  CHECK(m["pos"] == "rope");
  CHECK(m["rope_base"] == 500000.0);
  CHECK(m["norm"] == "rmsnorm");
  CHECK(m["context"] == 32768);
  r = NormalizeRunConfig(Json::parse(R"({"model": {"preset": "qwen2.5-7b"}})"), "f");
  REQUIRE(r.ok());
  CHECK(r.value()["model"]["heads"] == 28);
  CHECK(r.value()["model"]["kv_heads"] == 4);
  CHECK(r.value()["model"]["width"] == 3584);
  CHECK(ErrorOf(Json::parse(R"({"model": {"preset": "llama-8b"}})"))
            .find("expected one of \"\", \"tiny\", \"124m\", \"1b\", \"llama3.1-8b\", "
                  "\"qwen2.5-7b\", \"qwen3-8b\"") != std::string::npos);
}

TEST_CASE("Errors name the file, the path and the expectation") {
  CHECK(ErrorOf(Json::parse(R"({"model": {"layers": "two"}})")) ==
        "f.jsonc: $.model.layers: expected an integer in [1, 128], got \"two\"");
  CHECK(ErrorOf(Json::parse(R"({"model": {"heds": 4}})"))
            .rfind("f.jsonc: $.model.heds: unknown key; did you mean \"heads\"? (known in model: "
                   "layers, heads, width, context, "
                   "mlp_ratio, vocab, preset",
                   0) == 0);
  CHECK(ErrorOf(Json::parse(R"({"modle": {}})")) ==
        "f.jsonc: $.modle: unknown key; did you mean \"model\"? (known: kind, seed, model, train, "
        "data, parent, time_match, pair, bench, command, noop, prune, mqar, passkey, aoh, saf, "
        "aah, resources, priority, flops, params)");
  CHECK(ErrorOf(Json::parse(R"({"train": {"lr": 0}})")) ==
        "f.jsonc: $.train.lr: expected a number in (0, 1], got 0");
  CHECK(ErrorOf(Json::parse(R"({"train": {"beta2": 1.0}})")) ==
        "f.jsonc: $.train.beta2: expected a number in [0, 1), got 1.0");
  CHECK(ErrorOf(Json::parse(R"({"seed": -1})")) ==
        "f.jsonc: $.seed: expected an integer >= 0, got -1");
  CHECK(ErrorOf(Json::parse(R"({"seed": 1.5})")) ==
        "f.jsonc: $.seed: expected an integer >= 0, got 1.5");
  CHECK(ErrorOf(Json::parse(R"({"kind": "trian"})")) ==
        "f.jsonc: $.kind: expected one of \"train\", \"noop\", \"bench-update\", "
        "\"bench-prefill\", \"bench-decode\", \"mqar\", \"passkey\", \"flops\", \"command\", got "
        "\"trian\" (did you mean \"train\"?)");
  CHECK(ErrorOf(Json::parse(R"({"train": {"steps": true}})")) ==
        "f.jsonc: $.train.steps: expected an integer in [0, 100000000], got true");
  CHECK(ErrorOf(Json::parse(R"({"model": 3})")) == "f.jsonc: $.model: expected an object, got 3");
  CHECK(ErrorOf(Json::parse(R"([1])")) == "f.jsonc: $: expected an object (a run config), got [1]");
}

TEST_CASE("Cross-field rules are checked on the merged config") {
  CHECK(ErrorOf(Json::parse(R"({"model": {"heads": 3}})")) ==
        "f.jsonc: $.model.width: expected a multiple of model.heads (3), got 128");
  CHECK(ErrorOf(Json::parse(R"({"data": {"source": "shards"}})")).find("$.data.path") !=
        std::string::npos);
  CHECK(ErrorOf(Json::parse(R"({"model": {"vocab": 100}})")).find("$.model.vocab") !=
        std::string::npos);
  CHECK(ErrorOf(Json::parse(R"({"model": {"heads": 3, "width": 96}})")).empty());
  CHECK(ErrorOf(Json::parse(R"({"model": {"kv_heads": 3}})")) ==
        "f.jsonc: $.model.kv_heads: expected 0 or a divisor of model.heads (4), got 3");
  CHECK(ErrorOf(Json::parse(R"({"model": {"kv_heads": 2}})")).empty());
  CHECK(ErrorOf(Json::parse(R"({"model": {"pos": "rope", "heads": 4, "width": 12}})"))
            .find("$.model.pos") != std::string::npos);
  CHECK(ErrorOf(Json::parse(R"({"model": {"pos": "rope"}})")).empty());
}

TEST_CASE("Values are canonicalised so equal configs hash equal") {
  auto a = NormalizeRunConfig(Json::parse(R"({"train": {"lr": 1, "steps": 1e3}})"), "f");
  auto b = NormalizeRunConfig(Json::parse(R"({"train": {"lr": 1.0, "steps": 1000}})"), "f");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(headlab::CanonicalJson(a.value()) == headlab::CanonicalJson(b.value()));
  CHECK(a.value()["train"]["steps"].is_number_integer());
}

TEST_CASE("Flattened configs accept dotted keys") {
  auto f = headlab::FlattenRunConfig(Json::parse(R"({"model.width": 64, "train": {"lr": 0.01}})"),
                                     "f", "$.arms.a");
  REQUIRE(f.ok());
  CHECK(f.value()["model.width"] == 64);
  CHECK(f.value()["train.lr"].get<double>() == Approx(0.01));
  auto bad = headlab::FlattenRunConfig(Json::parse(R"({"model.wdth": 64})"), "f", "$.arms.a");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() ==
        "f: $.arms.a.model.wdth: unknown config key \"model.wdth\"; did you mean "
        "\"model.width\"? (every key with its default: schema/grid.md, \"Run config\")");
  CHECK(headlab::IsRunConfigKey("train.lr"));
  CHECK(!headlab::IsRunConfigKey("train"));
}

// A mistyped key used to list ~150 keys; now one suggestion and where to look.
TEST_CASE("An unknown key gets one suggestion, not the whole schema") {
  auto bad = headlab::FlattenRunConfig(Json::parse(R"({"train.lrr": 1})"), "f", "$");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("did you mean \"train.lr\"?") != std::string::npos);
  CHECK(bad.status().message().size() < 200);
  CHECK(bad.status().message().find("model.layers") == std::string::npos);
}

TEST_CASE("params.* are free-form scalars; kind command needs a program") {
  auto c =
      headlab::NormalizeRunConfig(Json::parse(R"({"kind": "command", "command": {"program": "t.py"},
                      "params": {"hidden": 64, "act": "gelu", "tied": true, "lr": 0.5}})"),
                                  "f");
  REQUIRE(c.ok());
  CHECK(c.value()["params"]["hidden"] == 64);
  CHECK(c.value()["params"]["act"] == "gelu");
  CHECK(c.value()["params"]["tied"] == true);
  CHECK(headlab::IsRunConfigKey("params.hidden"));
  CHECK(!headlab::IsRunConfigKey("params.bad name"));
  CHECK(!headlab::IsRunConfigKey("params."));
  auto nested = headlab::NormalizeRunConfig(Json::parse(R"({"params": {"x": [1, 2]}})"), "f");
  REQUIRE(!nested.ok());
  CHECK(nested.status().message().rfind("f: $.params.x: expected a number, a bool or a string",
                                        0) == 0);
  auto no_program = headlab::NormalizeRunConfig(Json::parse(R"({"kind": "command"})"), "f");
  REQUIRE(!no_program.ok());
  CHECK(no_program.status().message() ==
        "f: $.command.program: expected the program to run when kind is \"command\", got \"\"");
}

TEST_CASE("Parents and matched-time references are named one way, with what they need") {
  CHECK(ErrorOf(Json::parse(R"({"parent": {"step": 20}})")) ==
        "f.jsonc: $.parent.step: a parent checkpoint step needs parent.run or parent.experiment "
        "(submit with --set parent.run=ID,... or --set parent.experiment=ID)");
  CHECK(ErrorOf(Json::parse(R"({"parent": {"run": 3, "experiment": 2}})")) ==
        "f.jsonc: $.parent.experiment: expected either parent.run or parent.experiment (with "
        "parent.arm), not both");
  CHECK(ErrorOf(Json::parse(R"({"parent": {"run": 3, "arm": "a"}})")) ==
        "f.jsonc: $.parent.arm: parent.arm needs parent.experiment");
  CHECK(ErrorOf(Json::parse(R"({"parent": {"experiment": 2, "arm": "a", "step": 20}})")).empty());
  CHECK(ErrorOf(Json::parse(R"({"time_match": {"arm": "ordinary"}})")) ==
        "f.jsonc: $.time_match.arm: time_match.arm needs time_match.experiment");
  CHECK(ErrorOf(Json::parse(R"({"time_match": {"experiment": -1}})")) ==
        "f.jsonc: $.time_match.arm: time_match.experiment -1 (this experiment) needs the "
        "reference's arm");
  CHECK(ErrorOf(Json::parse(R"({"time_match": {"experiment": -1, "arm": "o"}})")).empty());
  CHECK(
      ErrorOf(Json::parse(R"({"data": {"calib_fraction": 0.6}})")).find("$.data.calib_fraction") !=
      std::string::npos);
  CHECK(ErrorOf(Json::parse(R"({"saf": {"selection_seed": -2}})")).find("$.saf.selection_seed") !=
        std::string::npos);
  CHECK(ErrorOf(Json::parse(R"({"aah": {"resolution_state": "soft"}})"))
            .find("$.aah.resolution_state") != std::string::npos);
}
