#include "worker/wire_codec.h"

#include <catch2/catch.hpp>

namespace headlab {
namespace {

std::vector<zmq::message_t> Frames(std::vector<std::string> parts) {
  std::vector<zmq::message_t> f;
  for (const std::string& p : parts) f.emplace_back(p);
  return f;
}

}  // namespace

TEST_CASE("EncodeMessage writes three frames and survives invalid UTF-8") {
  auto f = EncodeMessage("DONE", Json{{"stderr_tail", std::string("ok \xe2\x82", 5)}});
  REQUIRE(f.size() == 3);
  CHECK(f[0].to_string() == "HLW1");
  CHECK(f[1].to_string() == "DONE");
  CHECK(Json::parse(f[2].to_string())["stderr_tail"].get<std::string>().rfind("ok ", 0) == 0);
}

TEST_CASE("DecodeCoordinatorMessage accepts valid messages") {
  auto m = DecodeCoordinatorMessage(Frames({"HLW1", "ASSIGN",
      R"({"run":3,"attempt":1,"experiment":1,"config":{},"resume":{"path":"/c","sha256":"ab","step":100}})"}));
  REQUIRE(m.ok());
  CHECK(m->command == "ASSIGN");
  CHECK(m->body["resume"]["step"] == 100);
  CHECK(DecodeCoordinatorMessage(Frames({"HLW1", "ASSIGN",
      R"({"run":"r3","attempt":0,"experiment":1,"config":{"kind":"noop"},"resume":null})"})).ok());
  CHECK(DecodeCoordinatorMessage(Frames({"", "HLW1", "HEARTBEAT", "{}"})).ok());
  CHECK(DecodeCoordinatorMessage(Frames({"HLW1", "ASSIGN",
      R"({"run":3,"attempt":1,"experiment":1,"config":{},"resume":null,"devices":null})"})).ok());
  CHECK(DecodeCoordinatorMessage(Frames({"HLW1", "ASSIGN",
      R"({"run":3,"attempt":1,"experiment":1,"config":{},"resume":null,"devices":[0,1]})"})).ok());
  CHECK(DecodeCoordinatorMessage(Frames({"HLW1", "ACK", R"({"run":3,"attempt":1,"what":"DONE"})"})).ok());
  CHECK(DecodeCoordinatorMessage(Frames({"HLW1", "ACK", R"({"run":3,"attempt":1,"what":"METRICS","seq":9})"})).ok());
  CHECK(DecodeCoordinatorMessage(Frames({"HLW1", "REFUSE", R"({"reason":"bad token"})"})).ok());
  CHECK(DecodeCoordinatorMessage(Frames({"HLW1", "CANCEL", R"({"run":3,"attempt":1})"})).ok());
}

TEST_CASE("DecodeCoordinatorMessage rejects malformed messages") {
  std::vector<std::vector<std::string>> bad = {
      {},
      {"HLW1", "HEARTBEAT"},
      {"HLW1", "HEARTBEAT", "{}", "extra"},
      {"HLW2", "HEARTBEAT", "{}"},
      {"HLW1", "NOPE", "{}"},
      {"HLW1", "HEARTBEAT", "not json"},
      {"HLW1", "HEARTBEAT", "[1]"},
      {"HLW1", "REFUSE", "{}"},
      {"HLW1", "CANCEL", R"({"run":3})"},
      {"HLW1", "CANCEL", R"({"run":3,"attempt":-1})"},
      {"HLW1", "CANCEL", R"({"run":[],"attempt":1})"},
      {"HLW1", "ACK", R"({"run":3,"attempt":1,"what":"EVERYTHING","seq":1})"},
      {"HLW1", "ACK", R"({"run":3,"attempt":1,"what":"METRICS"})"},
      {"HLW1", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1})"},
      {"HLW1", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":[]})"},
      {"HLW1", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":{},"resume":{"path":"/c"}})"},
      {"HLW1", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":{},"resume":7})"},
      {"HLW1", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":{},"devices":[-1]})"},
      {"HLW1", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":{},"devices":"0"})"},
      {"HLW1", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":{},"parent":"x"})"},
  };
  for (const auto& parts : bad) {
    INFO(Json(parts).dump());
    CHECK(!DecodeCoordinatorMessage(Frames(parts)).ok());
  }
}

}  // namespace headlab
