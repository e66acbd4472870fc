// Formatting of benchmark figures.
#include "bench/figures.h"

#include <cstdio>

namespace headlab::bench {
namespace {

const char* CmpText(Figure::Cmp c) {
  switch (c) {
    case Figure::Cmp::kLess:
      return "<";
    case Figure::Cmp::kLessEq:
      return "<=";
    case Figure::Cmp::kGreaterEq:
      return ">=";
  }
  return "?";
}

// Formats a number with 3 significant digits for small values, thousands as integers.
std::string Num(double v) {
  char buf[64];
  if (v >= 1000)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

bool Figure::Pass() const {
  if (!measured) return false;
  switch (cmp) {
    case Cmp::kLess:
      return value < target;
    case Cmp::kLessEq:
      return value <= target;
    case Cmp::kGreaterEq:
      return value >= target;
  }
  return false;
}

double Figure::RatioToTarget() const {
  if (!measured) return 0;
  if (cmp == Cmp::kGreaterEq) return target > 0 ? value / target : 0;
  return value > 0 ? target / value : 0;
}

std::string FormatTable(const std::vector<Figure>& figures) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-34s %18s %20s %8s  %s\n", "figure", "value", "target",
                "x target", "result");
  out += line;
  for (const Figure& f : figures) {
    std::string value = f.measured ? Num(f.value) + " " + f.unit : "unmeasured";
    std::string target = std::string(CmpText(f.cmp)) + " " + Num(f.target) + " " + f.unit;
    std::string ratio = f.measured ? Num(f.RatioToTarget()) : "-";
    std::snprintf(line, sizeof line, "%-34s %18s %20s %8s  %s\n", f.name.c_str(), value.c_str(),
                  target.c_str(), ratio.c_str(), f.Pass() ? "pass" : "FAIL");
    out += line;
  }
  return out;
}

Json FiguresJson(const std::vector<Figure>& figures) {
  Json arr = Json::array();
  for (const Figure& f : figures) {
    arr.push_back({{"name", f.name},
                   {"unit", f.unit},
                   {"value", f.measured ? Json(f.value) : Json(nullptr)},
                   {"target", f.target},
                   {"cmp", CmpText(f.cmp)},
                   {"ratio_to_target", f.RatioToTarget()},
                   {"pass", f.Pass()},
                   {"note", f.note}});
  }
  return arr;
}

}  // namespace headlab::bench
