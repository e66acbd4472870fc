#include "coordinator/http_api.h"

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/sha256.h"
#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

HttpResponse Do(HttpApi& api, const std::string& method, const std::string& target,
                const std::string& body = "", const std::string& auth = "") {
  return api.Handle({method, target, auth, body});
}

}  // namespace

TEST_CASE("HTTP routes: auth, ids, 404s and read models without a loop") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a", "b"}, 2), {}, false);
  REQUIRE(e.ok());
  HttpApi api({dir.path() + "/h.db", "tok", "", "test"}, nullptr);

  CHECK(Do(api, "GET", "/api/v1/health").status == 200);
  auto list = Do(api, "GET", "/api/v1/experiments");
  REQUIRE(list.status == 200);
  Json l = Json::parse(list.body);
  REQUIRE(l.size() == 1);
  CHECK(l[0]["counts"]["queued"] == 4);
  CHECK(l[0]["total"] == 4);
  CHECK(Json::parse(Do(api, "GET", "/api/v1/experiments/1").body)["arms"] == Json({"a", "b"}));
  CHECK(Json::parse(Do(api, "GET", "/api/v1/experiments/1/runs").body).size() == 4);
  CHECK(Do(api, "GET", "/api/v1/experiments/1/results").status == 200);
  CHECK(Do(api, "GET", "/api/v1/experiments/2").status == 404);
  CHECK(Do(api, "GET", "/api/v1/experiments/x1").status == 400);
  CHECK(Do(api, "GET", "/api/v1/runs/1").status == 200);
  CHECK(Do(api, "GET", "/api/v1/runs/1/metrics?key=train.loss&after=-1").status == 200);
  CHECK(Do(api, "GET", "/api/v1/runs/-1").status == 400);
  CHECK(Do(api, "GET", "/api/v2/health").status == 404);
  CHECK(Do(api, "DELETE", "/api/v1/runs/1").status == 405);
  CHECK(Json::parse(Do(api, "GET", "/api/v1/status").body)["runs_by_status"]["queued"] == 4);

  // Writes need the token; the query endpoint does not (it cannot write).
  CHECK(Do(api, "POST", "/api/v1/runs/1/cancel").status == 401);
  CHECK(Do(api, "POST", "/api/v1/runs/1/cancel", "", "Bearer nope").status == 401);
  CHECK(Do(api, "POST", "/api/v1/runs/1/cancel", "", "tok").status == 401);
  CHECK(Do(api, "POST", "/api/v1/runs/1/cancel", "", "Bearer tok").status == 503);
  CHECK(Do(api, "POST", "/api/v1/query", R"({"sql": "SELECT 1"})").status == 200);
  auto w = Do(api, "POST", "/api/v1/query", R"({"sql": "UPDATE runs SET seed = 0"})");
  CHECK(w.status == 400);
  CHECK(Json::parse(w.body)["error"].get<std::string>().rfind("read-only", 0) == 0);
  CHECK(Do(api, "POST", "/api/v1/query", R"({"query": "SELECT 1"})").status == 400);
  // Submit validation happens before anything else: bad bodies are 400.
  CHECK(Do(api, "POST", "/api/v1/experiments", "[]", "Bearer tok").status == 400);
  CHECK(Do(api, "POST", "/api/v1/experiments", R"({"text": 5})", "Bearer tok").status == 400);
  CHECK(Do(api, "POST", "/api/v1/experiments", R"({"text": "{}", "sets": "x"})", "Bearer tok").status == 400);
}

TEST_CASE("HTTP research routes: run search, artifacts, tags and notes need the token") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a", "b"}, 2), {}, false);
  REQUIRE(e.ok());
  REQUIRE(s.StartAttempt({e->queued[0], 1}, "w", {}, nullptr).ok());
  const std::string file = dir.path() + "/out.log";
  REQUIRE(WriteFileAtomic(file, "hello\n").ok());
  REQUIRE(s.InsertArtifact({e->queued[0], 1}, 0, "log", file, Sha256Hex("hello\n"), 6, 0).ok());
  HttpApi api({dir.path() + "/h.db", "tok", "", "test"}, nullptr);
  auto found = Do(api, "GET", "/api/v1/runs?status=queued&where=seed%3D2");
  REQUIRE(found.status == 200);
  CHECK(Json::parse(found.body)["runs"].size() == 2);
  CHECK(Do(api, "GET", "/api/v1/runs?status=nope").status == 400);
  CHECK(Do(api, "GET", "/api/v1/runs?where=x.y%3D1").status == 400);
  const std::string base = "/api/v1/runs/" + std::to_string(e->queued[0]) + "/artifacts";
  auto list = Do(api, "GET", base);
  REQUIRE(list.status == 200);
  CHECK(Json::parse(list.body)[0]["download"] == base + "/1/0");
  auto bytes = Do(api, "GET", base + "/1/0");
  CHECK(bytes.status == 200);
  CHECK(bytes.content_type == "application/octet-stream");
  CHECK(bytes.body == "hello\n");
  CHECK(Do(api, "GET", base + "/1/9").status == 404);
  CHECK(Do(api, "GET", base + "/x/0").status == 400);
  // Tags and notes are writes: the token, then the loop (none here: 503).
  CHECK(Do(api, "POST", "/api/v1/runs/1/tags", R"({"add": ["x"]})").status == 401);
  CHECK(Do(api, "POST", "/api/v1/runs/1/tags", R"({"add": ["x"]})", "Bearer tok").status == 503);
  CHECK(Do(api, "POST", "/api/v1/experiments/1/note", R"({"text": "x"})", "Bearer tok").status == 503);
  CHECK(Do(api, "POST", "/api/v1/runs/zz/tags", "{}", "Bearer tok").status == 400);
  CHECK(Do(api, "POST", "/api/v1/runs/1/tags", "{bad", "Bearer tok").status == 400);
}

TEST_CASE("static files: served from the root, no traversal") {
  TempDir dir;
  REQUIRE(MakeDirs(dir.path() + "/www/js").ok());
  REQUIRE(WriteFileAtomic(dir.path() + "/www/index.html", "<html>hi</html>").ok());
  REQUIRE(WriteFileAtomic(dir.path() + "/www/js/app.js", "let x = 1;").ok());
  REQUIRE(WriteFileAtomic(dir.path() + "/secret", "no").ok());
  HttpApi api({dir.path() + "/none.db", "tok", dir.path() + "/www", "test"}, nullptr);
  auto index = Do(api, "GET", "/");
  CHECK(index.status == 200);
  CHECK(index.body == "<html>hi</html>");
  CHECK(index.content_type.rfind("text/html", 0) == 0);
  auto js = Do(api, "GET", "/js/app.js?v=3");
  CHECK(js.status == 200);
  CHECK(js.content_type.rfind("text/javascript", 0) == 0);
  for (const char* bad : {"/../secret", "/js/../../secret", "/%2e%2e/secret", "/.hidden",
                          "/nope.html", "/js/..%2f..%2fsecret"})
    CHECK(Do(api, "GET", bad).status == 404);
  HttpApi none({dir.path() + "/none.db", "tok", "", "test"}, nullptr);
  CHECK(Do(none, "GET", "/").status == 404);
}

}  // namespace headlab::coord
