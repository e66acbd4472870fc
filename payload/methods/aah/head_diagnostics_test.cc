// The per-head attention diagnostics, dense and from log-normalisers, against a brute force
// over every (batch, query, head) with the kernels' own visibility rule (head_mask.h).
#include "payload/methods/aah/head_diagnostics.h"

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/head_mask.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aah {
namespace {

using kernels::HeadState;

struct TestHead {
  HeadState state;
  int window = 0, sink = 0, recent = 0;
  bool scores() const { return state != HeadState::kFixed && state != HeadState::kPruned; }
};

// ordinary, local(3), streaming(sink 2, recent 3), fixed, local(1), pruned.
const std::vector<TestHead> kHeads = {{HeadState::kOrdinary},           {HeadState::kLocal, 3},
                                      {HeadState::kStreaming, 0, 2, 3}, {HeadState::kFixed},
                                      {HeadState::kLocal, 1},           {HeadState::kPruned}};

// The layer's [6, H] table as aah_model.cc's StateTable builds it.
torch::Tensor Table() {
  std::vector<int64_t> v;
  for (int field = 0; field < 6; ++field)
    for (const TestHead& h : kHeads) {
      const int64_t values[6] = {h.window,
                                 h.sink,
                                 h.recent,
                                 h.state == HeadState::kLocal,
                                 h.state == HeadState::kStreaming,
                                 h.scores()};
      v.push_back(values[field]);
    }
  return torch::tensor(v, torch::kLong).view({6, -1});
}

bool Visible(const TestHead& h, int q, int k) {
  return kernels::KeyVisible(h.state == HeadState::kFixed ? HeadState::kPruned : h.state, h.window,
                             h.sink, h.recent, q, k);
}

// Brute force of the diagnostics' definition, in double: [H, 3].
std::vector<std::vector<double>> BruteForce(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), d = q.size(3), group = H / k.size(2);
  auto qa = q.accessor<float, 4>(), ka = k.accessor<float, 4>(), va = v.accessor<float, 4>();
  std::vector<std::vector<double>> out(size_t(H), std::vector<double>(3, 0.0));
  for (int64_t h = 0; h < H; ++h) {
    const TestHead& head = kHeads[size_t(h)];
    if (!head.scores()) continue;
    const int64_t g = h / group;
    double usage = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(size_t(T), -std::numeric_limits<double>::infinity());
        double m = -std::numeric_limits<double>::infinity(), count = 0;
        for (int64_t j = 0; j < T; ++j) {
          if (!Visible(head, int(i), int(j))) continue;
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += double(qa[b][i][h][c]) * double(ka[b][j][g][c]);
          s[size_t(j)] = dot / std::sqrt(double(d));
          m = std::max(m, s[size_t(j)]);
          ++count;
        }
        usage = std::max(usage, count);
        double z = 0;
        for (double sj : s) z += std::exp(sj - m);
        double entropy = 0;
        std::vector<double> o(size_t(d), 0.0);
        for (int64_t j = 0; j < T; ++j) {
          const double p = std::exp(s[size_t(j)] - m) / z;
          if (p == 0) continue;
          entropy -= p * std::log(p);
          for (int64_t c = 0; c < d; ++c) o[size_t(c)] += p * double(va[b][j][g][c]);
        }
        double norm = 0;
        for (double oc : o) norm += oc * oc;
        out[size_t(h)][0] += entropy / double(B * T);
        out[size_t(h)][1] += std::sqrt(norm) / double(B * T);
      }
    out[size_t(h)][2] = usage / double(T);
  }
  return out;
}

// A stand-in for the kernels' forward with log-normalisers: dense, in double, from the same
// visibility rule; rows with no visible key get o = 0 and lse = -inf (as pruned heads do).
std::pair<torch::Tensor, torch::Tensor> DenseAttend(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& values) {
  const int64_t T = q.size(1), H = q.size(2), d = q.size(3), group = H / k.size(2);
  torch::Tensor mask = torch::zeros({H, T, T}, torch::kBool);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) mask[h][i][j] = Visible(kHeads[size_t(h)], int(i), int(j));
  torch::Tensor qd = q.to(torch::kDouble).transpose(1, 2);  // [B, H, T, d]
  torch::Tensor kd =
      k.to(torch::kDouble).repeat_interleave(group, 2).transpose(1, 2);  // [B, H, T, d]
  torch::Tensor vd = values.to(torch::kDouble).repeat_interleave(group, 2).transpose(1, 2);
  torch::Tensor s = torch::matmul(qd, kd.transpose(-2, -1)) / std::sqrt(double(d));
  s = s.masked_fill(mask.logical_not().unsqueeze(0), -std::numeric_limits<double>::infinity());
  torch::Tensor lse = torch::logsumexp(s, -1);  // -inf for rows with no key
  torch::Tensor p = torch::exp(s - lse.unsqueeze(-1)).nan_to_num(0.0);
  torch::Tensor o = torch::matmul(p, vd).transpose(1, 2);  // [B, T, H, d]
  return {o.to(torch::kFloat), lse.to(torch::kFloat)};
}

// Entropy and output norm of every head that forms scores (the others' are unspecified).
void CheckAgainst(const torch::Tensor& got, const std::vector<std::vector<double>>& want) {
  REQUIRE(got.sizes() == torch::IntArrayRef({int64_t(want.size()), 2}));
  auto a = got.accessor<float, 2>();
  for (size_t h = 0; h < want.size(); ++h) {
    if (!kHeads[h].scores()) continue;
    for (size_t c = 0; c < 2; ++c) {
      INFO("head " << h << " diagnostic " << c);
      CHECK(double(a[int64_t(h)][int64_t(c)]) == Approx(want[h][c]).epsilon(1e-4).margin(1e-5));
    }
  }
}

// The layer's head states as payload/exec's HeadState (what HeadUsage reads).
headlab::HeadState ExecState(const TestHead& h) {
  headlab::HeadState s;
  switch (h.state) {
    case HeadState::kOrdinary:
      break;
    case HeadState::kLocal:
      s.mode = HeadMode::kLocal;
      s.window = h.window;
      break;
    case HeadState::kStreaming:
      s.mode = HeadMode::kStreaming;
      s.sink = h.sink;
      s.recent = h.recent;
      break;
    case HeadState::kFixed:
      s.mode = HeadMode::kFixed;
      break;
    default:
      s.mode = HeadMode::kPruned;
  }
  return s;
}

}  // namespace

TEST_CASE("aah diagnostics: dense and log-normaliser forms equal the brute force, with GQA") {
  torch::manual_seed(5);
  const int64_t B = 2, T = 9, H = int64_t(kHeads.size()), d = 8;
  for (int64_t kv : {H, int64_t(3), int64_t(2)}) {
    INFO("key/value heads " << kv);
    torch::Tensor q = torch::randn({B, T, H, d}) * 1.5;  // scores of a few units: peaked rows
    torch::Tensor k = torch::randn({B, T, kv, d}) * 1.5;
    torch::Tensor v = torch::randn({B, T, kv, d});
    const std::vector<std::vector<double>> want = BruteForce(q, k, v);
    // Heads without scores report zeros; usage is the most keys a query reads, over T:
    // T for the ordinary head, W for local(W), sink + recent for streaming.
    CHECK(want[0][2] == Approx(9.0 / 9));
    CHECK(want[1][2] == Approx(3.0 / 9));
    CHECK(want[2][2] == Approx(5.0 / 9));
    CHECK(want[4][0] == Approx(0.0).margin(1e-12));  // local(1): one key, zero entropy
    CheckAgainst(DenseDiagnostics(q, k, v, Table()), want);
    CheckAgainst(LseDiagnostics(q, k, v, DenseAttend), want);
    // Given the forward's output, one pass runs, over keys as values; the norm is o's.
    int passes = 0;
    AttendWithLse counted = [&](const torch::Tensor& q_, const torch::Tensor& k_,
                                const torch::Tensor& values) {
      ++passes;
      CHECK(values.data_ptr() == k_.data_ptr());
      return DenseAttend(q_, k_, values);
    };
    const torch::Tensor o = DenseAttend(q, k, v).first;
    CheckAgainst(OutputDiagnostics(q, k, o, counted), want);
    CHECK(passes == 1);
    std::vector<std::vector<double>> doubled = want;
    for (std::vector<double>& row : doubled) row[1] *= 2;
    CheckAgainst(OutputDiagnostics(q, k, 2 * o, DenseAttend), doubled);
    // The usage from the head's state alone equals the brute force's count; zero for heads
    // without scores.
    for (size_t h = 0; h < kHeads.size(); ++h) {
      INFO("head " << h);
      CHECK(FormsScores(ExecState(kHeads[h]).mode) == kHeads[h].scores());
      CHECK(HeadUsage(ExecState(kHeads[h]), T) == Approx(want[h][2]));
    }
  }
}

TEST_CASE("aah diagnostics: streaming usage counts the sink and recent keys once") {
  headlab::HeadState s;
  s.mode = HeadMode::kStreaming;
  s.sink = 4;
  s.recent = 8;
  CHECK(HeadUsage(s, 64) == Approx(12.0 / 64));
  CHECK(HeadUsage(s, 10) == Approx(1.0));  // the sink [0, 4) and recent [2, 10) overlap
  CHECK(HeadUsage(s, 3) == Approx(1.0));
  s.mode = HeadMode::kLocal;
  s.window = 100;
  CHECK(HeadUsage(s, 64) == Approx(1.0));
}

}  // namespace headlab::aah
