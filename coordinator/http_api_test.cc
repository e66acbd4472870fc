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
  CHECK(Do(api, "DELETE", "/api/v1/runs/1").status == 401);  // not a read: the token first
  CHECK(Do(api, "DELETE", "/api/v1/runs/1", "", "Bearer tok").status == 405);
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
  CHECK(Do(api, "POST", "/api/v1/experiments", R"({"text": "{}", "sets": "x"})", "Bearer tok")
            .status == 400);
}

TEST_CASE("bytes that are not UTF-8 are 400 in requests and replaced in answers, never 500") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  REQUIRE(s.InsertExperiment(TestGrid({"a"}, 1), {}, false).ok());
  HttpApi api({dir.path() + "/h.db", "tok", "", "test"}, nullptr);
  auto target = Do(api, "GET", "/api/v1/runs/\xff");
  CHECK(target.status == 400);
  CHECK(Json::parse(target.body)["error"] == "request target: byte 13 is not valid UTF-8");
  CHECK(Do(api, "GET", "/api/v1/\xc3(").status == 400);
  // In a JSON body (where the parser's own message would quote the byte) and in a
  // comment of a grid (which the parser would skip).
  auto body = Do(api, "POST", "/api/v1/query", "{\"sql\": \"SELECT '\xff'\"}");
  CHECK(body.status == 400);
  CHECK(Json::parse(body.body)["error"] == "request body: byte 17 is not valid UTF-8");
  CHECK(Do(api, "POST", "/api/v1/experiments", "{\"text\": \"{}\"} // \xfe", "Bearer tok").status ==
        400);
  // SQL can make such bytes itself: the answer carries U+FFFD instead of failing.
  auto made = Do(api, "POST", "/api/v1/query", R"js({"sql": "SELECT CAST(x'61ff62' AS TEXT)"})js");
  REQUIRE(made.status == 200);
  CHECK(Json::parse(made.body)["rows"][0][0] ==
        "a\xef\xbf\xbd"
        "b");
  // A grid nested 100,000 deep is bad input, not a crash.
  Json deep_req = {{"text", "{\"name\": \"x\", \"base\": " + std::string(100000, '[') +
                                std::string(100000, ']') + "}"},
                   {"dry_run", true}};
  auto deep = Do(api, "POST", "/api/v1/experiments", deep_req.dump(), "Bearer tok");
  CHECK(deep.status == 400);
  CHECK(Json::parse(deep.body)["error"].get<std::string>().find("nested deeper than 64") !=
        std::string::npos);
  auto nested_body =
      Do(api, "POST", "/api/v1/query", std::string(100000, '[') + std::string(100000, ']'));
  CHECK(nested_body.status == 400);
}

TEST_CASE("reads need a token when the policy closes them") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  HttpApi::Options o{dir.path() + "/h.db", "tok", "", "test"};
  o.read_token = "viewer";
  o.open_reads = false;
  HttpApi api(o, nullptr);
  CHECK(Do(api, "GET", "/api/v1/health").status == 200);
  CHECK(Do(api, "GET", "/api/v1/experiments").status == 401);
  CHECK(Do(api, "POST", "/api/v1/query", R"({"sql": "SELECT 1"})").status == 401);
  CHECK(Do(api, "GET", "/api/v1/experiments", "", "Bearer tok").status == 200);
  CHECK(Do(api, "GET", "/api/v1/experiments", "", "Bearer viewer").status == 200);
  CHECK(Do(api, "POST", "/api/v1/query", R"({"sql": "SELECT 1"})", "Bearer viewer").status == 200);
  CHECK(api.Handle({"GET", "/api/v1/experiments", "", "", "headlab_token=viewer"}).status == 200);
  CHECK(Do(api, "POST", "/api/v1/runs/1/cancel", "", "Bearer viewer").status == 401);
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
  CHECK(Do(api, "POST", "/api/v1/experiments/1/note", R"({"text": "x"})", "Bearer tok").status ==
        503);
  CHECK(Do(api, "POST", "/api/v1/runs/zz/tags", "{}", "Bearer tok").status == 400);
  CHECK(Do(api, "POST", "/api/v1/runs/1/tags", "{bad", "Bearer tok").status == 400);
}

TEST_CASE("static files: served from the root, no traversal") {
  TempDir dir;
  REQUIRE(MakeDirs(dir.path() + "/www/js").ok());
  REQUIRE(MakeDirs(dir.path() + "/www/assets").ok());
  REQUIRE(WriteFileAtomic(dir.path() + "/www/assets/index-AbC123.js", "let y = 2;").ok());
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
  // Only the build's content-hashed assets/ are kept by the browser; index.html and the
  // API's answers never are.
  CHECK(index.cache_control == "no-store");
  CHECK(js.cache_control == "no-store");
  auto hashed = Do(api, "GET", "/assets/index-AbC123.js");
  CHECK(hashed.status == 200);
  CHECK(hashed.cache_control == "public, max-age=31536000, immutable");
  CHECK(Do(api, "GET", "/assets/missing.js").cache_control == "no-store");
  CHECK(Do(api, "GET", "/api/v1/health").cache_control == "no-store");
  for (const char* bad : {"/../secret", "/js/../../secret", "/%2e%2e/secret", "/.hidden",
                          "/nope.html", "/js/..%2f..%2fsecret"})
    CHECK(Do(api, "GET", bad).status == 404);
  HttpApi none({dir.path() + "/none.db", "tok", "", "test"}, nullptr);
  CHECK(Do(none, "GET", "/").status == 404);
}

}  // namespace headlab::coord
