// HLW1 framing and per-command body validation for coordinator -> worker messages.
#include "worker/wire_codec.h"

#include "common/wire.h"
#include "common/wire_body.h"

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
  return Need(
      b, "attempt", [](const Json& j) { return IsInt(j) && j.get<int64_t>() >= 0; },
      "an integer >= 0");
}

// {path, sha256, step}: a checkpoint offered to resume from.
Status NeedCheckpoint(const Json& r, const std::string& what) {
  if (!r.is_object()) return Status::InvalidArgument(what + ": expected {path, sha256, step}");
  auto nonempty = [](const Json& j) { return j.is_string() && !j.get<std::string>().empty(); };
  if (!r.contains("path") || !nonempty(r["path"]))
    return Status::InvalidArgument(what + ".path: expected a non-empty string");
  if (!r.contains("sha256") || !nonempty(r["sha256"]))
    return Status::InvalidArgument(what + ".sha256: expected a non-empty string");
  if (!r.contains("step") || !IsInt(r["step"]))
    return Status::InvalidArgument(what + ".step: expected an integer");
  return Status::Ok();
}

Status ValidateBody(const std::string& cmd, const Json& b) {
  if (cmd == wire::kWelcome) {
    // The session key every later message must carry; worker_id and heartbeat_ms inform.
    return Need(
        b, "session",
        [](const Json& j) {
          return j.is_string() && j.get<std::string>().size() == wire::kSessionKeyChars;
        },
        "a 32-character session key");
  }
  if (cmd == wire::kHeartbeat || cmd == wire::kReregister) return Status::Ok();
  if (cmd == wire::kRefuse) {
    return Need(
        b, "reason", [](const Json& j) { return j.is_string(); }, "a string");
  }
  if (cmd == wire::kCancel) return NeedRef(b);
  if (cmd == wire::kAck) {
    HEADLAB_RETURN_IF_ERROR(NeedRef(b));
    HEADLAB_RETURN_IF_ERROR(Need(
        b, "what",
        [](const Json& j) {
          return j == wire::kMetrics || j == wire::kArtifact || j == wire::kArtifactDeleted ||
                 j == wire::kDone || j == wire::kProvenance;
        },
        "METRICS, ARTIFACT, ARTIFACT_DELETED, PROVENANCE or DONE"));
    if (b["what"] == wire::kMetrics || b["what"] == wire::kArtifact ||
        b["what"] == wire::kArtifactDeleted)
      return Need(b, "seq", IsInt, "an integer");
    return Status::Ok();
  }
  if (cmd == wire::kAssign) {
    HEADLAB_RETURN_IF_ERROR(NeedRef(b));
    HEADLAB_RETURN_IF_ERROR(Need(b, "experiment", IsId, "an integer or string id"));
    HEADLAB_RETURN_IF_ERROR(Need(
        b, "config", [](const Json& j) { return j.is_object(); }, "an object"));
    if (b.contains("devices") && !b["devices"].is_null()) {  // optional: the GPUs picked
      HEADLAB_RETURN_IF_ERROR(Need(
          b, "devices",
          [](const Json& j) {
            if (!j.is_array()) return false;
            for (const Json& d : j)
              if (!IsInt(d) || d.get<int64_t>() < 0 || d.get<int64_t>() > 65535) return false;
            return true;
          },
          "an array of GPU ordinals"));
    }
    if (b.contains("keep_steps") && !b["keep_steps"].is_null()) {  // optional: pinned steps
      HEADLAB_RETURN_IF_ERROR(Need(
          b, "keep_steps",
          [](const Json& j) {
            if (!j.is_array()) return false;
            for (const Json& s : j)
              if (!IsInt(s) || s.get<int64_t>() < 1) return false;
            return true;
          },
          "an array of positive steps"));
    }
    if (b.contains("parent") && !b["parent"].is_null() && !b["parent"].is_object())
      return Status::InvalidArgument("parent: expected null or an object");
    if (b.contains("resume_fallbacks") && !b["resume_fallbacks"].is_null()) {
      if (!b["resume_fallbacks"].is_array())
        return Status::InvalidArgument("resume_fallbacks: expected an array");
      for (const Json& r : b["resume_fallbacks"])
        HEADLAB_RETURN_IF_ERROR(NeedCheckpoint(r, "resume_fallbacks[]"));
    }
    if (!b.contains("resume") || b["resume"].is_null()) return Status::Ok();
    return NeedCheckpoint(b["resume"], "resume");
  }
  return Status::InvalidArgument("unknown command");
}

}  // namespace

std::vector<zmq::message_t> EncodeMessage(const std::string& command, const std::string& auth,
                                          const Json& body) {
  std::vector<zmq::message_t> frames;
  frames.emplace_back(std::string(wire::kProtocol));
  frames.emplace_back(command);
  frames.emplace_back(auth);
  frames.emplace_back(body.dump(-1, ' ', false, Json::error_handler_t::replace));
  return frames;
}

StatusOr<WireMessage> DecodeCoordinatorMessage(const std::vector<zmq::message_t>& frames) {
  size_t first = frames.size() == 4 && frames[0].size() == 0 ? 1 : 0;
  if (frames.size() - first != 3)
    return Status::InvalidArgument("expected 3 frames (protocol, command, body), got " +
                                   std::to_string(frames.size()));
  if (frames[first].to_string() != wire::kProtocol)
    return Status::InvalidArgument("unknown protocol \"" + frames[first].to_string().substr(0, 16) +
                                   "\"");
  WireMessage m;
  m.command = frames[first + 1].to_string();
  StatusOr<Json> body =
      ParseWireBody(m.command, frames[first + 2].to_string(), wire::kMaxFrameBytes);
  if (!body.ok()) return body.status();
  m.body = std::move(*body);
  Status s = ValidateBody(m.command, m.body);
  if (!s.ok()) return Status::InvalidArgument(m.command.substr(0, 32) + ": " + s.message());
  return m;
}

}  // namespace headlab
