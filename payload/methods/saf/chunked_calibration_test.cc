#include "payload/methods/saf/chunked_calibration.h"

#include "payload/exec/model.h"
#include "payload/methods/saf/saf_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::saf {
namespace {

constexpr int64_t kT = 16, kLayers = 3, kHeads = 4, kWidth = 32;

Gpt ThreeLayerGpt() {
  torch::manual_seed(21);
  ModelConfig c = testing::TinyGptConfig(kT, 2);
  c.layers = kLayers;
  return Gpt(c);
}

std::vector<torch::Tensor> Batches(uint64_t seed, std::vector<int64_t> sizes) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> out;
  for (int64_t b : sizes) out.push_back(torch::randint(0, 64, {b, kT}, torch::kLong));
  return out;
}

TEST_CASE("chunk sizes: all layers when they fit, else what fits beside the cache, at least 1") {
  CHECK(LayersPerChunk(12, 100, 50, 1200) == 12);  // everything fits: one chunk, no cache
  CHECK(LayersPerChunk(12, 100, 50, 1199) == 11);
  CHECK(LayersPerChunk(12, 100, 50, 351) == 3);
  CHECK(LayersPerChunk(12, 100, 50, 10) == 1);
  CHECK(LayersPerChunk(12, 100, 500, 400) == 1);
}

// The brute-force pass (every layer's statistics at once, Calibrate / CalibrateOutputs)
// against the chunked one with a budget that forces one layer per chunk: every head's
// scores, target marginals and entropy, and the output-aware sums are the same.
TEST_CASE("chunked calibration reproduces the full pass head by head") {
  Gpt gpt = ThreeLayerGpt();
  gpt->train();
  ModelView view = ViewOfGpt(*gpt);
  const std::vector<torch::Tensor> batches = Batches(5, {2, 1, 2}), outputs = Batches(6, {2, 1});
  const int64_t queries = 5;

  CalibrationStats full(kLayers, kHeads, {});
  Calibrate(view, batches, &full);
  const OutputStats full_out = CalibrateOutputs(view, outputs, full, queries);

  ChunkedCalibrationOptions o;
  const int64_t layer_bytes = kHeads * kT * kT * 4;
  const int64_t cache_bytes = (5 + 3) * kT * kWidth * 4;  // residual streams of 8 sequences
  // Room for one layer's moments only (the cache does not fit either): chunks of 1 layer.
  o.memory_bytes = layer_bytes;
  o.output_batches = &outputs;
  o.output_queries = queries;
  ChunkedCalibration c = CalibrateInChunks(view, batches, o);
  CHECK(gpt->is_training());  // mode restored
  CHECK(c.summary.layers_per_chunk == 1);
  CHECK(c.summary.chunks == kLayers);
  CHECK(c.summary.statistics_bytes_peak == layer_bytes + cache_bytes);
  CHECK(c.summary.device_bytes_peak == -1);  // CPU
  CHECK_FALSE(c.stats.has_value());

  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t h = 0; h < kHeads; ++h) {
      INFO("head " << l << "." << h);
      const HeadSummary& s = c.summary.at(l, h);
      CHECK(s.variance == full.VarianceScore(l, h));
      CHECK(s.forward_kl == full.ForwardKlScore(l, h));
      torch::Tensor p = PrepareTarget(full.Mean(l, h));
      Marginals eta = SufficientStatistics(p);
      CHECK(torch::equal(s.eta.eta_abs, eta.eta_abs));
      CHECK(torch::equal(s.eta.eta_rel, eta.eta_rel));
      CHECK(s.target_entropy == MeanRowEntropy(p));
      // The independent definitions: marginals of a row-stochastic target sum to T.
      CHECK(s.eta.eta_abs.sum().item<double>() == Approx(double(kT)));
      CHECK(s.eta.eta_rel.sum().item<double>() == Approx(double(kT)));
    }
  CHECK(c.summary.VarianceScores().size() == size_t(kLayers * kHeads));
  CHECK(c.outputs.rows == full_out.rows);
  CHECK(c.outputs.sq_norm == full_out.sq_norm);
  CHECK(c.outputs.dims == full_out.dims);
  CHECK(c.outputs.gram == full_out.gram);
  CHECK(c.outputs.cos_sum == full_out.cos_sum);
  CHECK(c.outputs.rel_sum == full_out.rel_sum);

  // A budget for everything: one chunk, nothing cached; keep_stats keeps the moments.
  o.memory_bytes = int64_t(1) << 30;
  o.output_batches = nullptr;
  o.keep_stats = true;
  ChunkedCalibration one = CalibrateInChunks(view, batches, o);
  CHECK(one.summary.chunks == 1);
  CHECK(one.summary.statistics_bytes_peak == kLayers * layer_bytes);
  REQUIRE(one.stats.has_value());
  for (int64_t l = 0; l < kLayers; ++l) {
    CHECK(torch::equal(one.stats->layer(l).att.sum, full.layer(l).att.sum));
    for (int64_t h = 0; h < kHeads; ++h)
      CHECK(one.summary.at(l, h).variance == c.summary.at(l, h).variance);
  }
}

}  // namespace
}  // namespace headlab::saf
