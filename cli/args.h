// Command-line parsing for the CLI commands: a declarative spec per command, from which
// both the parser and the --help text are derived (so the two cannot disagree).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace headlab {

struct OptionSpec {
  std::string name;        // "--set"
  std::string short_name;  // "-o" or ""
  std::string value_name;  // "KEY=V1,V2"; empty for a flag
  std::string help;
  bool repeated = false;   // may be given more than once (values accumulate)
};

struct CommandSpec {
  std::string name;        // "submit"
  std::string args;        // "FILE"
  std::string summary;     // one line
  std::vector<OptionSpec> options;
  size_t min_positional = 0;
  size_t max_positional = 0;
};

class ParsedArgs {
 public:
  // Returns true iff option `name` ("--json") was given.
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  // Returns the last value of `name`, or `fallback` when it was not given.
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  // Returns every value of a repeated option, in order.
  std::vector<std::string> All(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  bool help() const { return help_; }

 private:
  friend StatusOr<ParsedArgs> ParseArgs(const CommandSpec&, const std::vector<std::string>&);
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
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
