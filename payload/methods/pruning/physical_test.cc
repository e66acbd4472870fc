#include "payload/methods/pruning/physical.h"

#include <torch/torch.h>

#include "payload/exec/checkpoint.h"
#include "payload/methods/pruning/importance.h"
#include "payload/methods/pruning/pruning_testing.h"
#include "payload/methods/saf/calibration.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

ModelConfig Tiny(int64_t kv_heads) {
  ModelConfig c;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = kv_heads;
  c.width = 32;
  c.context = 16;
  c.mlp_ratio = 2;
  c.vocab = 64;
  c.pos = "rope";
  c.rope_base = 10000;
  c.norm = "layernorm";
  return c;
}

Gpt Build(const ModelConfig& c) {
  torch::manual_seed(7);
  return Gpt(c);
}

torch::Tensor Tokens(int64_t batch, int64_t len, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(0, 64, {batch, len}, torch::kLong);
}

void Step(Gpt& model, torch::optim::AdamW& opt, uint64_t seed) {
  torch::Tensor t = Tokens(3, 17, seed);
  opt.zero_grad();
  model->Loss(t.narrow(1, 0, 16), t.narrow(1, 1, 16)).backward();
  opt.step();
}

torch::Tensor& Moment(torch::optim::AdamW& opt, const torch::Tensor& p, bool second) {
  torch::optim::AdamWParamState* s = AdamWStateOf(opt, p);
  REQUIRE(s);
  return second ? s->exp_avg_sq() : s->exp_avg();
}

// Layer 0 loses head 1; layer 1 loses heads 0 and 1, with kv_heads 2 a whole kv group.
const std::vector<HeadRef> kHeads = {{0, 1}, {1, 0}, {1, 1}};

}  // namespace

TEST_CASE("pruning: the physically pruned model computes what the masked model computes") {
  for (int64_t kv : {4, 2}) {
    INFO("kv_heads " << kv);
    ModelConfig c = Tiny(kv);
    Gpt masked = Build(c), pruned = Build(c);
    for (const HeadRef& r : kHeads)
      masked->attention(r.layer)->SetHeadState(r.head, HeadState{HeadMode::kPruned});
    const int64_t before = ParameterCount(pruned);
    RemovalCounts n = RemoveHeadsPhysically(pruned, kHeads, nullptr);
    CHECK(n.heads == 3);
    CHECK(n.kv_heads == (kv == 2 ? 1 : 3));
    const int64_t d = 8, C = 32;
    // Q rows and O columns of 3 heads, K/V rows of the removed kv heads.
    CHECK(before - ParameterCount(pruned) == 3 * 2 * d * C + n.kv_heads * 2 * d * C);
    CHECK(pruned->attention(1)->q_proj->weight.size(0) == 2 * d);
    CHECK(pruned->attention(1)->o_proj->weight.size(1) == 2 * d);
    CHECK(pruned->attention(1)->kept_heads() == std::vector<int64_t>{2, 3});
    CHECK(pruned->attention(0)->removed(1));
    CHECK(pruned->attention(0)->head_states()[1].mode == HeadMode::kPruned);
    torch::Tensor x = Tokens(2, 16, 3);
    CHECK(torch::allclose(masked->forward(x), pruned->forward(x), 1e-5, 1e-6));
    // A removed head cannot come back.
    CHECK_THROWS(pruned->attention(0)->SetHeadState(1, HeadState{}));
    // Removing again is a no-op; removing everything leaves the layer adding nothing.
    CHECK(RemoveHeadsPhysically(pruned, kHeads, nullptr).heads == 0);
    RemoveHeadsPhysically(pruned, {{1, 2}, {1, 3}}, nullptr);
    for (int64_t h = 0; h < 4; ++h)
      masked->attention(1)->SetHeadState(h, HeadState{HeadMode::kPruned});
    CHECK(torch::allclose(masked->forward(x), pruned->forward(x), 1e-5, 1e-6));
  }
}

TEST_CASE("pruning: retained rows keep their AdamW moments bit for bit, and training goes on") {
  ModelConfig c = Tiny(2);
  Gpt model = Build(c);
  auto opt = testing::TwoGroupAdamW(model);
  Step(model, *opt, 1);
  Step(model, *opt, 2);
  HybridAttention& a1 = model->attention(1);
  const torch::Tensor q = a1->q_proj->weight, o = a1->o_proj->weight, k = a1->k_proj->weight;
  torch::Tensor q_m = Moment(*opt, q, false).clone(), q_v = Moment(*opt, q, true).clone();
  torch::Tensor o_m = Moment(*opt, o, false).clone(), k_v = Moment(*opt, k, true).clone();
  torch::Tensor q_w = q.detach().clone();
  RemoveHeadsPhysically(model, kHeads, opt.get());
  // Layer 1 keeps query heads 2, 3 (rows 16..31) and kv head 1 (rows 8..15).
  CHECK(torch::equal(Moment(*opt, q, false), q_m.narrow(0, 16, 16)));
  CHECK(torch::equal(Moment(*opt, q, true), q_v.narrow(0, 16, 16)));
  CHECK(torch::equal(Moment(*opt, o, false), o_m.narrow(1, 16, 16)));
  CHECK(torch::equal(Moment(*opt, k, true), k_v.narrow(0, 8, 8)));
  CHECK(torch::equal(q, q_w.narrow(0, 16, 16)));  // same tensor, now smaller
  CHECK(AdamWStateOf(*opt, q)->step() == 2);
  // The optimiser trains the smaller model.
  Step(model, *opt, 3);
  CHECK(q.size(0) == 16);
  CHECK(!torch::equal(q, q_w.narrow(0, 16, 16)));
}

TEST_CASE("pruning: a pruned model's checkpoint restores exactly into a model built from config") {
  ModelConfig c = Tiny(2);
  Gpt model = Build(c);
  auto opt = testing::TwoGroupAdamW(model);
  Step(model, *opt, 1);
  RemoveHeadsPhysically(model, kHeads, opt.get());
  Step(model, *opt, 2);
  TrainProgress progress;
  progress.step = 2;
  std::string bytes = SerializeCheckpoint(model, *opt, progress, "{}");

  Gpt fresh = Build(c);  // all heads, as the config builds it
  auto fresh_opt = testing::TwoGroupAdamW(fresh);
  TrainProgress restored;
  Status s = RestoreCheckpoint(bytes, "ckpt", fresh, *fresh_opt, &restored);
  REQUIRE(s.ok());
  CHECK(fresh->attention(1)->kept_heads() == std::vector<int64_t>{2, 3});
  CHECK(fresh->attention(1)->kept_kv_heads() == std::vector<int64_t>{1});
  CHECK(fresh->attention(0)->head_states()[1].mode == HeadMode::kPruned);
  auto pa = model->named_parameters(), pb = fresh->named_parameters();
  for (const auto& p : pa) {
    INFO(p.key());
    CHECK(torch::equal(p.value(), pb[p.key()]));
  }
  torch::Tensor q = model->attention(1)->q_proj->weight, fq = fresh->attention(1)->q_proj->weight;
  CHECK(torch::equal(Moment(*opt, q, true), Moment(*fresh_opt, fq, true)));
  // The same next update on both gives the same weights.
  Step(model, *opt, 3);
  Step(fresh, *fresh_opt, 3);
  CHECK(torch::equal(q, fq));
  // The checkpoint of an unpruned model does not restore into a pruned one.
  Gpt full = Build(c);
  auto full_opt = testing::TwoGroupAdamW(full);
  std::string full_bytes = SerializeCheckpoint(full, *full_opt, progress, "{}");
  CHECK(RestoreCheckpoint(full_bytes, "full", model, *opt, &restored).code() ==
        Status::Code::kCorruption);
}

TEST_CASE("pruning: gate-Taylor importance through head gates matches SAF's calibration pass") {
  ModelConfig c = Tiny(2);
  Gpt model = Build(c);
  std::vector<torch::Tensor> batches = {Tokens(3, 17, 5), Tokens(2, 17, 6)};
  std::vector<std::vector<double>> mine = GateTaylorImportance(model, batches);
  std::vector<double> saf = saf::GateTaylorImportance(saf::ViewOfGpt(*model), batches);
  REQUIRE(saf.size() == 8);
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 4; ++h) {
      INFO(l << "." << h);
      CHECK(mine[size_t(l)][size_t(h)] == Approx(saf[size_t(l * 4 + h)]).epsilon(1e-4));
      CHECK(mine[size_t(l)][size_t(h)] > 0);
    }
  CHECK(model->is_training());
  CHECK(!model->attention(0)->head_gate.defined());
  for (const torch::Tensor& p : model->parameters()) CHECK(!p.grad().defined());
  // A removed head scores 0 (and GateTaylorSelect is told to skip it).
  RemoveHeadsPhysically(model, {{0, 1}}, nullptr);
  CHECK(GateTaylorImportance(model, batches)[0][1] == 0.0);
}

}  // namespace headlab
