// The one command-line flag parser of headlab's programs (the CLI commands, `headlab
// worker`, `headlab coordinator`, `headlab bench`, `headlab exec`): a table of options in,
// the values given out, and the --help text's option list made from the same table (so the
// two cannot disagree). Each program keeps its own description and exit codes.
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
  bool repeated = false;  // may be given more than once (values accumulate)
};

// What ParseFlags accepts.
struct FlagsSpec {
  std::string program;  // "headlab submit": the prefix of every error
  std::vector<OptionSpec> options;
  std::string args;  // the positionals' name in errors: "FILE"
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
  friend StatusOr<ParsedArgs> ParseFlags(const FlagsSpec&, const std::vector<std::string>&);
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// Parses `argv` (argv[0] is the program or command name) against `spec`. "--opt value",
// "--opt=value", "-o value" and "--" are understood; "-" and negative numbers are
// positionals. --help/-h sets help() and skips the positional-count check. Errors are
// InvalidArgument starting "<program>: ": an unknown option (with the closest known one),
// a missing value, a value given to a flag, an option that is not `repeated` given twice,
// too few or too many positionals.
StatusOr<ParsedArgs> ParseFlags(const FlagsSpec& spec, const std::vector<std::string>& argv);

// Returns the option list of a --help text: per option "  -s, --name VALUE" padded to one
// column (on a line of its own when longer), then its help, " (repeatable)" for a
// repeated option; a help's further lines ('\n') are indented to the column. It ends with
// -h, --help, which ParseFlags understands for every program.
std::string FormatOptions(const std::vector<OptionSpec>& options);

// Returns a program's --help text from its table: "usage: PROGRAM [--opt VALUE]... ARGS"
// (wrapped at 90 columns), a blank line, `description`, "options:", FormatOptions of the
// table, then `trailer` (exit codes and the like).
std::string HelpText(const FlagsSpec& spec, const std::string& description,
                     const std::string& trailer);

// Returns the integer in `text` if it is one in [lo, hi]; else InvalidArgument
// "<name>: expected an integer in [lo, hi], got \"text\"".
StatusOr<long> ParseIntFlag(const std::string& name, const std::string& text, long lo, long hi);

}  // namespace headlab
