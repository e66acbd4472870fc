#include "payload/methods/aoh/aoh_model.h"

#include <cmath>

#include "payload/methods/aoh/aoh_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aoh {
namespace {

torch::Tensor Tokens(int64_t B, int64_t T) { return torch::randint(0, 32, {B, T}, torch::kLong); }

TEST_CASE("aoh model: sparsity 0 is full attention; streaming heads change the function") {
  torch::manual_seed(11);
  Gpt model(TinyModelConfig("rope", 4, 2));
  torch::NoGradGuard no_grad;
  torch::Tensor idx = Tokens(2, 24);
  torch::Tensor full = model->forward(idx);

  AohOptions o;
  o.sparsity = 0;
  o.sink = 1;
  o.recent = 2;
  auto plan = PlanAoh(*model, o);
  REQUIRE(plan.ok());
  ApplyPlan(*model, plan.value());
  for (int64_t l = 0; l < 2; ++l)
    for (const HeadState& s : model->attention(l)->head_states())
      CHECK(s.mode == HeadMode::kOrdinary);
  CHECK(torch::equal(model->forward(idx), full));

  o.sparsity = 0.5;
  plan = PlanAoh(*model, o);
  REQUIRE(plan.ok());
  ApplyPlan(*model, plan.value());
  int64_t streaming = 0;
  for (int64_t l = 0; l < 2; ++l)
    for (const HeadState& s : model->attention(l)->head_states()) {
      streaming += s.mode == HeadMode::kStreaming;
      if (s.mode == HeadMode::kStreaming) CHECK((s.sink == 1 && s.recent == 2));
    }
  CHECK(streaming == 4);  // one of two KV groups (2 query heads) per layer
  CHECK_FALSE(torch::allclose(model->forward(idx), full, 1e-4, 1e-4));

  // Streaming heads whose window covers the whole context are full attention again.
  o.sparsity = 1;
  o.recent = 24;
  plan = PlanAoh(*model, o);
  ApplyPlan(*model, plan.value());
  CHECK(torch::allclose(model->forward(idx), full, 1e-5, 1e-6));
}

TEST_CASE("aoh model: labels are per KV group, controls keep the counts") {
  torch::manual_seed(12);
  Gpt model(TinyModelConfig("learned", 8, 4, 24, 3));
  for (Selection sel : {Selection::kAoh, Selection::kReverse, Selection::kRandom}) {
    AohOptions o;
    o.selection = sel;
    o.sparsity = 0.75;
    auto plan = PlanAoh(*model, o);
    REQUIRE(plan.ok());
    for (size_t l = 0; l < 3; ++l) {
      int64_t retrieval = 0;
      for (Role r : plan->group_roles[l]) retrieval += r == Role::kRetrieval;
      CHECK(retrieval == 1);
      for (int64_t h = 0; h < 8; ++h)
        CHECK(plan->head_roles[l][size_t(h)] == plan->group_roles[l][size_t(h / 2)]);
    }
    CHECK(PlanHeadMaps(plan.value()).size() == 24);
  }
  // AoH and Reverse pick opposite ends of the same ordering.
  AohOptions o;
  o.sparsity = 0.75;
  auto aoh = PlanAoh(*model, o);
  o.selection = Selection::kReverse;
  auto rev = PlanAoh(*model, o);
  for (size_t l = 0; l < 3; ++l) {
    const auto& g = aoh->group_scores[l];
    for (size_t i = 0; i < g.size(); ++i) {
      if (aoh->group_roles[l][i] == Role::kRetrieval)
        for (double x : g) CHECK(g[i] <= x);
      if (rev->group_roles[l][i] == Role::kRetrieval)
        for (double x : g) CHECK(g[i] >= x);
    }
  }
  o.sparsity = 1.5;
  CHECK_FALSE(PlanAoh(*model, o).ok());
  o.sparsity = 0.5;
  o.rope_max_distance = 64;
  CHECK_FALSE(PlanAoh(*model, o).ok());  // learned positions: no RoPE-aware score
}

TEST_CASE("aoh model: reordering keeps the function and its inverse restores every weight") {
  torch::manual_seed(13);
  Gpt model(TinyModelConfig("rope", 8, 4));
  torch::NoGradGuard no_grad;
  AohOptions o;
  o.sink = 2;
  o.recent = 5;
  auto plan = PlanAoh(*model, o);
  REQUIRE(plan.ok());
  ApplyPlan(*model, plan.value());
  // A pruned retrieval head travels with its state too.
  int64_t pruned = 0;
  while (plan->head_roles[1][size_t(pruned)] != Role::kRetrieval) ++pruned;
  model->attention(1)->SetHeadState(pruned, HeadState{HeadMode::kPruned});
  torch::Tensor idx = Tokens(2, 20);
  torch::Tensor before = model->forward(idx);
  std::vector<torch::Tensor> weights;
  for (const auto& p : model->parameters()) weights.push_back(p.clone());
  std::vector<std::vector<HeadState>> states = {model->attention(0)->head_states(),
                                                model->attention(1)->head_states()};

  std::vector<HeadOrder> orders = PlanOrders(plan.value(), 8);
  for (int64_t l = 0; l < 2; ++l) {
    ReorderLayer(*model, l, orders[size_t(l)]);
    // AoH §5: retrieval heads are the leading slice, streaming heads the rest.
    const auto& s = model->attention(l)->head_states();
    const int64_t k = orders[size_t(l)].retrieval_groups * 2;
    CHECK(k == 4);
    for (int64_t h = 0; h < 8; ++h) CHECK((s[size_t(h)].mode != HeadMode::kStreaming) == (h < k));
  }
  CHECK(torch::allclose(model->forward(idx), before, 1e-5, 1e-6));
  for (int64_t l = 0; l < 2; ++l) ReorderLayer(*model, l, InverseOrder(orders[size_t(l)]));
  size_t i = 0;
  for (const auto& p : model->parameters()) CHECK(torch::equal(p, weights[i++]));
  for (int64_t l = 0; l < 2; ++l)
    for (size_t h = 0; h < 8; ++h) {
      CHECK(model->attention(l)->head_states()[h].mode == states[size_t(l)][h].mode);
      CHECK(model->attention(l)->head_states()[h].recent == states[size_t(l)][h].recent);
    }
  CHECK(torch::equal(model->forward(idx), before));
}

TEST_CASE("aoh model: anchor map picks the anchor head with the most similar kernel") {
  torch::manual_seed(14);
  Gpt model(TinyModelConfig("learned", 4, 4, 24, 4));
  torch::NoGradGuard no_grad;
  // Layer 1 head 2 gets the kernel of layer 0 head 3 (scaled: the measure is normalised).
  QueryRows(*model, 1, 2).copy_(QueryRows(*model, 0, 3) * 2);
  KeyRows(*model, 1, 2).copy_(KeyRows(*model, 0, 3));
  std::vector<std::vector<Role>> roles(4, std::vector<Role>(4, Role::kRetrieval));
  roles[1][0] = Role::kStreaming;
  auto map = AnchorHeadMap(*model, roles, 2);
  CHECK(map[0] == std::vector<int64_t>{-1, -1, -1, -1});  // anchor layer
  CHECK(map[2] == std::vector<int64_t>{-1, -1, -1, -1});  // anchor of the second block
  CHECK(map[1][0] == -1);                                 // streaming head
  CHECK(map[1][2] == 3);
  for (int64_t h : map[3]) CHECK((h >= 0 && h < 4));
  CHECK(AnchorHeadMap(*model, roles, 1)[1][2] == -1);  // blocks of one layer: no reuse
}

// The reference for Table 6, computed without the Gram proxy: a query at position i and a
// key at j = i - Delta score (R_i q)^T (R_j k) with RoPE's rotate-half planes (m, m + d/2)
// turned by position * base^(-2m/d), so the head's kernel at distance Delta is
// M = W_K^T R_Delta W_Q [d_model, d_model]: formed explicitly, singular values by SVD,
// effective rank exp(-sum p log p) over sigma > 1e-6 sigma_1 (App. J.1), averaged over the
// distances 0, 1, 2, 4, 8, 16 (kernel_spectrum.h: log-spaced up to the maximum). Spearman
// = Pearson correlation of the ranks, ties sharing their mean rank.
double ReferenceEffectiveRank(const torch::Tensor& wq, const torch::Tensor& wk, double base,
                              int64_t delta) {
  const int64_t d = wq.size(0), half = d / 2;
  torch::Tensor rot = torch::zeros({d, d}, torch::kDouble);
  for (int64_t m = 0; m < half; ++m) {
    const double a = double(delta) * std::pow(base, -2.0 * double(m) / double(d));
    rot[m][m] = std::cos(a);
    rot[m][m + half] = -std::sin(a);
    rot[m + half][m] = std::sin(a);
    rot[m + half][m + half] = std::cos(a);
  }
  torch::Tensor kernel = wk.to(torch::kDouble).t().matmul(rot).matmul(wq.to(torch::kDouble));
  torch::Tensor sigma = torch::linalg_svdvals(kernel);
  sigma = sigma.masked_select(sigma > 1e-6 * sigma.max());
  torch::Tensor p = sigma / sigma.sum();
  return std::exp(-(p * p.log()).sum().item<double>());
}

std::vector<double> MeanRanks(const std::vector<double>& v) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    double below = 0, equal = 0;
    for (double w : v) below += w < v[i], equal += w == v[i];
    r[i] = below + (equal + 1) / 2;  // 1-based, ties share the mean
  }
  return r;
}

double ReferenceSpearman(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ra = MeanRanks(a), rb = MeanRanks(b);
  const double n = double(a.size());
  double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += ra[i] / n, mb += rb[i] / n;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

TEST_CASE("aoh model: RoPE-aware rank correlation (Table 6) equals an explicit-kernel reference") {
  torch::manual_seed(15);
  Gpt model(TinyModelConfig("rope", 8, 8));
  const double base = model->config().rope_base;
  auto rho = RopeSpearman(*model, 16);
  REQUIRE(rho.ok());
  REQUIRE(rho->size() == 2);
  torch::NoGradGuard no_grad;
  int distinct = 0;
  for (int64_t l = 0; l < 2; ++l) {
    std::vector<double> vanilla, aware;
    for (int64_t h = 0; h < 8; ++h) {
      torch::Tensor wq = QueryRows(*model, l, h), wk = KeyRows(*model, l, h);
      vanilla.push_back(ReferenceEffectiveRank(wq, wk, base, 0));
      double sum = 0;
      for (int64_t delta : {0, 1, 2, 4, 8, 16}) sum += ReferenceEffectiveRank(wq, wk, base, delta);
      aware.push_back(sum / 6);
    }
    const double expected = ReferenceSpearman(vanilla, aware);
    INFO("layer " << l);
    CHECK((*rho)[size_t(l)] == Approx(expected).margin(1e-9));
    distinct += expected < 1 - 1e-9;
  }
  CHECK(distinct > 0);  // the rotations reorder some heads: the correlation is not trivially 1
  // Without rotations the RoPE-aware ranking is the vanilla one: rho = 1 in every layer.
  auto same = RopeSpearman(*model, 0);
  REQUIRE(same.ok());
  for (double r : same.value()) CHECK(r == Approx(1.0).margin(1e-12));
  Gpt learned(TinyModelConfig("learned"));
  CHECK_FALSE(RopeSpearman(*learned, 16).ok());
}

}  // namespace
}  // namespace headlab::aoh
