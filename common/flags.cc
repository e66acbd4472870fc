// ParseFlags: argv against a table of options.
#include "common/flags.h"

#include <cctype>
#include <cstdlib>

#include "common/suggest.h"

namespace headlab {
namespace {

const OptionSpec* Find(const FlagsSpec& spec, const std::string& name) {
  for (const auto& o : spec.options)
    if (o.name == name || (!o.short_name.empty() && o.short_name == name)) return &o;
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

StatusOr<ParsedArgs> ParseFlags(const FlagsSpec& spec, const std::vector<std::string>& argv) {
  ParsedArgs out;
  const std::string& cmd = spec.program;
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

std::string FormatOptions(const std::vector<OptionSpec>& options) {
  constexpr size_t kColumn = 28;
  std::vector<OptionSpec> listed = options;
  listed.push_back({"--help", "-h", "", "show this help"});
  std::string s;
  for (const OptionSpec& o : listed) {
    std::string left = "  " + (o.short_name.empty() ? "" : o.short_name + ", ") + o.name +
                       (o.value_name.empty() ? "" : " " + o.value_name);
    if (left.size() < kColumn)
      left += std::string(kColumn - left.size(), ' ');
    else
      left += "\n" + std::string(kColumn, ' ');
    std::string help = o.help + (o.repeated ? " (repeatable)" : "");
    for (size_t nl = help.find('\n'); nl != std::string::npos; nl = help.find('\n', nl + 1))
      help.insert(nl + 1, std::string(kColumn, ' '));
    s += left + help + "\n";
  }
  return s;
}

std::string HelpText(const FlagsSpec& spec, const std::string& description,
                     const std::string& trailer) {
  const std::string head = "usage: " + spec.program;
  std::string usage = head, line = head;
  auto add = [&](const std::string& word) {
    if (line.size() + 1 + word.size() > 90) {
      usage += "\n" + std::string(head.size(), ' ');
      line = std::string(head.size(), ' ');
    }
    usage += " " + word;
    line += " " + word;
  };
  for (const OptionSpec& o : spec.options)
    add("[" + o.name + (o.value_name.empty() ? "" : " " + o.value_name) + "]");
  if (!spec.args.empty()) add(spec.args);
  return usage + "\n\n" + description + "\noptions:\n" + FormatOptions(spec.options) + "\n" +
         trailer;
}

StatusOr<long> ParseIntFlag(const std::string& name, const std::string& text, long lo, long hi) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < lo || v > hi)
    return Status::InvalidArgument(name + ": expected an integer in [" + std::to_string(lo) + ", " +
                                   std::to_string(hi) + "], got \"" + text + "\"");
  return v;
}

}  // namespace headlab
