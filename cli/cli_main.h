// Entry point of the CLI commands that talk to the coordinator's HTTP API.
#pragma once
#include <string>
namespace headlab {
// Returns true iff `command` is a CLI command (submit, status, runs, show, ...).
bool IsCliCommand(const std::string& command);
// Returns the command (CLI or daemon) a mistyped `command` most likely means, or "".
std::string SuggestCommand(const std::string& command);
// argv[0] is the command name. Exit codes: 0 ok, 1 failed, 2 bad input.
int CliMain(int argc, char** argv);
}  // namespace headlab
