// Model FLOPs per token and device peaks.
#include "payload/exec/throughput.h"

#include <cmath>

namespace headlab {

double ModelFlopsPerToken(const ModelConfig& c) {
  const double C = double(c.width), L = double(c.layers), T = double(c.context);
  const double head_dim = C / double(c.heads);
  const double kv = double(c.kv_heads > 0 ? c.kv_heads : c.heads) * head_dim;
  const double hidden = std::round(c.mlp_ratio * C);
  const double per_layer =
      C * C /* Q */ + 2 * C * kv /* K, V */ + C * C /* output */ + 2 * C * hidden;
  const double n = L * per_layer + double(c.vocab) * C;  // + the output head
  return 6 * n + 6 * L * T * C;
}

double PeakFlops(const std::string& device_name, const std::string& dtype) {
  struct Peak {
    const char* name;  // a substring of the device name
    double low;        // bf16 / fp16 tensor cores, dense
    double fp32;       // fp32 without TF32 (LibTorch's default for matmuls)
  };
  static const Peak kPeaks[] = {
      {"H200", 989.4e12, 66.9e12},  // also matches GH200
      {"H100", 989.4e12, 66.9e12},
      {"A100", 312e12, 19.5e12},
  };
  for (const Peak& p : kPeaks)
    if (device_name.find(p.name) != std::string::npos) return dtype == "fp32" ? p.fp32 : p.low;
  return 0;
}

}  // namespace headlab
