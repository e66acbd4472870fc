// The CLI's argument parser and usage text.
#include "cli/args.h"

namespace headlab {

const std::vector<OptionSpec>& GlobalOptions() {
  static const std::vector<OptionSpec> kGlobal = {
      {"--url", "", "URL",
       "coordinator URL, http://HOST:PORT or https://HOST[:PORT] (default "
       "$HEADLAB_URL, else the address in DIR/coordinator.json, else, without --data-dir, "
       "http://127.0.0.1:8321)"},
      {"--data-dir", "", "DIR",
       "the coordinator's data directory: its token (DIR/token), "
       "address (DIR/coordinator.json) and database (read directly when no coordinator "
       "answers); default .headlab"},
      {"--token-file", "", "FILE",
       "read the API token from FILE (else $HEADLAB_TOKEN, else DIR/token)"},
      {"--ca-file", "", "FILE",
       "for an https URL, trust the CA certificates in FILE (PEM; else "
       "$HEADLAB_CA_FILE, else the system's trusted CAs)"},
  };
  return kGlobal;
}

StatusOr<ParsedArgs> ParseArgs(const CommandSpec& spec, const std::vector<std::string>& argv) {
  FlagsSpec flags{"headlab " + spec.name, spec.options, spec.args, spec.min_positional,
                  spec.max_positional};
  flags.options.insert(flags.options.end(), GlobalOptions().begin(), GlobalOptions().end());
  return ParseFlags(flags, argv);
}

std::string Usage(const CommandSpec& spec) {
  std::string s = "usage: headlab " + spec.name + (spec.args.empty() ? "" : " " + spec.args) +
                  " [OPTIONS]\n\n" + spec.summary + "\n\noptions:\n";
  std::vector<OptionSpec> listed = spec.options;
  listed.insert(listed.end(), GlobalOptions().begin(), GlobalOptions().end());
  s += FormatOptions(listed) + "\nexit codes: 0 ok, 1 failed, 2 bad input\n";
  return s;
}

}  // namespace headlab
