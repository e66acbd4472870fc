#include "coordinator/annotations.h"

#include <catch2/catch.hpp>

#include "coordinator/test_util.h"

namespace headlab::coord {

TEST_CASE("tags: add, remove, validate, and nothing written on bad input") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 2), {}, false);
  REQUIRE(e.ok());
  const int64_t run = e->queued[0];
  auto r = UpdateTags(&s, "run", run, Json{{"add", {"good", "seed:1"}}});
  REQUIRE(r.ok());
  CHECK((*r)["tags"] == Json({"good", "seed:1"}));
  r = UpdateTags(&s, "run", run, Json{{"add", {"zz"}}, {"remove", {"good"}}});
  REQUIRE(r.ok());
  CHECK(TagsOf(s.db(), "run", run) == std::vector<std::string>{"seed:1", "zz"});
  // Bad input: nothing changes.
  CHECK(UpdateTags(&s, "run", run, Json{{"add", {"has space"}}}).status().message() ==
        "request body: add[0]: expected a tag matching [A-Za-z0-9_.:+-]{1,64}, got \"has space\"");
  CHECK(UpdateTags(&s, "run", run, Json{{"add", {"ok"}}, {"bogus", 1}}).status().code() ==
        Status::Code::kInvalidArgument);
  CHECK(UpdateTags(&s, "run", 9999, Json{{"add", {"x"}}}).status().code() ==
        Status::Code::kNotFound);
  CHECK(UpdateTags(&s, "workers", run, Json{{"add", {"x"}}}).status().code() ==
        Status::Code::kInvalidArgument);
  CHECK(TagsOf(s.db(), "run", run) == std::vector<std::string>{"seed:1", "zz"});
  Json many = Json::array();
  for (int i = 0; i < 40; ++i) many.push_back("t" + std::to_string(i));
  CHECK(UpdateTags(&s, "run", run, Json{{"add", many}}).status().code() ==
        Status::Code::kInvalidArgument);
  CHECK(TagsOf(s.db(), "run", run).size() == 2);
  // Experiment tags, and the bulk read of an experiment's run tags.
  REQUIRE(UpdateTags(&s, "experiment", e->experiment_id, Json{{"add", {"paper"}}}).ok());
  CHECK(TagsOf(s.db(), "experiment", e->experiment_id) == std::vector<std::string>{"paper"});
  auto bulk = RunTagsOfExperiment(s.db(), e->experiment_id);
  CHECK(bulk.size() == 1);
  CHECK(bulk[run] == std::vector<std::string>{"seed:1", "zz"});
  // Each change is an audit event.
  Stmt ev = s.db()->MustPrepare("SELECT count(*) FROM events WHERE kind = 'tag'");
  REQUIRE(ev.Step());
  CHECK(ev.Int(0) == 3);
}

TEST_CASE("notes: set, replace, remove, size limit") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  REQUIRE(e.ok());
  const int64_t exp = e->experiment_id;
  REQUIRE(SetNote(&s, "experiment", exp, Json{{"text", "first"}}).ok());
  REQUIRE(SetNote(&s, "experiment", exp, Json{{"text", "diverged at step 80"}}).ok());
  CHECK(NoteOf(s.db(), "experiment", exp) == "diverged at step 80");
  CHECK(SetNote(&s, "experiment", exp, Json{{"text", std::string(kMaxNoteBytes + 1, 'x')}})
            .status()
            .code() == Status::Code::kInvalidArgument);
  CHECK(SetNote(&s, "experiment", exp, Json{{"txt", "x"}}).status().code() ==
        Status::Code::kInvalidArgument);
  CHECK(NoteOf(s.db(), "experiment", exp) == "diverged at step 80");
  REQUIRE(SetNote(&s, "experiment", exp, Json{{"text", ""}}).ok());
  CHECK(NoteOf(s.db(), "experiment", exp).empty());
}

}  // namespace headlab::coord
