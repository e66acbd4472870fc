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

StatusOr<long> ParseIntFlag(const std::string& name, const std::string& text, long lo, long hi) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < lo || v > hi)
    return Status::InvalidArgument(name + ": expected an integer in [" + std::to_string(lo) +
                                   ", " + std::to_string(hi) + "], got \"" + text + "\"");
  return v;
}

}  // namespace headlab
