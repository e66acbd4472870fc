// Wire protocol HLW2 between coordinator and worker (schema/protocol.md is the spec).
//
//    message  := protocol command auth body      (worker -> coordinator, 4 frames)
//              | protocol command body           (coordinator -> worker, 3 frames)
//    protocol := "HLW2"
//    command  := READY | HEARTBEAT | ACCEPT | REJECT | METRICS | ARTIFACT |
//                ARTIFACT_DELETED | PROVENANCE | DONE | DISCONNECT  (worker -> coordinator)
//              | WELCOME | REFUSE | REREGISTER | HEARTBEAT | ASSIGN | CANCEL | ACK
//                                                                (coordinator -> worker)
//    auth     := the shared token (READY) | the session key of the last WELCOME (others)
//    body     := JSON object, at most MaxBodyBytes(command) bytes, kMaxBodyDepth deep
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

namespace headlab::wire {

inline constexpr const char* kProtocol = "HLW2";

inline constexpr const char* kReady = "READY";
inline constexpr const char* kHeartbeat = "HEARTBEAT";
inline constexpr const char* kAccept = "ACCEPT";
inline constexpr const char* kReject = "REJECT";
inline constexpr const char* kMetrics = "METRICS";
inline constexpr const char* kArtifact = "ARTIFACT";
inline constexpr const char* kArtifactDeleted = "ARTIFACT_DELETED";
inline constexpr const char* kProvenance = "PROVENANCE";
inline constexpr const char* kDone = "DONE";
inline constexpr const char* kDisconnect = "DISCONNECT";
inline constexpr const char* kWelcome = "WELCOME";
inline constexpr const char* kRefuse = "REFUSE";
inline constexpr const char* kReregister = "REREGISTER";
inline constexpr const char* kAssign = "ASSIGN";
inline constexpr const char* kCancel = "CANCEL";
inline constexpr const char* kAck = "ACK";

// Heartbeats both ways; a peer silent for kLivenessIntervals intervals is dead.
inline constexpr std::chrono::milliseconds kHeartbeatInterval{1000};
inline constexpr int kLivenessIntervals = 3;
inline constexpr std::chrono::milliseconds kLiveness = kHeartbeatInterval * kLivenessIntervals;
// Worker reconnect backoff.
inline constexpr std::chrono::milliseconds kReconnectInitial{250};
inline constexpr std::chrono::milliseconds kReconnectMax{8000};
// Cancel: SIGTERM, then SIGKILL after this grace period.
inline constexpr std::chrono::milliseconds kCancelGrace{10000};

// Session keys (WELCOME.session, the auth frame after READY): 16 random bytes as hex.
inline constexpr size_t kSessionKeyChars = 32;
// READY.id (the worker's name on the wire and in the database): printable ASCII.
inline constexpr size_t kMaxWorkerIdBytes = 128;

// Bodies: a message past its size is dropped before it is parsed; past the depth while
// parsing. METRICS carries batches (1,000 points are about 60 KiB); the rest is small.
inline constexpr size_t kMaxReadyBytes = size_t(64) << 10;
inline constexpr size_t kMaxMetricsBytes = size_t(16) << 20;
inline constexpr size_t kMaxOtherBytes = size_t(1) << 20;
inline constexpr int kMaxBodyDepth = 32;  // levels of objects and arrays, the body's own included
// The largest frame the coordinator's socket accepts at all (ZMQ_MAXMSGSIZE: a peer that
// sends a larger one is disconnected before anything is read into the loop).
inline constexpr size_t kMaxFrameBytes = kMaxMetricsBytes;

// Returns the size limit of `command`'s body (worker -> coordinator).
inline size_t MaxBodyBytes(std::string_view command) {
  if (command == kMetrics) return kMaxMetricsBytes;
  if (command == kReady) return kMaxReadyBytes;
  return kMaxOtherBytes;
}

}  // namespace headlab::wire
