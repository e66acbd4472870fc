// Closed-form parameter counts and checkpoint bytes.
#include "common/checkpoint_size.h"

#include <cmath>

namespace headlab {

int64_t ModelParameterCount(const Json& config) {
  const Json& m = config.at("model");
  if (!m.at("init_from").get<std::string>().empty()) return 0;
  const int64_t layers = m.at("layers").get<int64_t>();
  const int64_t heads = m.at("heads").get<int64_t>();
  const int64_t width = m.at("width").get<int64_t>();
  const int64_t context = m.at("context").get<int64_t>();
  const int64_t vocab = m.at("vocab").get<int64_t>();
  const int64_t kv_heads =
      m.at("kv_heads").get<int64_t>() > 0 ? m["kv_heads"].get<int64_t>() : heads;
  const int64_t head_dim = width / heads;
  // ModelConfig::MlpHidden: round(mlp_ratio * width).
  const int64_t hidden = int64_t(std::llround(m.at("mlp_ratio").get<double>() * double(width)));
  const int64_t norm = m.at("norm") == "rmsnorm" ? width : 2 * width;
  const int64_t attention = 2 * width * width + 2 * width * kv_heads * head_dim;
  const int64_t block = 2 * norm + attention + 2 * width * hidden;
  const int64_t positions = m.at("pos") == "learned" ? context * width : 0;
  return vocab * width + positions + layers * block + norm;
}

int64_t CheckpointBytesEstimate(const Json& config) {
  const int64_t params = ModelParameterCount(config);
  if (params == 0) return 0;
  const Json& m = config.at("model");
  const int64_t buffers = m.at("layers").get<int64_t>() * 3 * m.at("heads").get<int64_t>() *
                          m.at("context").get<int64_t>();
  return 4 * (3 * params + buffers);
}

}  // namespace headlab
