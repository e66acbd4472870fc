// Table, CSV and number formatting for the CLI.
#include "cli/table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace headlab {

namespace {

bool LooksNumeric(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}

// Display width of UTF-8 text: counts code points, not bytes ("±" is one column).
size_t Width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

void FlattenInto(const Json& v, const std::string& prefix, Json* out) {
  if (v.is_object() && !v.empty()) {
    for (auto& [k, child] : v.items())
      FlattenInto(child, prefix.empty() ? k : prefix + "." + k, out);
  } else {
    (*out)[prefix] = v;
  }
}

}  // namespace

std::string FormatTable(const TableRow& header, const std::vector<TableRow>& rows) {
  size_t cols = header.size();
  for (const auto& r : rows) cols = std::max(cols, r.size());
  std::vector<size_t> width(cols, 0);
  std::vector<bool> numeric(cols, true);
  for (size_t c = 0; c < header.size(); ++c) width[c] = Width(header[c]);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) {
      width[c] = std::max(width[c], Width(r[c]));
      if (!r[c].empty() && r[c] != "-" && !LooksNumeric(r[c])) numeric[c] = false;
    }
  auto line = [&](const TableRow& r) {
    std::string s;
    for (size_t c = 0; c < cols; ++c) {
      std::string cell = c < r.size() ? r[c] : "";
      std::string pad(width[c] - Width(cell), ' ');
      bool right = numeric[c];
      if (c + 1 == cols && !right) pad.clear();  // no trailing blanks
      s += right ? pad + cell : cell + pad;
      if (c + 1 < cols) s += "  ";
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out;
  if (!header.empty()) {
    out += line(header);
    std::string rule;
    for (size_t c = 0; c < cols; ++c)
      rule += std::string(width[c], '-') + (c + 1 < cols ? "  " : "");
    out += rule + "\n";
  }
  for (const auto& r : rows) out += line(r);
  return out;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string FormatCsv(const TableRow& header, const std::vector<TableRow>& rows) {
  auto line = [](const TableRow& r) {
    std::string s;
    for (size_t c = 0; c < r.size(); ++c) s += (c ? "," : "") + CsvField(r[c]);
    return s + "\n";
  };
  std::string out = line(header);
  for (const auto& r : rows) out += line(r);
  return out;
}

std::string FormatNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string FormatBytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (!std::isfinite(bytes)) return FormatNumber(bytes);
  size_t u = 0;
  while (std::fabs(bytes) >= 1024 && u + 1 < sizeof kUnits / sizeof kUnits[0]) {
    bytes /= 1024;
    ++u;
  }
  char buf[40];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else
    std::snprintf(buf, sizeof buf, std::fabs(bytes) >= 100 ? "%.1f %s" : "%.2f %s", bytes,
                  kUnits[u]);
  return buf;
}

bool IsBytesKey(const std::string& key) {
  const std::string tail = "bytes";
  size_t at = key.rfind(tail);
  if (at == std::string::npos) return false;
  bool starts = at == 0 || key[at - 1] == '.' || key[at - 1] == '_';
  size_t end = at + tail.size();
  return starts && (end == key.size() || key[end] == '.');
}

std::string KeyedCell(const std::string& key, const Json& v) {
  if (v.is_number() && IsBytesKey(key)) return FormatBytes(v.get<double>());
  return Cell(v);
}

namespace {

// Decimal places that show `se` to its second significant digit (171 -> 0, 0.00026 -> 5);
// -1 where fixed notation does not fit (|mean| >= 1e7, se < 1e-9: exponents instead).
int SeDecimals(double mean, double se) {
  const double a = std::fabs(se);
  if (std::fabs(mean) >= 1e7 || a < 1e-9) return -1;
  return std::min(12, std::max(0, 1 - int(std::floor(std::log10(a)))));
}

// "mean ± se" with both at SeDecimals; an SE of 0 as "± 0".
std::string MeanSePair(double mean, double se) {
  if (se == 0) return FormatNumber(mean) + " ± 0";
  char buf[80];
  const int d = SeDecimals(mean, se);
  if (d < 0)
    std::snprintf(buf, sizeof buf, "%.2e ± %.1e", mean, se);
  else
    std::snprintf(buf, sizeof buf, "%.*f ± %.*f", d, mean, d, se);
  return buf;
}

}  // namespace

std::string FormatMeanSe(const Json& mean, const Json& se) {
  if (!mean.is_number()) return "-";
  const double m = mean.get<double>();
  if (!se.is_number() || !std::isfinite(se.get<double>()) || !std::isfinite(m))
    return FormatNumber(m);
  return MeanSePair(m, se.get<double>());
}

std::string FormatBytesMeanSe(const Json& mean, const Json& se) {
  if (!mean.is_number()) return "-";
  const double m = mean.get<double>();
  const std::string text = FormatBytes(m);
  if (!se.is_number() || !std::isfinite(se.get<double>()) || !std::isfinite(m)) return text;
  // The mean's unit for both ("1.50 GiB ± 12.3 MiB" never).
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  const std::string unit = text.substr(text.rfind(' ') + 1);
  double scale = 1;
  for (const char* u : kUnits) {
    if (unit == u) break;
    scale *= 1024;
  }
  return MeanSePair(m / scale, se.get<double>() / scale) + " " + unit;
}

std::string Cell(const Json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return v.dump();
  if (v.is_number()) return FormatNumber(v.get<double>());
  return v.dump();
}

Json FlattenObject(const Json& obj) {
  Json out = Json::object();
  if (obj.is_object() && !obj.empty()) FlattenInto(obj, "", &out);
  return out;
}

}  // namespace headlab
