#include "payload/methods/saf/saf_options.h"

#include "common/run_config.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::saf {

StatusOr<SafOptions> Read(const Json& partial) {
  auto c = NormalizeRunConfig(partial, "g");
  if (!c.ok()) return c.status();
  return SafOptionsFromJson(*c, "g");
}

TEST_CASE("saf options: read from the normalised config, checked by the schema") {
  auto o = Read(Json{{"saf",
                      {{"selection_seed", 7},
                       {"calib_split", "calib"},
                       {"score", "gate_taylor"},
                       {"pattern", "structured_random"},
                       {"schedule", "train_loss"}}}});
  REQUIRE(o.ok());
  CHECK(o->selection_seed == 7);
  CHECK(o->calib_split == "calib");
  CHECK(o->score == ScoreKind::kGateTaylor);
  CHECK(o->pattern == PatternKind::kStructuredRandom);
  CHECK(o->schedule == ScheduleKind::kTrainLoss);
  auto bad = Read(Json{{"saf", {{"selection_seed", -2}}}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "g: $.saf.selection_seed: expected an integer >= -1, got -2");
  CHECK(Read(Json{{"saf", {{"calib_split", "test"}}}})
            .status()
            .message()
            .rfind("g: $.saf.calib_split: expected one of \"train\", \"calib\", \"val\"", 0) == 0);
  // One bound for saf.fit_lr (the option parser once allowed [1e-12, 10], the schema (0, 10]).
  CHECK(Read(Json{{"saf", {{"fit_lr", 1e-13}}}}).ok());
  CHECK(!Read(Json{{"saf", {{"fit_lr", 0}}}}).ok());
  // The rules between keys are checked at submit too.
  CHECK(Read(Json{{"saf", {{"storage", "dense"}, {"pattern", "structured_random"}}}})
            .status()
            .message() ==
        "g: $.saf.storage: \"dense\" does not apply to saf.pattern \"structured_random\" (compact "
        "only)");
  CHECK(Read(Json{{"saf", {{"tau_start", 0.8}}}}).status().message() ==
        "g: $.saf.tau_start: expected <= saf.tau_end (0.7), got 0.8");
  // Without a normalised config the parser says so instead of guessing defaults.
  CHECK(!SafOptionsFromJson(Json::object(), "g").ok());
}

TEST_CASE("saf options: the struct's initialisers are the schema's defaults") {
  auto read = Read(Json::object());
  REQUIRE(read.ok());
  const SafOptions& r = *read;
  const SafOptions d;
  CHECK(r.method == d.method);
  CHECK(r.rate == d.rate);
  CHECK(r.score == d.score);
  CHECK(r.pattern == d.pattern);
  CHECK(r.storage == d.storage);
  CHECK(r.schedule == d.schedule);
  CHECK(r.tau == d.tau);
  CHECK(r.tau_start == d.tau_start);
  CHECK(r.tau_end == d.tau_end);
  CHECK(r.groups == d.groups);
  CHECK(r.calib_sequences == d.calib_sequences);
  CHECK(r.calib_batch == d.calib_batch);
  CHECK(r.calib_split == d.calib_split);
  CHECK(r.calib_memory_gb == d.calib_memory_gb);
  CHECK(r.output_sequences == d.output_sequences);
  CHECK(r.output_queries == d.output_queries);
  CHECK(r.fit_steps == d.fit_steps);
  CHECK(r.fit_lr == d.fit_lr);
  CHECK(r.fit_max_kl == d.fit_max_kl);
  CHECK(r.fit_path == d.fit_path);
  CHECK(r.heads == d.heads);
  CHECK(r.dirichlet_scale == d.dirichlet_scale);
  CHECK(r.trainable == d.trainable);
  CHECK(r.budget == d.budget);
  CHECK(r.group_heads == d.group_heads);
  CHECK(r.check_every == d.check_every);
  CHECK(r.z == d.z);
  CHECK(r.window == d.window);
  CHECK(r.pattern_seed == d.pattern_seed);
  CHECK(r.selection_seed == d.selection_seed);
}

TEST_CASE("saf draw seed: the run seed, mixed with the parent run in a continuation") {
  CHECK(DrawSeed(Json::object(), 42) == 42);
  CHECK(DrawSeed(Json{{"parent", {{"run", 0}, {"step", 10}}}}, 42) == 42);
  const uint64_t a = DrawSeed(Json{{"parent", {{"run", 11}, {"step", 10}}}}, 42);
  const uint64_t b = DrawSeed(Json{{"parent", {{"run", 12}, {"step", 10}}}}, 42);
  CHECK(a != 42);
  CHECK(a != b);  // each parent of a --set parent.run list gets its own draws
  CHECK(a == DrawSeed(Json{{"parent", {{"run", 11}, {"step", 20}}}}, 42));  // every arm of it too
  CHECK(a != DrawSeed(Json{{"parent", {{"run", 11}, {"step", 10}}}}, 43));
}

}  // namespace headlab::saf
