// MeasureFlops: counter session + formulas.
#include "payload/measure/flop_counter.h"

namespace headlab::measure {

std::map<std::string, std::map<std::string, double>> SumByPath(
    const std::vector<RangeCounters>& ranges) {
  std::map<std::string, std::map<std::string, double>> out;
  for (const RangeCounters& r : ranges)
    for (const auto& [metric, v] : r.values) out[r.path][metric] += v;
  return out;
}

StatusOr<FlopReport> MeasureFlops(const std::function<Status()>& body,
                                  const std::function<Status()>& reset,
                                  const TensorMetricSet& tensor, CounterOptions options) {
  FlopReport report;
  report.tensor_metric_set = tensor.name;
  options.metrics = FlopMetricNames(tensor);
  auto unmeasurable = [](const Status& s) {
    return s.code() == Status::Code::kUnavailable || s.code() == Status::Code::kPermissionDenied;
  };
  StatusOr<std::unique_ptr<CounterSession>> session = CounterSession::Open(options);
  if (!session.ok()) {
    if (!unmeasurable(session.status())) return session.status();
    report.unmeasured = session.status().message();
    return report;
  }
  StatusOr<CounterRun> run = (*session)->Run(body, reset);
  if (!run.ok()) {
    if (!unmeasurable(run.status())) return run.status();
    report.unmeasured = run.status().message();
    return report;
  }
  report.passes = run->passes;
  report.profiled_s = run->profiled_s;
  report.dropped_ranges = run->dropped_ranges;
  for (const RangeCounters& r : run->ranges) report.occurrences[r.path]++;
  for (const auto& [path, values] : SumByPath(run->ranges)) {
    StatusOr<FlopCounts> f = AssembleFlops(values, tensor);
    if (!f.ok()) return f.status();
    report.ranges[path] = *f;
  }
  return report;
}

Json FlopReportJson(const FlopReport& report) {
  Json j;
  j["status"] = report.measured() ? "measured" : "unmeasured";
  if (!report.measured()) {
    j["reason"] = report.unmeasured;
    return j;
  }
  j["tensor_metric_set"] = report.tensor_metric_set;
  j["passes"] = report.passes;
  j["profiled_s"] = report.profiled_s;
  j["dropped_ranges"] = report.dropped_ranges;
  Json ranges = Json::object();
  for (const auto& [path, f] : report.ranges) {
    auto occ = report.occurrences.find(path);
    ranges[path] = {
        {"fp32", f.fp32},   {"half", f.half},
        {"fp64", f.fp64},   {"tensor", f.tensor},
        {"total", f.total}, {"occurrences", occ == report.occurrences.end() ? 0 : occ->second}};
  }
  j["ranges"] = ranges;
  return j;
}

}  // namespace headlab::measure
