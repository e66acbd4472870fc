// HLW1 framing and per-command body validation for coordinator -> worker messages.
#include "worker/wire_codec.h"

#include "common/wire.h"

namespace headlab {
namespace {

bool IsInt(const Json& j) { return j.is_number_integer() || j.is_number_unsigned(); }
bool IsId(const Json& j) { return IsInt(j) || (j.is_string() && !j.get<std::string>().empty()); }

// Checks `field` of `body` with `pred`; the error says what was expected.
Status Need(const Json& body, const char* field, bool (*pred)(const Json&), const char* what) {
  if (!body.contains(field)) return Status::InvalidArgument(std::string("missing ") + field);
  if (!pred(body[field])) return Status::InvalidArgument(std::string(field) + ": expected " + what);
  return Status::Ok();
}

Status NeedRef(const Json& b) {
  HEADLAB_RETURN_IF_ERROR(Need(b, "run", IsId, "an integer or string id"));
  return Need(b, "attempt", [](const Json& j) { return IsInt(j) && j.get<int64_t>() >= 0; },
              "an integer >= 0");
}

Status ValidateBody(const std::string& cmd, const Json& b) {
  if (cmd == wire::kWelcome || cmd == wire::kHeartbeat || cmd == wire::kReregister) {
    return Status::Ok();  // fields here are informational (WELCOME.worker_id, heartbeat_ms)
  }
  if (cmd == wire::kRefuse) {
    return Need(b, "reason", [](const Json& j) { return j.is_string(); }, "a string");
  }
  if (cmd == wire::kCancel) return NeedRef(b);
  if (cmd == wire::kAck) {
    HEADLAB_RETURN_IF_ERROR(NeedRef(b));
    HEADLAB_RETURN_IF_ERROR(Need(b, "what", [](const Json& j) {
      return j == wire::kMetrics || j == wire::kArtifact || j == wire::kDone || j == wire::kProvenance;
    }, "METRICS, ARTIFACT, PROVENANCE or DONE"));
    if (b["what"] == wire::kMetrics || b["what"] == wire::kArtifact)
      return Need(b, "seq", IsInt, "an integer");
    return Status::Ok();
  }
  if (cmd == wire::kAssign) {
    HEADLAB_RETURN_IF_ERROR(NeedRef(b));
    HEADLAB_RETURN_IF_ERROR(Need(b, "experiment", IsId, "an integer or string id"));
    HEADLAB_RETURN_IF_ERROR(Need(b, "config", [](const Json& j) { return j.is_object(); }, "an object"));
    if (b.contains("devices") && !b["devices"].is_null()) {  // optional: the GPUs picked
      HEADLAB_RETURN_IF_ERROR(Need(b, "devices", [](const Json& j) {
        if (!j.is_array()) return false;
        for (const Json& d : j)
          if (!IsInt(d) || d.get<int64_t>() < 0 || d.get<int64_t>() > 65535) return false;
        return true;
      }, "an array of GPU ordinals"));
    }
    if (b.contains("parent") && !b["parent"].is_null() && !b["parent"].is_object())
      return Status::InvalidArgument("parent: expected null or an object");
    if (!b.contains("resume") || b["resume"].is_null()) return Status::Ok();
    const Json& r = b["resume"];
    if (!r.is_object()) return Status::InvalidArgument("resume: expected null or an object");
    auto nonempty = [](const Json& j) { return j.is_string() && !j.get<std::string>().empty(); };
    if (!r.contains("path") || !nonempty(r["path"])) return Status::InvalidArgument("resume.path: expected a non-empty string");
    if (!r.contains("sha256") || !nonempty(r["sha256"])) return Status::InvalidArgument("resume.sha256: expected a non-empty string");
    if (!r.contains("step") || !IsInt(r["step"])) return Status::InvalidArgument("resume.step: expected an integer");
    return Status::Ok();
  }
  return Status::InvalidArgument("unknown command");
}

}  // namespace

std::vector<zmq::message_t> EncodeMessage(const std::string& command, const Json& body) {
  std::vector<zmq::message_t> frames;
  frames.emplace_back(std::string(wire::kProtocol));
  frames.emplace_back(command);
  frames.emplace_back(body.dump(-1, ' ', false, Json::error_handler_t::replace));
  return frames;
}

StatusOr<WireMessage> DecodeCoordinatorMessage(const std::vector<zmq::message_t>& frames) {
  size_t first = frames.size() == 4 && frames[0].size() == 0 ? 1 : 0;
  if (frames.size() - first != 3)
    return Status::InvalidArgument("expected 3 frames (protocol, command, body), got " +
                                   std::to_string(frames.size()));
  if (frames[first].to_string() != wire::kProtocol)
    return Status::InvalidArgument("unknown protocol \"" + frames[first].to_string().substr(0, 16) + "\"");
  WireMessage m;
  m.command = frames[first + 1].to_string();
  try {
    m.body = Json::parse(frames[first + 2].to_string());
  } catch (const Json::exception&) {
    return Status::InvalidArgument(m.command.substr(0, 32) + ": body is not JSON");
  }
  if (!m.body.is_object()) return Status::InvalidArgument(m.command.substr(0, 32) + ": body is not a JSON object");
  Status s = ValidateBody(m.command, m.body);
  if (!s.ok()) return Status::InvalidArgument(m.command.substr(0, 32) + ": " + s.message());
  return m;
}

}  // namespace headlab
