// Range marks as identity autograd functions.
#include "payload/exec/flops_ranges.h"

#include <atomic>

#include "payload/measure/range_marker.h"
#include "payload/measure/range_paths.h"

namespace headlab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::atomic<bool> g_per_layer{false};
std::atomic<int> g_layer{0};
thread_local bool t_inside_attention = false;

void PushAll(measure::RangeMarker* m, const std::vector<std::string>& labels) {
  for (const std::string& l : labels) m->Push(l);
}
void PopAll(measure::RangeMarker* m, size_t n) {
  for (size_t i = 0; i < n; ++i) m->Pop();
}

// Range begin at f's input: forward opens the labels, backward (the last of f's backward)
// closes them.
struct BeginMark : public torch::autograd::Function<BeginMark> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               std::vector<std::string> labels) {
    if (measure::RangeMarker* m = measure::ActiveMarker()) PushAll(m, labels);
    ctx->saved_data["n"] = int64_t(labels.size());
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    if (measure::RangeMarker* m = measure::ActiveMarker())
      PopAll(m, size_t(ctx->saved_data["n"].toInt()));
    return {grad[0], torch::Tensor()};
  }
};

// Range end at f's output: forward closes the labels, backward (the first of f's backward)
// opens them again.
struct EndMark : public torch::autograd::Function<EndMark> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& y,
                               std::vector<std::string> labels) {
    if (measure::RangeMarker* m = measure::ActiveMarker()) PopAll(m, labels.size());
    std::string joined;  // '\n'-separated: IValue string lists differ across LibTorch versions
    for (const std::string& l : labels) joined += (joined.empty() ? "" : "\n") + l;
    ctx->saved_data["labels"] = joined;
    return y.view_as(y);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    if (measure::RangeMarker* m = measure::ActiveMarker()) {
      const std::string& joined = ctx->saved_data["labels"].toStringRef();
      size_t from = 0;
      while (from <= joined.size()) {
        size_t to = joined.find('\n', from);
        if (to == std::string::npos) to = joined.size();
        m->Push(joined.substr(from, to - from));
        from = to + 1;
      }
    }
    return {grad[0], torch::Tensor()};
  }
};

torch::Tensor MarkLabels(const std::vector<std::string>& labels, const torch::Tensor& x,
                         const std::function<torch::Tensor(const torch::Tensor&)>& f) {
  torch::Tensor in = BeginMark::apply(x, labels);
  torch::Tensor out = f(in);
  return EndMark::apply(out, labels);
}

}  // namespace

torch::Tensor MarkRange(const std::string& name, const torch::Tensor& x,
                        const std::function<torch::Tensor(const torch::Tensor&)>& f) {
  if (!measure::ActiveMarker()) return f(x);
  return MarkLabels({name}, x, f);
}

bool AttentionRangeWanted() { return measure::ActiveMarker() != nullptr && !t_inside_attention; }

torch::Tensor MarkAttentionRange(const torch::Tensor& x,
                                 const std::function<torch::Tensor(const torch::Tensor&)>& f) {
  std::vector<std::string> labels = {measure::kAttentionRange};
  const int layer = g_layer.fetch_add(1);
  if (g_per_layer.load()) labels.push_back("L" + std::to_string(layer));
  auto inner = [&f](const torch::Tensor& in) {
    t_inside_attention = true;
    torch::Tensor y;
    try {
      y = f(in);
    } catch (...) {
      t_inside_attention = false;
      throw;
    }
    t_inside_attention = false;
    return y;
  };
  return MarkLabels(labels, x, inner);
}

torch::Tensor MarkProjection(const torch::Tensor& x,
                             const std::function<torch::Tensor(const torch::Tensor&)>& f) {
  if (!t_inside_attention || !measure::ActiveMarker()) return f(x);
  return MarkLabels({measure::kProjectionRange}, x, f);
}

void SetPerLayerAttentionRanges(bool on) { g_per_layer.store(on); }
void ResetAttentionLayers() { g_layer.store(0); }

}  // namespace headlab
