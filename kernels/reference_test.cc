// Properties of the CPU reference (the oracle of the GPU tests) and of the shared block
// iteration spaces the kernels use to skip work.
#include "kernels/reference.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "kernels/head_mask.h"

namespace headlab {
namespace kernels {
namespace {

struct Problem {
  AttentionShape shape;
  std::vector<HeadSpec> heads;
  std::vector<float> q, k, v, alpha, rho, log_z;
  ReferenceProblem View() const { return {shape, heads.data(), q.data(), k.data(), v.data()}; }
};

Problem MakeProblem(int B, int T, int H, int G, int d, uint32_t seed) {
  Problem p;
  p.shape.batch = B;
  p.shape.seq_len = T;
  p.shape.heads = H;
  p.shape.kv_heads = G;
  p.shape.head_dim = d;
  p.shape.scale = 1.f / std::sqrt(float(d));
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01(0.f, 1.f);
  for (auto* t : {&p.q}) t->resize(size_t(B) * T * H * d);
  for (auto* t : {&p.k, &p.v}) t->resize(size_t(B) * T * G * d);
  for (auto* t : {&p.q, &p.k, &p.v})
    for (float& x : *t) x = n01(rng);
  p.alpha.resize(T);
  p.rho.resize(T);
  p.log_z.resize(T);
  for (int i = 0; i < T; ++i) {
    p.alpha[i] = n01(rng);
    p.rho[i] = n01(rng);
  }
  FixedLogZ(p.alpha.data(), p.rho.data(), T, p.log_z.data());
  p.heads.assign(H, HeadSpec{});
  return p;
}

HeadSpec Fixed(const Problem& p) {
  HeadSpec h;
  h.state = HeadState::kFixed;
  h.alpha = p.alpha.data();
  h.rho = p.rho.data();
  h.log_z = p.log_z.data();
  return h;
}

TEST_CASE("ordinary rows sum to one") {
  Problem p = MakeProblem(2, 37, 2, 1, 16, 1);
  for (float& x : p.v) x = 1.f;
  std::vector<float> o, lse;
  ReferenceForward(p.View(), Rounding::kNone, &o, &lse);
  for (float x : o) REQUIRE(x == Approx(1.0).margin(1e-6));
}

TEST_CASE("local with W >= T equals ordinary, forward and backward") {
  Problem p = MakeProblem(1, 29, 2, 2, 16, 2);
  std::vector<float> d_o(p.q.size());
  std::mt19937 rng(3);
  std::normal_distribution<float> n01;
  for (float& x : d_o) x = n01(rng);
  std::vector<float> o1, l1, o2, l2, dq1, dk1, dv1, dq2, dk2, dv2;
  ReferenceForward(p.View(), Rounding::kNone, &o1, &l1);
  ReferenceBackward(p.View(), d_o.data(), Rounding::kNone, &dq1, &dk1, &dv1);
  p.heads[1].state = HeadState::kLocal;
  p.heads[1].window = 29;
  ReferenceForward(p.View(), Rounding::kNone, &o2, &l2);
  ReferenceBackward(p.View(), d_o.data(), Rounding::kNone, &dq2, &dk2, &dv2);
  REQUIRE(o1 == o2);
  REQUIRE(l1 == l2);
  REQUIRE(dq1 == dq2);
  REQUIRE(dk1 == dk2);
  REQUIRE(dv1 == dv2);
}

TEST_CASE("fixed head equals explicit P V and gets zero Q/K gradients") {
  const int T = 23, d = 8;
  Problem p = MakeProblem(1, T, 1, 1, d, 4);
  p.heads[0] = Fixed(p);
  std::vector<float> o, lse;
  ReferenceForward(p.View(), Rounding::kNone, &o, &lse);
  for (int i = 0; i < T; ++i) {
    double row = 0;
    for (int c = 0; c < d; ++c) {
      double acc = 0;
      for (int j = 0; j <= i; ++j) {
        double pij = std::exp(double(p.alpha[j]) + p.rho[i - j] - p.log_z[i]);  // SAF eq. 3
        acc += pij * p.v[size_t(j) * d + c];
        if (c == 0) row += pij;
      }
      REQUIRE(o[size_t(i) * d + c] == Approx(acc).margin(1e-5));
    }
    REQUIRE(row == Approx(1.0).margin(1e-5));
    REQUIRE(lse[i] == p.log_z[i]);
  }
  std::vector<float> d_o(p.q.size(), 0.5f), dq, dk, dv;
  ReferenceBackward(p.View(), d_o.data(), Rounding::kNone, &dq, &dk, &dv);
  for (float x : dq) REQUIRE(x == 0.f);
  for (float x : dk) REQUIRE(x == 0.f);
  double dv_norm = 0;
  for (float x : dv) dv_norm += std::fabs(x);
  REQUIRE(dv_norm > 0);
}

TEST_CASE("streaming heads see exactly the sink and the recent window") {
  const int T = 20, d = 32;  // V = identity rows: O row i is P row i
  Problem p = MakeProblem(1, T, 1, 1, d, 5);
  for (int j = 0; j < T; ++j)
    for (int c = 0; c < d; ++c) p.v[size_t(j) * d + c] = (c == j) ? 1.f : 0.f;
  p.heads[0].state = HeadState::kStreaming;
  p.heads[0].sink = 3;
  p.heads[0].recent = 4;
  std::vector<float> o, lse;
  ReferenceForward(p.View(), Rounding::kNone, &o, &lse);
  for (int i = 0; i < T; ++i) {
    double row = 0;
    for (int j = 0; j < T; ++j) {
      bool visible = j <= i && (j < 3 || j > i - 4);
      float pij = o[size_t(i) * d + j];
      if (visible)
        REQUIRE(pij > 0.f);
      else
        REQUIRE(pij == 0.f);
      row += pij;
    }
    REQUIRE(row == Approx(1.0).margin(1e-5));
  }
  // sink 0 + recent W is local(W).
  std::vector<float> o2, lse2;
  p.heads[0].sink = 0;
  ReferenceForward(p.View(), Rounding::kNone, &o, &lse);
  p.heads[0] = HeadSpec{};
  p.heads[0].state = HeadState::kLocal;
  p.heads[0].window = 4;
  ReferenceForward(p.View(), Rounding::kNone, &o2, &lse2);
  REQUIRE(o == o2);
}

TEST_CASE("pruned heads output zeros and add no gradient") {
  Problem p = MakeProblem(1, 11, 2, 1, 8, 6);
  p.heads[0].state = HeadState::kPruned;
  std::vector<float> o, lse, dq, dk, dv, dk_alone, dv_alone, dq2;
  ReferenceForward(p.View(), Rounding::kNone, &o, &lse);
  for (int i = 0; i < 11; ++i)
    for (int c = 0; c < 8; ++c) REQUIRE(o[(size_t(i) * 2 + 0) * 8 + c] == 0.f);
  std::vector<float> d_o(p.q.size(), 1.f);
  ReferenceBackward(p.View(), d_o.data(), Rounding::kNone, &dq, &dk, &dv);
  for (int i = 0; i < 11; ++i)
    for (int c = 0; c < 8; ++c) REQUIRE(dq[(size_t(i) * 2 + 0) * 8 + c] == 0.f);
  // Only head 1 contributes: zeroing head 0's dO changes nothing.
  for (int i = 0; i < 11; ++i)
    for (int c = 0; c < 8; ++c) d_o[(size_t(i) * 2 + 0) * 8 + c] = 0.f;
  ReferenceBackward(p.View(), d_o.data(), Rounding::kNone, &dq2, &dk_alone, &dv_alone);
  REQUIRE(dk == dk_alone);
  REQUIRE(dv == dv_alone);
}

TEST_CASE("backward matches finite differences of sum(O * dO)") {
  Problem p = MakeProblem(1, 9, 4, 2, 8, 7);  // GQA: two query heads per KV head
  p.heads[1].state = HeadState::kLocal;
  p.heads[1].window = 3;
  p.heads[2].state = HeadState::kStreaming;
  p.heads[2].sink = 2;
  p.heads[2].recent = 2;
  p.heads[3] = Fixed(p);
  std::vector<float> d_o(p.q.size());
  std::mt19937 rng(8);
  std::normal_distribution<float> n01;
  for (float& x : d_o) x = n01(rng);
  auto loss = [&]() {
    std::vector<float> o, lse;
    ReferenceForward(p.View(), Rounding::kNone, &o, &lse);
    double l = 0;
    for (size_t i = 0; i < o.size(); ++i) l += double(o[i]) * d_o[i];
    return l;
  };
  std::vector<float> dq, dk, dv;
  ReferenceBackward(p.View(), d_o.data(), Rounding::kNone, &dq, &dk, &dv);
  const float eps = 1e-2f;
  for (auto [t, g] : {std::pair{&p.q, &dq}, std::pair{&p.k, &dk}, std::pair{&p.v, &dv}}) {
    for (size_t i = 0; i < t->size(); i += 7) {
      float keep = (*t)[i];
      (*t)[i] = keep + eps;
      double up = loss();
      (*t)[i] = keep - eps;
      double down = loss();
      (*t)[i] = keep;
      REQUIRE((*g)[i] == Approx((up - down) / (2 * eps)).margin(2e-3).epsilon(1e-2));
    }
  }
}

TEST_CASE("bf16 and fp16 rounding") {
  REQUIRE(RoundTo(1.0f, Rounding::kBF16) == 1.0f);
  REQUIRE(RoundTo(1.0f + 1.0f / 256, Rounding::kBF16) == 1.0f);  // tie -> even
  REQUIRE(RoundTo(1.0f + 3.0f / 256, Rounding::kBF16) == 1.0f + 4.0f / 256);
  REQUIRE(RoundTo(1.0f + 1.0f / 2048, Rounding::kF16) == 1.0f);  // tie -> even
  REQUIRE(RoundTo(1.0f + 3.0f / 2048, Rounding::kF16) == 1.0f + 4.0f / 2048);
  REQUIRE(std::isinf(RoundTo(70000.f, Rounding::kF16)));
  REQUIRE(RoundTo(0.1f, Rounding::kNone) == 0.1f);
}

TEST_CASE("the forward tile masks' row form agrees with KeyVisible") {
  struct Case {
    HeadState s;
    int w, sink, recent;
  };
  const Case cases[] = {{HeadState::kOrdinary, 0, 0, 0},   {HeadState::kFixed, 0, 0, 0},
                        {HeadState::kLocal, 1, 0, 0},      {HeadState::kLocal, 7, 0, 0},
                        {HeadState::kStreaming, 0, 0, 1},  {HeadState::kStreaming, 0, 5, 3},
                        {HeadState::kStreaming, 0, 40, 9}, {HeadState::kPruned, 0, 0, 0}};
  int visible = 0, hidden = 0;
  for (const Case& c : cases) {
    for (int fixed = 0; fixed < 80; ++fixed) {
      for (int base = 0; base < 80; base += 3) {
        const RowVisibility row = RowVisibilityOf(c.s, c.w, c.sink, c.recent, fixed, base);
        for (int off = 0; off < 64; ++off) {
          const bool want = KeyVisible(c.s, c.w, c.sink, c.recent, fixed, base + off);
          REQUIRE(row.Visible(off) == want);
          (want ? visible : hidden) += 1;
        }
      }
    }
  }
  REQUIRE(visible > 10000);  // both outcomes were exercised
  REQUIRE(hidden > 10000);
}

TEST_CASE("block iteration spaces cover every visible key and skip whole blocks") {
  const int T = 70;
  struct Case {
    HeadState s;
    int w, sink, recent;
  };
  for (Case c : {Case{HeadState::kOrdinary, 0, 0, 0}, Case{HeadState::kFixed, 0, 0, 0},
                 Case{HeadState::kLocal, 5, 0, 0}, Case{HeadState::kLocal, 17, 0, 0},
                 Case{HeadState::kStreaming, 0, 4, 9}, Case{HeadState::kStreaming, 0, 20, 3},
                 Case{HeadState::kStreaming, 0, 0, 1}}) {
    for (int blk : {1, 8, 16}) {
      for (int q0 = 0; q0 < T; q0 += blk) {
        int q1 = std::min(T, q0 + blk);
        SpanPair sp = KeySpanForQueries(c.s, c.w, c.sink, c.recent, q0, q1);
        REQUIRE(sp.hi0 <= sp.lo1 + (sp.hi1 == sp.lo1 ? T : 0));
        for (int q = q0; q < q1; ++q)
          for (int k = 0; k < T; ++k)
            if (KeyVisible(c.s, c.w, c.sink, c.recent, q, k))
              REQUIRE(((k >= sp.lo0 && k < sp.hi0) || (k >= sp.lo1 && k < sp.hi1)));
      }
      for (int k0 = 0; k0 < T; k0 += blk) {
        int k1 = std::min(T, k0 + blk);
        SpanPair sp = QuerySpanForKeys(c.s, c.w, c.sink, c.recent, k0, k1, T);
        for (int k = k0; k < k1; ++k)
          for (int q = 0; q < T; ++q)
            if (KeyVisible(c.s, c.w, c.sink, c.recent, q, k))
              REQUIRE(((q >= sp.lo0 && q < sp.hi0) || (q >= sp.lo1 && q < sp.hi1)));
      }
    }
  }
  // Local W = 5 at q0 = 64 skips keys below 60; streaming skips the middle.
  REQUIRE(KeySpanForQueries(HeadState::kLocal, 5, 0, 0, 64, 70).lo0 == 60);
  SpanPair st = KeySpanForQueries(HeadState::kStreaming, 0, 4, 9, 64, 70);
  REQUIRE(st.hi0 == 4);
  REQUIRE(st.lo1 == 56);
}

}  // namespace
}  // namespace kernels
}  // namespace headlab
