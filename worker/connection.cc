// Connection: DEALER socket lifecycle and liveness timers.
#include "worker/connection.h"

#include <zmq_addon.hpp>

#include "common/log.h"

namespace headlab {

Connection::Connection(zmq::context_t* ctx, ConnectionOptions options)
    : ctx_(ctx),
      options_(std::move(options)),
      backoff_(options_.reconnect_initial, options_.reconnect_max) {}

Status Connection::Open(Clock::time_point now) {
  registered_ = false;
  peer_expiry_ = now + options_.liveness;
  heartbeat_at_ = now + options_.liveness;
  try {
    socket_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::dealer);
    // No routing id: the coordinator's ROUTER names each connection itself, so no other
    // peer can claim ours; our name travels in READY.id (schema/protocol.md, Sessions).
    socket_->set(zmq::sockopt::maxmsgsize, int64_t(wire::kMaxFrameBytes));
    // A closed socket drops what it still queues: the outbox resends what matters, and a
    // reconnect must not wait on a dead peer.
    socket_->set(zmq::sockopt::linger, 0);
    if (!options_.curve_server_key.empty()) {
      // A fresh key pair per connection: the coordinator knows workers by their token, not
      // by a key, so this one only encrypts.
      char pub[41], sec[41];
      if (zmq_curve_keypair(pub, sec) != 0) throw zmq::error_t();
      socket_->set(zmq::sockopt::curve_serverkey, options_.curve_server_key);
      socket_->set(zmq::sockopt::curve_publickey, std::string(pub));
      socket_->set(zmq::sockopt::curve_secretkey, std::string(sec));
    }
    socket_->connect(options_.endpoint);
  } catch (const zmq::error_t& e) {
    socket_.reset();
    reconnect_at_ = now + backoff_.Next();
    return Status::InvalidArgument("cannot connect to " + options_.endpoint + ": " + e.what());
  }
  return Status::Ok();
}

void Connection::Close(std::chrono::milliseconds linger) {
  if (!socket_) return;
  socket_->set(zmq::sockopt::linger, int(linger.count()));
  socket_->close();
  socket_.reset();
  registered_ = false;
}

bool Connection::Send(const std::string& command, const Json& body) {
  if (!socket_) return false;
  const std::string& auth = command == wire::kReady ? options_.token : session_;
  std::vector<zmq::message_t> frames = EncodeMessage(command, auth, body);
  try {
    // All frames of a multipart message are queued atomically: a full queue rejects the
    // first frame, never a later one.
    return zmq::send_multipart(*socket_, frames, zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    LogWarn(std::string("send ") + command + " failed: " + e.what());
    return false;
  }
}

std::optional<WireMessage> Connection::Receive(Clock::time_point now) {
  while (socket_) {
    std::vector<zmq::message_t> frames;
    try {
      if (!zmq::recv_multipart(*socket_, std::back_inserter(frames), zmq::recv_flags::dontwait))
        return std::nullopt;
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      LogWarn(std::string("receive failed: ") + e.what());
      return std::nullopt;
    }
    peer_expiry_ = now + options_.liveness;
    StatusOr<WireMessage> m = DecodeCoordinatorMessage(frames);
    if (m.ok()) return std::move(*m);
    throttle_.Warn("bad message",
                   "dropping bad message from the coordinator: " + m.status().message(), now);
  }
  return std::nullopt;
}

void Connection::MarkRegistered(Clock::time_point now, const std::string& session) {
  registered_ = true;
  session_ = session;
  backoff_.Reset();
  heartbeat_at_ = now;  // tell the coordinator what runs here right away
}

void Connection::MarkUnregistered(Clock::time_point now) {
  registered_ = false;
  heartbeat_at_ = now + options_.liveness;
}

Connection::Event Connection::Tick(Clock::time_point now) {
  if (!socket_) {
    if (now < reconnect_at_) return Event::kNone;
    LogInfo("reconnecting to " + options_.endpoint);
    Status st = Open(now);
    if (!st.ok()) {
      LogWarn(st.message());
      return Event::kNone;
    }
    return Event::kOpened;
  }
  if (now >= peer_expiry_) {
    std::chrono::milliseconds delay = backoff_.Next();
    LogWarn("coordinator silent for " + std::to_string(options_.liveness.count()) +
            " ms; reconnecting in " + std::to_string(delay.count()) + " ms");
    Close(std::chrono::milliseconds(0));
    reconnect_at_ = now + delay;
    return Event::kLost;
  }
  if (now >= heartbeat_at_) {
    heartbeat_at_ = now + (registered_ ? options_.heartbeat_interval : options_.liveness);
    return registered_ ? Event::kHeartbeatDue : Event::kReadyDue;
  }
  return Event::kNone;
}

Connection::Clock::time_point Connection::NextDeadline() const {
  if (!socket_) return reconnect_at_;
  return std::min(peer_expiry_, heartbeat_at_);
}

}  // namespace headlab
