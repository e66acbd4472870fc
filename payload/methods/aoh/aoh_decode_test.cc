// The decoder on AoH's plans (payload/decode/decoder.h): streaming KV groups bounded by
// sink + recent, eviction after every prefill chunk, the contiguous layout of AoH §5, and
// anchor-reuse from AoH's anchor head map (App. J.2).
#include <torch/torch.h>

#include "payload/decode/decode_testing.h"
#include "payload/methods/aoh/aoh_model.h"
#include "payload/methods/aoh/aoh_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aoh {
namespace {

using decode::DecodeAll;
using decode::DecoderOptions;
using decode::KvDecoder;
using decode::KvSegment;
using decode::MakeDecoder;

TEST_CASE("aoh decode: streaming heads match the hybrid layer and stay within sink + recent") {
  torch::manual_seed(22);
  Gpt model(TinyModelConfig("rope", 4, 2));
  torch::NoGradGuard no_grad;
  AohOptions o;
  o.sink = 2;
  o.recent = 3;
  auto plan = PlanAoh(*model, o);
  REQUIRE(plan.ok());
  ApplyPlan(*model, plan.value());
  torch::Tensor idx = torch::randint(0, 32, {2, 24}, torch::kLong);
  torch::Tensor masked = model->forward(idx);  // the hybrid layer's streaming masks

  auto d = MakeDecoder(model);
  std::vector<torch::Tensor> out;
  for (int64_t t = 0; t < 24; ++t) {
    out.push_back(d->Step(idx.select(1, t)));
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t g = 0; g < 2; ++g) {
        const int64_t entries = d->KvEntries(l, g);
        if (plan->group_roles[size_t(l)][size_t(g)] == Role::kStreaming)
          CHECK(entries <= o.sink + o.recent);
        else
          CHECK(entries == t + 1);
      }
  }
  CHECK(torch::allclose(torch::stack(out, 1), masked, 1e-4, 1e-5));
  // Half the KV groups keep 2 + 3 - 1 entries between steps instead of 24.
  CHECK(d->KvBytes() == 2 * 2 * 2 * (24 + 4) * 8 * 4);
  CHECK(d->KvCapacityBytes() >= d->KvBytes());

  // In the contiguous layout of AoH §5 (retrieval KV heads first) the segments are slices
  // and the function is unchanged.
  std::vector<HeadOrder> orders = PlanOrders(plan.value(), 4);
  for (int64_t l = 0; l < 2; ++l) ReorderLayer(*model, l, orders[size_t(l)]);
  auto r = MakeDecoder(model);
  CHECK(r->segments(0)[0].kv_heads == std::vector<int64_t>{0});
  CHECK(torch::allclose(DecodeAll(*r, idx), masked, 1e-4, 1e-5));
  for (int64_t l = 0; l < 2; ++l) ReorderLayer(*model, l, InverseOrder(orders[size_t(l)]));

  // Chunked prefill evicts after every chunk and still computes the same function.
  for (int64_t chunk : {1, 4, 7, 24}) {
    DecoderOptions c;
    c.prefill_chunk = chunk;
    auto p = MakeDecoder(model, c);
    int64_t seen = 0;
    p->Prefill(idx, [&](int64_t start, const torch::Tensor& logits) {
      CHECK(start == seen);
      CHECK(torch::allclose(logits, masked.narrow(1, start, logits.size(1)), 1e-4, 1e-5));
      seen += logits.size(1);
      for (int64_t l = 0; l < 2; ++l)
        for (const KvSegment& s : p->segments(l))
          if (s.bounded) CHECK(s.entries <= o.sink + o.recent);
    });
    CHECK(seen == 24);
    // Last-position-only prefill hands over one [B, 1, vocab] slice.
    auto q = MakeDecoder(model, c);
    q->Prefill(
        idx,
        [&](int64_t start, const torch::Tensor& logits) {
          CHECK(start == 23);
          CHECK(torch::allclose(logits.squeeze(1), masked.select(1, 23), 1e-4, 1e-5));
        },
        /*last_only=*/true);
  }
}

TEST_CASE("aoh decode: per-chunk eviction matches the hybrid layer's chunk masks") {
  for (int64_t chunk : {1, 4, 7}) {
    torch::manual_seed(26);
    Gpt model(TinyModelConfig("rope", 4, 2));
    torch::NoGradGuard no_grad;
    AohOptions o;
    o.sink = 2;
    o.recent = 3;
    o.eviction_chunk = chunk;  // AoH §5: trim to sink + recent after every chunk of K
    auto plan = PlanAoh(*model, o);
    REQUIRE(plan.ok());
    ApplyPlan(*model, plan.value());
    for (const HeadState& h : model->attention(0)->head_states())
      CHECK(h.chunk == (h.mode == HeadMode::kStreaming ? chunk : 0));
    torch::Tensor idx = torch::randint(0, 32, {2, 24}, torch::kLong);
    torch::Tensor masked = model->forward(idx);
    DecoderOptions c;
    c.prefill_chunk = chunk;
    auto p = MakeDecoder(model, c);
    int64_t seen = 0;
    p->Prefill(idx, [&](int64_t start, const torch::Tensor& logits) {
      INFO("chunk " << chunk << " start " << start);
      CHECK(torch::allclose(logits, masked.narrow(1, start, logits.size(1)), 1e-4, 1e-5));
      seen += logits.size(1);
    });
    CHECK(seen == 24);
    // Between chunks a streaming KV group holds the sink and the `recent` newest keys.
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t g = 0; g < 2; ++g)
        if (plan->group_roles[size_t(l)][size_t(g)] == Role::kStreaming)
          CHECK(p->KvEntries(l, g) == o.sink + o.recent);
    // A decode step at a chunk boundary is that chunk's first query.
    auto q = MakeDecoder(model, c);
    q->Prefill(idx.narrow(1, 0, 21 - 21 % chunk));
    const int64_t at = q->position();
    CHECK(torch::allclose(q->Step(idx.select(1, at)), masked.select(1, at), 1e-4, 1e-5));
  }
}

TEST_CASE("aoh decode: anchor-reuse attends to the anchor head's top-k positions") {
  torch::manual_seed(24);
  Gpt model(TinyModelConfig("rope", 4, 4, 24, 4));
  torch::NoGradGuard no_grad;
  torch::Tensor idx = torch::randint(0, 32, {2, 24}, torch::kLong);
  torch::Tensor full = model->forward(idx);
  std::vector<std::vector<Role>> roles(4, std::vector<Role>(4, Role::kRetrieval));
  DecoderOptions o;
  o.anchor_block = 2;
  o.anchor_map = AnchorHeadMap(*model, roles, 2);
  o.anchor_topk = 24;  // every key selected: the same as full attention
  CHECK(torch::allclose(MakeDecoder(model, o)->Prefill(idx), full, 1e-4, 1e-5));
  o.anchor_topk = 3;
  torch::Tensor sparse = MakeDecoder(model, o)->Prefill(idx);
  CHECK_FALSE(torch::allclose(sparse, full, 1e-3, 1e-3));
  // Up to 3 positions every query sees all its keys.
  CHECK(torch::allclose(sparse.narrow(1, 0, 3), full.narrow(1, 0, 3), 1e-4, 1e-5));
  // Decode and prefill select the same indices.
  auto d = MakeDecoder(model, o);
  CHECK(torch::allclose(DecodeAll(*d, idx), sparse, 1e-4, 1e-5));
  o.anchor_map.pop_back();
  CHECK_FALSE(KvDecoder::Create(model.get(), o).ok());
}

}  // namespace
}  // namespace headlab::aoh
