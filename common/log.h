// Logging to stderr with a UTC timestamp and the process role: "2026-11-30T02:40:01Z
// coordinator: message". Thread-safe (one write(2) per line).
#pragma once

#include <string>

namespace headlab {

// Sets the role printed on every line ("coordinator", "worker", "exec", ...).
void SetLogRole(const std::string& role);
void LogInfo(const std::string& msg);
void LogWarn(const std::string& msg);
void LogError(const std::string& msg);

}  // namespace headlab
