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
