#include "common/config_view.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/run_config.h"

namespace headlab {

TEST_CASE("NotableConfig: kind, seed, the run's own sections and what differs") {
  auto saf = NormalizeRunConfig(Json{{"seed", 3},
                                     {"saf", {{"method", "replace"}}},
                                     {"train", {{"lr", 1e-3}}},
                                     {"aoh", {{"sink", 64}}}},
                                "f");
  REQUIRE(saf.ok());
  Json n = NotableConfig(*saf);
  CHECK(n["kind"] == "train");
  CHECK(n["seed"] == 3);
  CHECK(n["train.lr"] == 1e-3);
  CHECK(n.contains("train.steps"));  // the training run's own section
  CHECK(n.contains("model.layers"));
  CHECK(n["saf.method"] == "replace");
  CHECK(n.contains("saf.rate"));          // an enabled method's defaults are its setup
  CHECK(n["aoh.sink"] == 64);             // differs from the default
  CHECK_FALSE(n.contains("aoh.recent"));  // AoH off: its defaults are noise
  CHECK_FALSE(n.contains("aah.regime"));
  CHECK_FALSE(n.contains("bench.repeats"));
  CHECK_FALSE(n.contains("resources.gpus"));  // at its default
  // About 140 keys before; a run that uses no method now shows a few dozen.
  Json plain = NotableConfig(*NormalizeRunConfig(Json::object(), "f"));
  CHECK(plain.size() < RunConfigKeys().size() / 2);
}

TEST_CASE("ActiveSections: a method's section is on iff its switch key leaves the off value") {
  auto sections = [](const Json& partial) {
    auto c = NormalizeRunConfig(partial, "f");
    REQUIRE(c.ok());
    return ActiveSections(*c);
  };
  using V = std::vector<std::string>;
  CHECK(sections(Json::object()) == V{"model", "train"});
  // saf.method, aoh.method, prune.method != "none"; aah.regime != "off".
  auto on = sections(Json{{"saf", {{"method", "replace"}}},
                          {"aoh", {{"method", "aoh"}}},
                          {"aah", {{"regime", "full"}}},
                          {"prune", {{"method", "heads"}, {"heads", "0.1"}}}});
  std::sort(on.begin(), on.end());
  CHECK(on == V{"aah", "aoh", "model", "prune", "saf", "train"});
  // Other keys of a method's section do not turn it on.
  CHECK(sections(Json{{"aoh", {{"sink", 64}}}, {"aah", {{"control_every", 7}}}}) ==
        V{"model", "train"});
}

TEST_CASE("NotableConfig of a command run shows its program and params, not the LM's") {
  auto c =
      NormalizeRunConfig(Json{{"kind", "command"},
                              {"command", {{"program", "train.py"}, {"interpreter", "python3"}}},
                              {"params", {{"hidden", 64}}}},
                         "f");
  REQUIRE(c.ok());
  Json n = NotableConfig(*c);
  CHECK(n["command.program"] == "train.py");
  CHECK(n.contains("command.args"));
  CHECK(n["params.hidden"] == 64);
  CHECK_FALSE(n.contains("model.layers"));
  CHECK_FALSE(n.contains("train.steps"));
}

TEST_CASE("GridVaryingKeys: axes then arm overrides, nested or dotted") {
  Json grid = Json::parse(R"({"axes": {"seed": [1, 2], "train.lr": [1e-3]},
      "arms": {"a": {"model": {"width": 64}}, "b": {"model.width": 128, "saf.method": "replace"}}})");
  CHECK(GridVaryingKeys(grid) ==
        std::vector<std::string>{"seed", "train.lr", "model.width", "saf.method"});
  CHECK(GridVaryingKeys(Json::object()).empty());
}

}  // namespace headlab
