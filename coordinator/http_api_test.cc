#include "coordinator/http_api.h"

#include <catch2/catch.hpp>

#include "common/files.h"
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
