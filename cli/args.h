// Command-line parsing for the CLI commands: a declarative spec per command, from which
// both the parser (common/flags.h) and the --help text are derived (so the two cannot
// disagree).
#pragma once

#include <string>
#include <vector>

#include "common/flags.h"
#include "common/status.h"

namespace headlab {

struct CommandSpec {
  std::string name;     // "submit"
  std::string args;     // "FILE"
  std::string summary;  // one line
  std::vector<OptionSpec> options;
  size_t min_positional = 0;
  size_t max_positional = 0;
};

// The options every command accepts (--url, --data-dir, --token-file), added to each spec.
const std::vector<OptionSpec>& GlobalOptions();

// Parses `argv` (argv[0] is the command name) against `spec` plus the global options.
// "--opt value", "--opt=value", "-o value" and "--" are understood. --help/-h sets help()
// and skips the positional-count check. Errors are InvalidArgument naming the command.
StatusOr<ParsedArgs> ParseArgs(const CommandSpec& spec, const std::vector<std::string>& argv);

// Returns the --help text: the usage line, the summary and every option with its help.
std::string Usage(const CommandSpec& spec);

}  // namespace headlab
