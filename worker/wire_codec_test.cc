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

TEST_CASE("EncodeMessage writes four frames and survives invalid UTF-8") {
  auto f = EncodeMessage("DONE", "k3y", Json{{"stderr_tail", std::string("ok \xe2\x82", 5)}});
  REQUIRE(f.size() == 4);
  CHECK(f[0].to_string() == "HLW2");
  CHECK(f[1].to_string() == "DONE");
  CHECK(f[2].to_string() == "k3y");
  CHECK(Json::parse(f[3].to_string())["stderr_tail"].get<std::string>().rfind("ok ", 0) == 0);
}

TEST_CASE("DecodeCoordinatorMessage accepts valid messages") {
  auto m = DecodeCoordinatorMessage(Frames(
      {"HLW2", "ASSIGN",
       R"({"run":3,"attempt":1,"experiment":1,"config":{},"resume":{"path":"/c","sha256":"ab","step":100}})"}));
  REQUIRE(m.ok());
  CHECK(m->command == "ASSIGN");
  CHECK(m->body["resume"]["step"] == 100);
  CHECK(
      DecodeCoordinatorMessage(
          Frames(
              {"HLW2", "ASSIGN",
               R"({"run":"r3","attempt":0,"experiment":1,"config":{"kind":"noop"},"resume":null})"}))
          .ok());
  CHECK(DecodeCoordinatorMessage(Frames({"", "HLW2", "HEARTBEAT", "{}"})).ok());
  CHECK(
      DecodeCoordinatorMessage(
          Frames(
              {"HLW2", "ASSIGN",
               R"({"run":3,"attempt":1,"experiment":1,"config":{},"resume":null,"devices":null})"}))
          .ok());
  CHECK(
      DecodeCoordinatorMessage(
          Frames(
              {"HLW2", "ASSIGN",
               R"({"run":3,"attempt":1,"experiment":1,"config":{},"resume":null,"devices":[0,1]})"}))
          .ok());
  CHECK(DecodeCoordinatorMessage(Frames({"HLW2", "ACK", R"({"run":3,"attempt":1,"what":"DONE"})"}))
            .ok());
  CHECK(DecodeCoordinatorMessage(
            Frames({"HLW2", "ACK", R"({"run":3,"attempt":1,"what":"METRICS","seq":9})"}))
            .ok());
  CHECK(DecodeCoordinatorMessage(
            Frames({"HLW2", "ACK", R"({"run":3,"attempt":1,"what":"ARTIFACT_DELETED","seq":2})"}))
            .ok());
  CHECK(
      DecodeCoordinatorMessage(
          Frames(
              {"HLW2", "ASSIGN",
               R"({"run":3,"attempt":1,"experiment":1,"config":{},"resume":null,"keep_steps":[20,40]})"}))
          .ok());
  CHECK(DecodeCoordinatorMessage(Frames({"HLW2", "REFUSE", R"({"reason":"bad token"})"})).ok());
  CHECK(DecodeCoordinatorMessage(Frames({"HLW2", "CANCEL", R"({"run":3,"attempt":1})"})).ok());
  CHECK(
      DecodeCoordinatorMessage(
          Frames(
              {"HLW2", "WELCOME",
               R"({"worker_id":"w","heartbeat_ms":1000,"session":"0123456789abcdef0123456789abcdef"})"}))
          .ok());
  auto fb = DecodeCoordinatorMessage(Frames(
      {"HLW2", "ASSIGN",
       R"({"run":3,"attempt":2,"experiment":1,"config":{},"resume":{"path":"/c/2","sha256":"b","step":2},
          "resume_fallbacks":[{"path":"/c/1","sha256":"a","step":1}]})"}));
  REQUIRE(fb.ok());
  CHECK(fb->body["resume_fallbacks"][0]["step"] == 1);
}

TEST_CASE("DecodeCoordinatorMessage refuses a body nested past the limit without crashing") {
  // 100,000 levels: a recursive copy or dump of such a tree overflows the stack.
  std::string deep =
      R"({"run":3,"attempt":1,"x":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto m = DecodeCoordinatorMessage(Frames({"HLW2", "CANCEL", deep}));
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message().find("nested deeper") != std::string::npos);
}

TEST_CASE("DecodeCoordinatorMessage rejects malformed messages") {
  std::vector<std::vector<std::string>> bad = {
      {},
      {"HLW2", "HEARTBEAT"},
      {"HLW2", "HEARTBEAT", "{}", "extra"},
      {"HLW1", "HEARTBEAT", "{}"},
      {"HLW2", "NOPE", "{}"},
      {"HLW2", "HEARTBEAT", "not json"},
      {"HLW2", "HEARTBEAT", "[1]"},
      {"HLW2", "REFUSE", "{}"},
      {"HLW2", "WELCOME", "{}"},
      {"HLW2", "WELCOME", R"({"session":"short"})"},
      {"HLW2", "ASSIGN",
       R"({"run":3,"attempt":1,"experiment":1,"config":{},"resume_fallbacks":[{"path":"/c"}]})"},
      {"HLW2", "CANCEL", R"({"run":3})"},
      {"HLW2", "CANCEL", R"({"run":3,"attempt":-1})"},
      {"HLW2", "CANCEL", R"({"run":[],"attempt":1})"},
      {"HLW2", "ACK", R"({"run":3,"attempt":1,"what":"EVERYTHING","seq":1})"},
      {"HLW2", "ACK", R"({"run":3,"attempt":1,"what":"METRICS"})"},
      {"HLW2", "ACK", R"({"run":3,"attempt":1,"what":"ARTIFACT_DELETED"})"},
      {"HLW2", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":{},"keep_steps":[0]})"},
      {"HLW2", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":{},"keep_steps":"20"})"},
      {"HLW2", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1})"},
      {"HLW2", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":[]})"},
      {"HLW2", "ASSIGN",
       R"({"run":3,"attempt":1,"experiment":1,"config":{},"resume":{"path":"/c"}})"},
      {"HLW2", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":{},"resume":7})"},
      {"HLW2", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":{},"devices":[-1]})"},
      {"HLW2", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":{},"devices":"0"})"},
      {"HLW2", "ASSIGN", R"({"run":3,"attempt":1,"experiment":1,"config":{},"parent":"x"})"},
  };
  for (const auto& parts : bad) {
    INFO(Json(parts).dump());
    CHECK(!DecodeCoordinatorMessage(Frames(parts)).ok());
  }
}

}  // namespace headlab
