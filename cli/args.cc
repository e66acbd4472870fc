// The CLI's argument parser and usage text.
#include "cli/args.h"

#include <cctype>

#include "common/suggest.h"

namespace headlab {

namespace {

const OptionSpec* Find(const CommandSpec& spec, const std::string& name) {
  for (const auto& o : spec.options)
    if (o.name == name || (!o.short_name.empty() && o.short_name == name)) return &o;
  for (const auto& o : GlobalOptions())
    if (o.name == name) return &o;
  return nullptr;
}

}  // namespace

std::string ParsedArgs::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() || it->second.empty() ? fallback : it->second.back();
}

std::vector<std::string> ParsedArgs::All(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

const std::vector<OptionSpec>& GlobalOptions() {
  static const std::vector<OptionSpec> kGlobal = {
      {"--url", "", "URL", "coordinator URL (default $HEADLAB_URL, else the address in "
       "DIR/coordinator.json, else http://127.0.0.1:8321)"},
      {"--data-dir", "", "DIR", "the coordinator's data directory: its token (DIR/token) and "
       "address (DIR/coordinator.json); default .headlab"},
      {"--token-file", "", "FILE", "read the API token from FILE (else $HEADLAB_TOKEN, else DIR/token)"},
  };
  return kGlobal;
}

StatusOr<ParsedArgs> ParseArgs(const CommandSpec& spec, const std::vector<std::string>& argv) {
  ParsedArgs out;
  std::string cmd = "headlab " + spec.name;
  bool options_done = false;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (options_done || a.size() < 2 || a[0] != '-' ||
        (a[1] != '-' && !std::isalpha(static_cast<unsigned char>(a[1])))) {
      out.positional_.push_back(a);  // "-" and negative numbers are positional
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      out.help_ = true;
      continue;
    }
    std::string name = a, value;
    bool inline_value = false;
    size_t eq = a.find('=');
    if (a.compare(0, 2, "--") == 0 && eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      inline_value = true;
    }
    const OptionSpec* o = Find(spec, name);
    if (!o) {
      std::vector<std::string> names;
      for (const auto& opt : spec.options) names.push_back(opt.name);
      for (const auto& opt : GlobalOptions()) names.push_back(opt.name);
      std::string guess = ClosestName(name, names);
      return Status::InvalidArgument(cmd + ": unknown option " + name +
                                     (guess.empty() ? "" : "; did you mean " + guess + "?") +
                                     " (see " + cmd + " --help)");
    }
    if (o->value_name.empty()) {
      if (inline_value) return Status::InvalidArgument(cmd + ": " + name + " takes no value");
    } else if (!inline_value) {
      if (i + 1 >= argv.size())
        return Status::InvalidArgument(cmd + ": " + name + " needs a value " + o->value_name);
      value = argv[++i];
    }
    auto& slot = out.values_[o->name];
    if (!o->repeated && !slot.empty() && !o->value_name.empty())
      return Status::InvalidArgument(cmd + ": " + o->name + " given more than once");
    slot.push_back(value);
  }
  if (out.help_) return out;
  size_t n = out.positional_.size();
  if (n < spec.min_positional)
    return Status::InvalidArgument(cmd + ": missing " + spec.args + " (usage: " + cmd + " " +
                                   spec.args + " [OPTIONS])");
  if (n > spec.max_positional)
    return Status::InvalidArgument(cmd + ": unexpected argument \"" +
                                   out.positional_[spec.max_positional] + "\"");
  return out;
}

std::string Usage(const CommandSpec& spec) {
  std::string s = "usage: headlab " + spec.name + (spec.args.empty() ? "" : " " + spec.args) +
                  " [OPTIONS]\n\n" + spec.summary + "\n\noptions:\n";
  auto add = [&s](const OptionSpec& o) {
    std::string left = "  " + (o.short_name.empty() ? "" : o.short_name + ", ") + o.name +
                       (o.value_name.empty() ? "" : " " + o.value_name);
    if (left.size() < 28) left += std::string(28 - left.size(), ' ');
    else left += "\n" + std::string(28, ' ');
    s += left + o.help + (o.repeated ? " (repeatable)" : "") + "\n";
  };
  for (const auto& o : spec.options) add(o);
  for (const auto& o : GlobalOptions()) add(o);
  add({"--help", "-h", "", "show this help"});
  s += "\nexit codes: 0 ok, 1 failed, 2 bad input\n";
  return s;
}

}  // namespace headlab
