// The worker's link to the coordinator: one DEALER socket, the session (the key WELCOME
// issued, carried by every message after READY), liveness and heartbeat deadlines, and
// reconnect with exponential backoff (the ZeroMQ guide's Paranoid Pirate pattern;
// schema/protocol.md, Sessions and Liveness).
// Used by the worker's main loop thread only; it never blocks.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "common/json.h"
#include "common/log_throttle.h"
#include "common/wire.h"
#include "worker/backoff.h"
#include "worker/wire_codec.h"

namespace headlab {

struct ConnectionOptions {
  std::string endpoint = "tcp://127.0.0.1:8322";
  std::string identity;  // READY.id: worker-<host>-<pid> (ZeroMQ names the connection itself)
  std::string token;     // READY's auth frame
  std::string curve_server_key;  // Z85: connect as a CURVE client of this key ("" = plain)
  std::chrono::milliseconds heartbeat_interval = wire::kHeartbeatInterval;
  std::chrono::milliseconds liveness = wire::kLiveness;
  std::chrono::milliseconds reconnect_initial = wire::kReconnectInitial;
  std::chrono::milliseconds reconnect_max = wire::kReconnectMax;
};

class Connection {
 public:
  using Clock = std::chrono::steady_clock;
  // What the caller must do after Tick.
  enum class Event {
    kNone,
    kOpened,        // a fresh socket is connected: send READY now
    kHeartbeatDue,  // send HEARTBEAT now
    kReadyDue,      // alive but still not WELCOMEd a liveness period after READY: resend it
    kLost,          // the coordinator fell silent; the socket is closed until a reconnect
  };

  Connection(zmq::context_t* ctx, ConnectionOptions options);
  // Opens the socket at once (the first connect). The caller sends READY next.
  // InvalidArgument if ZeroMQ rejects the endpoint.
  Status Open(Clock::time_point now);
  // Closes the socket, giving queued messages up to `linger` to leave (shutdown).
  void Close(std::chrono::milliseconds linger);
  // Returns the socket to poll for input, or nullptr while down.
  zmq::socket_t* socket() { return socket_.get(); }
  // Queues a message with its auth frame (the token for READY, else the session key).
  // Returns false iff the socket is down or its queue is full (the caller's outbox keeps
  // what matters for a later resend).
  bool Send(const std::string& command, const Json& body);
  // Returns the next valid message, without blocking, or nullopt when none is waiting.
  // Anything received proves the coordinator alive; invalid messages are logged and
  // dropped.
  std::optional<WireMessage> Receive(Clock::time_point now);
  // WELCOME: registered with `session`; heartbeats start and the backoff starts over.
  void MarkRegistered(Clock::time_point now, const std::string& session);
  // Returns the key of the last WELCOME ("" before the first): READY.session after a
  // reconnect proves this worker owns its id.
  const std::string& session() const { return session_; }
  // REREGISTER: the coordinator forgot us; until the next WELCOME we only send READY.
  void MarkUnregistered(Clock::time_point now);
  bool registered() const { return registered_; }
  // Runs the timers (reconnect, liveness, heartbeat) and says what to do next.
  Event Tick(Clock::time_point now);
  // Returns when Tick next has work.
  Clock::time_point NextDeadline() const;

 private:
  // Constant after construction.
  zmq::context_t* const ctx_;
  const ConnectionOptions options_;

  std::unique_ptr<zmq::socket_t> socket_;  // null while waiting to reconnect
  bool registered_ = false;
  std::string session_;  // WELCOME.session (kept across reconnects)
  Backoff backoff_;
  Clock::time_point peer_expiry_;   // the coordinator is dead if silent until then
  Clock::time_point heartbeat_at_;  // our next HEARTBEAT (registered) or READY (not yet)
  Clock::time_point reconnect_at_;  // while down: when to open a new socket
  LogThrottle throttle_;            // bad messages from the coordinator's address
};

}  // namespace headlab
