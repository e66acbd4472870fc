#include "coordinator/http_policy.h"

#include <catch2/catch.hpp>

namespace headlab::coord {

TEST_CASE("every request needs the access its method and path say") {
  CHECK(RequiredAccess("GET", "/api/v1/health") == Access::kPublic);
  CHECK(RequiredAccess("GET", "/") == Access::kPublic);
  CHECK(RequiredAccess("GET", "/assets/index.js?v=1") == Access::kPublic);
  CHECK(RequiredAccess("GET", "/api/v1/runs/3/metrics?after=2") == Access::kRead);
  CHECK(RequiredAccess("HEAD", "/api/v1/experiments") == Access::kRead);
  CHECK(RequiredAccess("GET", "/api/v1/stream?runs=1,2") == Access::kRead);
  CHECK(RequiredAccess("GET", "/api/v1/health/x") == Access::kRead);
  CHECK(RequiredAccess("POST", "/api/v1/query") == Access::kRead);
  CHECK(RequiredAccess("POST", "/api/v1/query?x=1") == Access::kRead);
  CHECK(RequiredAccess("POST", "/api/v1/experiments") == Access::kWrite);
  CHECK(RequiredAccess("POST", "/api/v1/runs/1/cancel") == Access::kWrite);
  CHECK(RequiredAccess("DELETE", "/api/v1/runs/1") == Access::kWrite);
  CHECK(RequiredAccess("PUT", "/api/v1/query") == Access::kWrite);
  CHECK(BodyLimitFor(Access::kWrite) == kMaxWriteBodyBytes);
  CHECK(BodyLimitFor(Access::kRead) == kMaxReadBodyBytes);
  CHECK(IsQueryRequest("POST", "/api/v1/query"));
  CHECK_FALSE(IsQueryRequest("GET", "/api/v1/query"));
}

TEST_CASE("writes need the bearer write token; reads what the policy says") {
  const AccessPolicy open{"w-tok", "r-tok", true};
  const AccessPolicy closed{"w-tok", "r-tok", false};
  auto status = [](const AccessPolicy& p, const std::string& method, const std::string& target,
                   const std::string& auth, const std::string& cookie = "") {
    auto r = ScreenRequest(p, method, target, auth, cookie);
    return r ? r->status : 200;
  };
  for (const AccessPolicy* p : {&open, &closed}) {
    CHECK(status(*p, "POST", "/api/v1/runs/1/cancel", "") == 401);
    CHECK(status(*p, "POST", "/api/v1/runs/1/cancel", "Bearer w-tok") == 200);
    CHECK(status(*p, "POST", "/api/v1/runs/1/cancel", "w-tok") == 401);
    CHECK(status(*p, "POST", "/api/v1/runs/1/cancel", "Bearer w-to") == 401);
    CHECK(status(*p, "POST", "/api/v1/runs/1/cancel", "Bearer r-tok") == 401);  // read-only token
    // A cookie never authorises a write (a page elsewhere could make a browser send it).
    CHECK(status(*p, "POST", "/api/v1/runs/1/cancel", "", "headlab_token=w-tok") == 401);
    CHECK(status(*p, "GET", "/api/v1/health", "") == 200);
    CHECK(status(*p, "GET", "/index.html", "") == 200);
  }
  CHECK(status(open, "GET", "/api/v1/experiments", "") == 200);
  CHECK(status(open, "POST", "/api/v1/query", "") == 200);
  CHECK(status(closed, "GET", "/api/v1/experiments", "") == 401);
  CHECK(status(closed, "POST", "/api/v1/query", "Bearer nope") == 401);
  CHECK(status(closed, "GET", "/api/v1/stream?runs=1", "") == 401);
  CHECK(status(closed, "GET", "/api/v1/experiments", "Bearer w-tok") == 200);
  CHECK(status(closed, "GET", "/api/v1/experiments", "Bearer r-tok") == 200);
  CHECK(status(closed, "GET", "/api/v1/stream?runs=1", "", "a=b; headlab_token=r-tok") == 200);
  CHECK(status(closed, "GET", "/api/v1/stream?runs=1", "", "headlab_token=w-tok") == 200);
  CHECK(status(closed, "GET", "/api/v1/stream?runs=1", "", "headlab_token=x; other=r-tok") == 401);
  // The dashboard percent-encodes the cookie's value.
  CHECK(status({"w-tok", "a b;c", false}, "GET", "/api/v1/stream?runs=1", "",
               "headlab_token=a%20b%3Bc") == 200);
  // An empty read token grants nothing.
  const AccessPolicy no_read{"w-tok", "", false};
  CHECK(status(no_read, "GET", "/api/v1/runs/1", "Bearer ") == 401);
  CHECK(status(no_read, "GET", "/api/v1/runs/1", "", "headlab_token=") == 401);
}

TEST_CASE("a request target that is not UTF-8 is 400 before anything else") {
  auto r = ScreenRequest({"w", "", true}, "GET", "/api/v1/runs/\xff", "", "");
  REQUIRE(r);
  CHECK(r->status == 400);
  CHECK(r->message == "request target: byte 13 is not valid UTF-8");
  CHECK_FALSE(ScreenRequest({"w", "", true}, "GET", "/api/v1/runs/%FF", "", ""));
}

TEST_CASE("browsers reach the API only under its own names and origin, with JSON bodies") {
  AccessPolicy p{"w", "", true, {"Lab.Example"}};
  auto status = [&](const std::string& method, const std::string& target, const std::string& host,
                    const std::string& origin = "", const std::string& type = "application/json") {
    auto r = ScreenBrowser(p, method, target, host, origin, type);
    return r ? r->status : 200;
  };
  // Hosts: IP literals, localhost and the configured names (any case, any port).
  for (const char* host : {"127.0.0.1:8321", "127.0.0.1", "[::1]:8321", "10.1.2.3:80",
                           "localhost:8321", "LOCALHOST", "lab.example:8321", "lab.EXAMPLE", ""})
    CHECK(status("GET", "/api/v1/experiments", host) == 200);
  CHECK(status("GET", "/api/v1/experiments", "rebind.evil.example:8321") == 421);
  CHECK(status("GET", "/api/v1/health", "rebind.evil.example") == 421);
  CHECK(status("GET", "/index.html", "127.0.0.1.evil.example") == 421);
  // Origins: absent, or the Host's own, for everything that reads data or writes.
  CHECK(status("GET", "/api/v1/runs/1", "127.0.0.1:8321", "http://127.0.0.1:8321") == 200);
  CHECK(status("GET", "/api/v1/runs/1", "lab.example", "https://lab.example") == 200);
  CHECK(status("GET", "/api/v1/runs/1", "127.0.0.1:8321", "http://127.0.0.1:8322") == 403);
  CHECK(status("GET", "/api/v1/runs/1", "127.0.0.1:8321", "http://evil.example") == 403);
  CHECK(status("GET", "/api/v1/runs/1", "127.0.0.1:8321", "null") == 403);
  CHECK(status("GET", "/api/v1/stream?runs=1", "127.0.0.1:8321", "http://evil.example") == 403);
  CHECK(status("POST", "/api/v1/query", "127.0.0.1:8321", "http://evil.example") == 403);
  CHECK(status("GET", "/api/v1/health", "127.0.0.1:8321", "http://evil.example") == 200);
  // Bodies: JSON only, so that no cross-origin POST goes without a CORS preflight.
  CHECK(status("POST", "/api/v1/query", "127.0.0.1") == 200);
  CHECK(status("POST", "/api/v1/query", "127.0.0.1", "", "Application/JSON; charset=utf-8") == 200);
  for (const char* type :
       {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""})
    CHECK(status("POST", "/api/v1/runs/1/cancel", "127.0.0.1", "", type) == 415);
  CHECK(status("GET", "/api/v1/runs/1", "127.0.0.1", "", "") == 200);
  CHECK(HostOfAuthority("[::1]:80") == "::1");
  CHECK(HostOfAuthority("::1") == "::1");
  CHECK(HostOfAuthority("Host.Example:1") == "host.example");
}

TEST_CASE("data reads other than SQL run on the read pool") {
  CHECK(IsPooledRead("GET", "/api/v1/runs/1/metrics?limit=5"));
  CHECK(IsPooledRead("GET", "/api/v1/experiments/1/results?recompute=1"));
  CHECK_FALSE(IsPooledRead("GET", "/api/v1/health"));
  CHECK_FALSE(IsPooledRead("GET", "/index.html"));
  CHECK_FALSE(IsPooledRead("POST", "/api/v1/query"));
  CHECK_FALSE(IsPooledRead("POST", "/api/v1/runs/1/cancel"));
}

TEST_CASE("cookies and listen addresses") {
  CHECK(CookieValue("headlab_token=abc", "headlab_token") == "abc");
  CHECK(CookieValue("a=1; headlab_token=abc; b=2", "headlab_token") == "abc");
  CHECK(CookieValue("xheadlab_token=abc", "headlab_token") == "");
  CHECK(CookieValue("headlab_tokenx=abc", "headlab_token") == "");
  CHECK(CookieValue("", "headlab_token") == "");
  CHECK(IsLoopbackListenAddress("127.0.0.1:8321"));
  CHECK(IsLoopbackListenAddress("127.1.2.3:0"));
  CHECK(IsLoopbackListenAddress("localhost:8321"));
  CHECK(IsLoopbackListenAddress("[::1]:8321"));
  CHECK(IsLoopbackListenAddress("[::ffff:127.0.0.1]:8321"));
  CHECK_FALSE(IsLoopbackListenAddress("0.0.0.0:8321"));
  CHECK_FALSE(IsLoopbackListenAddress("[::]:8321"));
  CHECK_FALSE(IsLoopbackListenAddress("10.0.0.5:8321"));
  CHECK_FALSE(IsLoopbackListenAddress("myhost:8321"));
  size_t cap = MaxHttpConnections();
  CHECK(cap >= 16);
  CHECK(cap <= kMaxHttpConnections);
}

}  // namespace headlab::coord
