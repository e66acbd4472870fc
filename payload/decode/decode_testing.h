// Test helpers shared by the decoder's tests and the AoH tests that decode: the tiny model
// shape (payload/exec/model_testing.h) and a decoder that must build.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "payload/decode/decoder.h"
#include "payload/exec/model_testing.h"

// Catch after everything that includes LibTorch (c10 defines CHECK too).
#include <catch2/catch.hpp>

namespace headlab::decode {

using headlab::testing::TinyDecoderConfig;

inline std::unique_ptr<KvDecoder> MakeDecoder(Gpt& model, DecoderOptions o = {}) {
  auto d = KvDecoder::Create(model.get(), o);
  REQUIRE(d.ok());
  return std::move(d.value());
}

// Logits of every position, one Step at a time: [B, T, vocab].
inline torch::Tensor DecodeAll(KvDecoder& d, const torch::Tensor& idx) {
  std::vector<torch::Tensor> out;
  for (int64_t t = 0; t < idx.size(1); ++t) out.push_back(d.Step(idx.select(1, t)));
  return torch::stack(out, 1);
}

}  // namespace headlab::decode
