// Wire protocol HLW1 between coordinator and worker (schema/protocol.md is the spec).
//
//    message  := protocol command body
//    protocol := "HLW1"
//    command  := READY | HEARTBEAT | ACCEPT | REJECT | METRICS | ARTIFACT | PROVENANCE |
//                DONE | DISCONNECT                               (worker -> coordinator)
//              | WELCOME | REFUSE | REREGISTER | HEARTBEAT | ASSIGN | CANCEL | ACK
//                                                                (coordinator -> worker)
//    body     := JSON object
#pragma once

#include <chrono>

namespace headlab::wire {

inline constexpr const char* kProtocol = "HLW1";

inline constexpr const char* kReady = "READY";
inline constexpr const char* kHeartbeat = "HEARTBEAT";
inline constexpr const char* kAccept = "ACCEPT";
inline constexpr const char* kReject = "REJECT";
inline constexpr const char* kMetrics = "METRICS";
inline constexpr const char* kArtifact = "ARTIFACT";
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

}  // namespace headlab::wire
