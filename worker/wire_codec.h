// Encoding and validation of HLW2 messages on the worker side (schema/protocol.md):
//
//    sent     := protocol command auth body   (four frames; auth: token or session key)
//    received := protocol command body        (three frames; a DEALER sees no identity)
//    protocol := "HLW2"
//    body     := JSON object (bounded: common/wire_body.h)
#pragma once

#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

struct WireMessage {
  std::string command;
  Json body;
};

// Returns the frames of `command` with `auth` (the token for READY, else the session key)
// and `body`. Invalid UTF-8 in strings (e.g. a stderr tail cut mid-character) is replaced,
// never an exception.
std::vector<zmq::message_t> EncodeMessage(const std::string& command, const std::string& auth,
                                          const Json& body);

// Parses the frames a DEALER received (an empty delimiter frame first is tolerated) and
// validates the body of a coordinator -> worker command: required fields and their types.
// Returns InvalidArgument naming what is wrong.
StatusOr<WireMessage> DecodeCoordinatorMessage(const std::vector<zmq::message_t>& frames);

}  // namespace headlab
