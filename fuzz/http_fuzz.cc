// libFuzzer target: HTTP requests as the coordinator receives them. The input is the raw
// bytes of a request; Beast's parser (with the server's head limit and the body limit
// coordinator/http_policy.h gives the request) reads it, ScreenRequest and
// HttpApi::Handle route and answer it against a small database (one experiment, open
// reads, no loop: writes answer 503), as coordinator/http_server.cc does.
// Invariants: no crash or uncaught exception; no answer is a 500; every JSON answer
// parses; a request the screen refuses is never handled.
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/files.h"
#include "coordinator/http_api.h"
#include "coordinator/http_policy.h"
#include "coordinator/store.h"
#include "coordinator/test_util.h"
#include "fuzz/fuzz_check.h"

namespace {

namespace http = boost::beast::http;
using namespace headlab;
using namespace headlab::coord;

struct Fixture {
  TempDir dir;
  std::unique_ptr<HttpApi> api;
  AccessPolicy policy{"fuzz-token", "fuzz-reader", true};
  Fixture() {
    Store store;
    fuzz::Check(store.Open(dir.path() + "/h.db").ok(), "cannot create the database");
    fuzz::Check(store.InsertExperiment(TestGrid({"a", "b"}, 2), {}, false).ok(), "cannot insert");
    store.Close();
    fuzz::Check(MakeDirs(dir.path() + "/www").ok(), "cannot make the static root");
    fuzz::Check(WriteFileAtomic(dir.path() + "/www/index.html", "<html></html>").ok(),
                "cannot write");
    HttpApi::Options o{dir.path() + "/h.db", policy.write_token, dir.path() + "/www", "fuzz"};
    o.read_token = policy.read_token;
    o.query_limits.time = std::chrono::milliseconds(100);
    api = std::make_unique<HttpApi>(o, nullptr);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture f;
  http::request_parser<http::string_body> parser;
  parser.header_limit(kMaxHeaderBytes);
  parser.eager(true);
  boost::beast::error_code ec;
  size_t used = parser.put(boost::asio::buffer(data, size), ec);
  (void)used;
  if (ec && ec != http::error::need_more) return 0;  // malformed: the server answers 400
  if (!parser.is_header_done()) return 0;
  const auto& req = parser.get();
  const std::string method(req.method_string()), target(req.target());
  const std::string auth(req[http::field::authorization]), cookie(req[http::field::cookie]);
  auto refusal = ScreenRequest(f.policy, method, target, auth, cookie);
  if (refusal) {
    fuzz::Check(refusal->status == 400 || refusal->status == 401, "a refusal other than 400/401");
    fuzz::CheckMessage(refusal->message);
    return 0;
  }
  if (req.body().size() > BodyLimitFor(RequiredAccess(method, target))) return 0;  // 413
  HttpRequest r{method, target, auth, req.body(), cookie};
  HttpResponse out = f.api->Handle(r);
  fuzz::Check(out.status != 500, "a 500 answer");
  if (out.content_type == "application/json")
    fuzz::Check(ParseJson(out.body, "answer").ok(), "a JSON answer that does not parse");
  return 0;
}
