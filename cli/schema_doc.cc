// Markdown tables from the run-config schema (schema_doc.h).
#include "cli/schema_doc.h"

#include <cmath>
#include <cstdio>

#include "common/method_schema.h"
#include "common/run_config_schema.h"

namespace headlab {
namespace {

// "|" inside a table cell ends the cell unless escaped.
std::string Cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

// 1e6 and up as 10^k when a power of ten, else %.10g: the way the READMEs write bounds.
std::string Number(double v) {
  if (v >= 1e6 && v < 1e300) {
    double k = std::round(std::log10(v));
    if (std::pow(10.0, k) == v) return "10^" + std::to_string(int(k));
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.10g", v);
  return buf;
}

const char* TypeName(ConfigKeyType t) {
  switch (t) {
    case ConfigKeyType::kInt:
      return "int";
    case ConfigKeyType::kNumber:
      return "number";
    case ConfigKeyType::kString:
      return "string";
  }
  return "";
}

std::string Default(const ConfigKey& k) {
  if (k.type == ConfigKeyType::kString)
    return k.str_default.empty() ? "`\"\"`" : "`" + k.str_default + "`";
  return Number(k.num_default);
}

std::string Range(const ConfigKey& k) {
  if (k.type == ConfigKeyType::kString) {
    if (k.any_string) return "text";
    std::string values;
    size_t start = 0;
    while (true) {
      size_t bar = k.allowed.find('|', start);
      std::string v =
          k.allowed.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
      values += (values.empty() ? "" : ", ") + (v.empty() ? std::string("`\"\"`") : "`" + v + "`");
      if (bar == std::string::npos) break;
      start = bar + 1;
    }
    return values;
  }
  // An integer bound at 2^53 or beyond (ids, seeds) is no bound a reader needs.
  bool unbounded =
      std::isinf(k.max) || (k.type == ConfigKeyType::kInt && k.max >= 9007199254740992.0);
  if (unbounded) return (k.min_open ? "> " : ">= ") + Number(k.min);
  if (k.type == ConfigKeyType::kInt && k.max == k.min + 1)
    return Number(k.min) + " or " + Number(k.max);
  return (k.min_open ? "(" : "[") + Number(k.min) + ", " + Number(k.max) + (k.max_open ? ")" : "]");
}

std::string SectionOf(const std::string& key) {
  size_t dot = key.find('.');
  return dot == std::string::npos ? "" : key.substr(0, dot);
}

}  // namespace

std::string ConfigKeyTable(const std::vector<ConfigKey>& keys) {
  std::string out =
      "| Key | Type | Default | Range / values | Meaning |\n"
      "| --- | --- | --- | --- | --- |\n";
  for (const ConfigKey& k : keys)
    out += "| `" + k.key + "` | " + TypeName(k.type) + " | " + Cell(Default(k)) + " | " +
           Cell(Range(k)) + " | " + Cell(k.doc) + " |\n";
  return out;
}

std::string RunConfigReference() {
  // Sections in order of first appearance; the top-level keys (no dot) form the first.
  std::vector<std::string> order = {""};
  std::vector<std::vector<ConfigKey>> tables(1);
  for (const ConfigKey& k : RunConfigSchema()) {
    std::string s = SectionOf(k.key);
    size_t i = 0;
    while (i < order.size() && order[i] != s) ++i;
    if (i == order.size()) {
      order.push_back(s);
      tables.emplace_back();
    }
    tables[i].push_back(k);
  }
  std::string out;
  for (size_t i = 0; i < order.size(); ++i) {
    out += (i == 0 ? "" : "\n") + std::string("### ") +
           (order[i].empty() ? "Top level" : "`" + order[i] + "`") + "\n\n";
    out += ConfigKeyTable(tables[i]);
  }
  return out;
}

std::vector<GeneratedDoc> GeneratedDocs() {
  std::vector<GeneratedDoc> docs = {{"schema/grid.md", RunConfigReference()}};
  for (const MethodSchema& m : MethodSchemas())
    if (!m.readme.empty()) docs.push_back({m.readme, ConfigKeyTable(m.keys)});
  return docs;
}

StatusOr<std::string> ReplaceGeneratedBlock(const std::string& text, const std::string& body,
                                            const std::string& path) {
  const std::string begin = std::string(kGeneratedBegin) + "\n";
  const std::string end = std::string(kGeneratedEnd) + "\n";
  size_t b = text.find(begin);
  size_t e = b == std::string::npos ? std::string::npos : text.find(end, b + begin.size());
  if (b == std::string::npos || e == std::string::npos)
    return Status::InvalidArgument(path + ": expected a line \"" + kGeneratedBegin +
                                   "\" and after it a line \"" + kGeneratedEnd + "\"");
  return text.substr(0, b + begin.size()) + body + text.substr(e);
}

}  // namespace headlab
