#include "payload/exec/rope.h"

#include <cmath>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

TEST_CASE("rope: plain frequencies are base^(-2i/d)") {
  const std::vector<double> t = RopeFrequencies(RopeSpec{10000.0}, 8);
  REQUIRE(t.size() == 4);
  CHECK(t[0] == 1.0);
  CHECK(t[1] == Approx(0.1).epsilon(1e-15));
  CHECK(t[2] == Approx(0.01).epsilon(1e-15));
  CHECK(t[3] == Approx(0.001).epsilon(1e-15));
  CHECK(RopeAttentionFactor(RopeSpec{10000.0}) == 1.0);
}

TEST_CASE("rope: llama3 keeps short wavelengths, divides long ones, blends between") {
  RopeSpec r{500000.0};
  r.scaling.type = "llama3";
  r.scaling.factor = 8;
  r.scaling.low_freq_factor = 1;
  r.scaling.high_freq_factor = 4;
  r.scaling.original_context = 8192;  // Llama 3.1's values
  const std::vector<double> plain = RopeFrequencies(RopeSpec{500000.0}, 128);
  const std::vector<double> t = RopeFrequencies(r, 128);
  int kept = 0, divided = 0, blended = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const double wavelength = 2 * M_PI / plain[i];
    if (wavelength < 8192.0 / 4) {
      CHECK(t[i] == plain[i]);
      ++kept;
    } else if (wavelength > 8192.0 / 1) {
      CHECK(t[i] == Approx(plain[i] / 8).epsilon(1e-14));
      ++divided;
    } else {
      CHECK(t[i] < plain[i]);
      CHECK(t[i] > plain[i] / 8);
      ++blended;
    }
  }
  // For theta 500000, d 128: pairs 0-28 keep theta, 29-34 blend, 35-63 are divided.
  CHECK(kept == 29);
  CHECK(blended == 6);
  CHECK(divided == 29);
  // One pair by hand: d = 2, theta_0 = 1 (wavelength 2 pi), L = 16: L / wavelength = 2.54648,
  // smooth = (2.54648 - 1) / 3 = 0.515494, theta' = (1 - 0.515494) / 8 + 0.515494 = 0.576056.
  r.scaling.original_context = 16;
  CHECK(RopeFrequencies(r, 2)[0] == Approx(0.576056).epsilon(1e-5));
  CHECK(RopeAttentionFactor(r) == 1.0);
}

TEST_CASE("rope: yarn interpolates the pairs past the ramp and scales attention by 0.1 ln s + 1") {
  RopeSpec r{10000.0};
  r.scaling.type = "yarn";
  r.scaling.factor = 4;
  r.scaling.original_context = 32;
  // Pair index where a pair turns 32 times over L = 32: 8 ln(32 / (32 2 pi)) / (2 ln 10^4) =
  // -0.80 -> 0; once: 8 ln(32 / 2 pi) / (2 ln 10^4) = 0.71 -> 1. Pair 0 keeps theta, the rest
  // are divided by 4.
  const std::vector<double> t = RopeFrequencies(r, 8);
  CHECK(t[0] == 1.0);
  CHECK(t[1] == Approx(0.1 / 4).epsilon(1e-14));
  CHECK(t[2] == Approx(0.01 / 4).epsilon(1e-14));
  CHECK(t[3] == Approx(0.001 / 4).epsilon(1e-14));
  CHECK(RopeAttentionFactor(r) == Approx(1.1386294361).epsilon(1e-10));
  r.scaling.attention_factor = 1.5;
  CHECK(RopeAttentionFactor(r) == 1.5);
  // A longer original context moves the ramp up: L = 4096, d = 64: 64 ln(4096 / (64 pi)) /
  // (2 ln 10^4) = 10.47 -> 10; 64 ln(4096 / (2 pi)) / (2 ln 10^4) = 22.51 -> 23.
  r.scaling.original_context = 4096;
  const std::vector<double> plain = RopeFrequencies(RopeSpec{10000.0}, 64);
  const std::vector<double> y = RopeFrequencies(r, 64);
  for (size_t i = 0; i <= 10; ++i) CHECK(y[i] == plain[i]);
  const double gamma = (16.0 - 10.0) / (23.0 - 10.0);  // pair 16 on the ramp
  CHECK(y[16] == Approx(gamma * plain[16] / 4 + (1 - gamma) * plain[16]).epsilon(1e-14));
  for (size_t i = 23; i < 32; ++i) CHECK(y[i] == Approx(plain[i] / 4).epsilon(1e-14));
}

}  // namespace
}  // namespace headlab
