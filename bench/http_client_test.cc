#include "bench/http_client.h"

#include <catch2/catch.hpp>

using headlab::bench::ParseHttpResponse;

TEST_CASE("http client: Content-Length, chunked and close-delimited bodies") {
  auto r = ParseHttpResponse("HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\n{}xx");
  REQUIRE(r.ok());
  CHECK(r->status == 201);
  CHECK(r->body == "{}xx");
  r = ParseHttpResponse(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n");
  REQUIRE(r.ok());
  CHECK(r->body == "{\"a\":1}");
  r = ParseHttpResponse("HTTP/1.0 401 Unauthorized\r\nServer: x\r\n\r\nno");
  REQUIRE(r.ok());
  CHECK(r->status == 401);
  CHECK(r->body == "no");
}

TEST_CASE("http client: malformed responses are errors") {
  CHECK_FALSE(ParseHttpResponse("").ok());
  CHECK_FALSE(ParseHttpResponse("HTTP/1.1 200 OK\r\n").ok());
  CHECK_FALSE(ParseHttpResponse("garbage\r\n\r\n").ok());
  CHECK_FALSE(ParseHttpResponse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort").ok());
}

TEST_CASE("http client: a closed port is Unavailable") {
  auto r = headlab::bench::HttpRequest("127.0.0.1", 1, "GET", "/", "", "", 2);
  CHECK_FALSE(r.ok());
}
