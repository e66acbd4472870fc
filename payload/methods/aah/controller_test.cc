#include "payload/methods/aah/controller.h"

#include <cmath>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aah {
namespace {

AahOptions Options(Regime regime, Control control = Control::kNone) {
  AahOptions o;
  o.regime = regime;
  o.control = control;
  o.context = 64;
  o.windows = ScaledWindows(64);  // 8, 16, 32, 64
  o.min_window = 8;
  o.hierarchy = DefaultHierarchy(regime);
  o.scorer_hidden = 16;
  o.freeze_step = 10;
  o.fixed_window = 16;
  REQUIRE(ValidateOptions(o).ok());
  return o;
}

// Deterministic pseudo-random observations: head h of layer l at update t.
std::vector<HeadObservation> Observe(int layers, int heads, int t) {
  std::vector<HeadObservation> obs(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l)
    for (int h = 0; h < heads; ++h) {
      auto f = [&](int i) { return float(1.0 + 0.5 * std::sin(1.3 * h + 0.7 * i + 0.11 * t + l)); };
      obs[size_t(l)].qkv.push_back({f(0), f(1), f(2) * (h % 3 + 1), f(3), f(4), f(5)});
      obs[size_t(l)].attention.push_back({f(6) * 2, f(7), f(8) * 0.25f});
    }
  return obs;
}

}  // namespace

TEST_CASE("aah base feature: mean-absolute stats then zero diagnostics when missing") {
  Vec x = BaseFeature({1, 2, 3, 4, 5, 6}, nullptr);
  CHECK(x == Vec{1, 2, 3, 4, 5, 6, 0, 0, 0});
  std::array<float, 3> prev = {7, 8, 9};
  CHECK(BaseFeature({1, 2, 3, 4, 5, 6}, &prev) == Vec{1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("aah feature EMA starts from the first observation") {
  FeatureEma ema(0.9);
  CHECK(ema.Update({{10.0f}})[0][0] == 10.0f);
  CHECK(ema.Update({{0.0f}})[0][0] == Approx(9.0f));
  FeatureEma off(0.0);  // no-feature-EMA control
  off.Update({{10.0f}});
  CHECK(off.Update({{0.0f}})[0][0] == 0.0f);
}

TEST_CASE("aah resolution EMA starts at full attention") {
  ResolutionEma r(3, 4, 0.15);
  CHECK(r.index() == std::vector<int>{3, 3, 3});
  // round(0.15 * 3 + 0.85 * c): 0 -> round(0.45) = 0, 2 -> round(2.15) = 2.
  CHECK(r.Update({0, 2, 3}) == std::vector<int>{0, 2, 3});
  AahController c(Options(Regime::kFullAdaptive), 2, 8, 0);
  for (const auto& layer : c.windows())
    for (int64_t w : layer) CHECK(w == 64);
  CHECK(AttentionCoverageRatio(c.windows(), 64) == 1.0);
}

// AAH §5.8 with K = 4 candidates and beta = 0.15: beta c~ + (1 - beta) c = c + beta (c~ - c)
// is within 0.15 * 3 = 0.45 < 1/2 of c, so round() returns c: the rule never smooths.
// In general some (c~, c) changes the index iff beta (K - 1) >= 1/2 (c~ = K - 1, c = 0).
TEST_CASE("aah resolution EMA: the paper's rounded rule is the identity at beta 0.15, K = 4") {
  for (int prev = 0; prev < 4; ++prev)
    for (int c = 0; c < 4; ++c) {
      ResolutionEma r(1, 4, 0.15);
      REQUIRE(r.FromJson(Json::array({prev}), "test").ok());
      CHECK(r.Update({c}) == std::vector<int>{c});
    }
  for (int k = 2; k <= 8; ++k)
    for (int b = 0; b < 100; ++b) {
      const double beta = b / 100.0;
      bool changed = false;
      for (int prev = 0; prev < k; ++prev)
        for (int c = 0; c < k; ++c) {
          ResolutionEma r(1, k, beta);
          REQUIRE(r.FromJson(Json::array({prev}), "test").ok());
          changed = changed || r.Update({c})[0] != c;
        }
      INFO("K = " << k << ", beta = " << beta);
      CHECK(changed == (beta * (k - 1) >= 0.5));
    }
}

TEST_CASE(
    "aah resolution EMA: the running-state variant obeys the same bound and smooths above it") {
  // beta = 0.15, K = 4: the unrounded state also stays within 0.45 of c.
  ResolutionEma running(1, 4, 0.15, /*running=*/true);
  uint64_t x = 12345;
  for (int t = 0; t < 1000; ++t) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int c = int((x >> 33) % 4);
    REQUIRE(running.Update({c}) == std::vector<int>{c});
  }
  // beta = 0.85, every decision 0 from the full-window start: s_t = 3 * 0.85^t (closed
  // form), executed round(s_t); the paper's rounded rule at 0.85 never leaves index 3.
  ResolutionEma slow(1, 4, 0.85, /*running=*/true);
  ResolutionEma stuck(1, 4, 0.85);
  for (int t = 1; t <= 30; ++t) {
    INFO("t = " << t);
    const double s = 3 * std::pow(0.85, t);
    CHECK(slow.Update({0})[0] == int(std::lround(s)));
    CHECK(slow.state()[0] == Approx(s).epsilon(1e-12));
    CHECK(stuck.Update({0})[0] == 3);
  }
  // The variant's state survives a checkpoint round trip; the other rule's state is refused.
  ResolutionEma copy(1, 4, 0.85, /*running=*/true);
  REQUIRE(copy.FromJson(slow.ToJson(), "test").ok());
  CHECK(copy.state() == slow.state());
  CHECK(copy.index() == slow.index());
  CHECK(stuck.FromJson(slow.ToJson(), "test").code() == Status::Code::kCorruption);
}

TEST_CASE("aah parent clamp never lets a child exceed its parent") {
  AahController c(Options(Regime::kFullAdaptive), 3, 16, 5);
  int levels_seen = 0;
  for (int t = 0; t < 20; ++t) {
    REQUIRE(c.Update(Observe(3, 16, t), 0).ok());
    for (int l = 0; l < 3; ++l) {
      const LayerController& lc = c.layer(l);
      const Topology& topo = lc.topology();
      const Selection& s = lc.last_selection();
      levels_seen = std::max(levels_seen, topo.levels());
      for (int r = 0; r + 1 < topo.levels(); ++r)
        for (size_t i = 0; i < s.constrained[size_t(r)].size(); ++i) {
          const int parent = topo.parent[size_t(r)][i];
          CHECK(s.constrained[size_t(r)][i] <= s.constrained[size_t(r + 1)][size_t(parent)]);
          CHECK(s.constrained[size_t(r)][i] ==
                std::min(s.raw[size_t(r)][i], s.constrained[size_t(r + 1)][size_t(parent)]));
        }
      for (int h = 0; h < 16; ++h)
        CHECK(s.head_index[size_t(h)] == s.constrained[0][size_t(topo.head_group[size_t(h)])]);
    }
  }
  CHECK(levels_seen >= 2);  // the clamp was exercised on a real hierarchy
}

TEST_CASE("aah grouping off bypasses pairing and parent constraints") {
  const int H = 6;
  AahController c(Options(Regime::kGroupingOff), 1, H, 3);
  auto obs = Observe(1, H, 0);
  REQUIRE(c.Update(obs, 0).ok());
  const LayerController& lc = c.layer(0);
  CHECK(lc.levels_used() == 1);
  CHECK(lc.topology().head_group == std::vector<int>{0, 1, 2, 3, 4, 5});
  // Every head is scored alone by f_base on u_h = [x_h, 0, 0, x_h - mean, 1/H].
  std::vector<Vec> x;
  for (int h = 0; h < H; ++h) x.push_back(BaseFeature(obs[0].qkv[size_t(h)], nullptr));
  std::vector<int> all = {0, 1, 2, 3, 4, 5};
  Vec mean = MeanOf(x, all);
  for (int h = 0; h < H; ++h) {
    Vec z =
        lc.base_scorer().Logits(EnrichedInput(x[size_t(h)], 0.0f, x[size_t(h)], mean, 1.0f / H));
    CHECK(lc.last_selection().head_index[size_t(h)] == Argmax(z.data(), int(z.size())));
  }
}

// Observations of 8 heads whose Q/K/V statistics are identical at update 0 (heads at
// their initialisation) and then follow one of four roles; from update `switch_at` on the
// roles are re-dealt (role h / 2 instead of h % 4). Roles 0/1 and 2/3 are the closer pairs.
// Attention diagnostics follow the same roles (identical at update 0).
std::vector<HeadObservation> RoleObservations(int u, int switch_at) {
  HeadObservation obs;
  for (int h = 0; h < 8; ++h) {
    const int role = u >= switch_at ? h / 2 : h % 4;
    std::array<float, 6> qkv = {1, 1, 1, 1, 1, 1};
    if (u > 0) {
      qkv[size_t(role)] = 20;
      if (role % 2 == 1) qkv[size_t(role - 1)] = 12;  // role 1 near role 0, 3 near 2
    }
    obs.qkv.push_back(qkv);
    obs.attention.push_back(u > 0 ? std::array<float, 3>{1.0f + 0.5f * float(role), 1.0f, 0.5f}
                                  : std::array<float, 3>{2.0f, 1.0f, 1.0f});
  }
  return {obs};
}

TEST_CASE(
    "aah topology cache: shallow freeze and deep reuse cache once the features are meaningful") {
  AahOptions o = Options(Regime::kDeepReuse);
  AahController probe(o, 1, 8, 1);
  // Default cache_step -1: the first update u with 0.9^u <= 1/2, u = 7 (0.9^6 = 0.53).
  for (int u = 0; u < 9; ++u) {
    INFO("update " << u);
    CHECK(probe.MayCache(5 * u) == (u >= 7));
    REQUIRE(probe.Update(RoleObservations(u, 100), 5 * u).ok());
  }
  // cache_step >= 0: from that step on, but never at the first update (zero diagnostics).
  o.cache_step = 0;
  AahController at0(o, 1, 8, 1);
  CHECK_FALSE(at0.MayCache(0));
  REQUIRE(at0.Update(RoleObservations(0, 100), 0).ok());
  CHECK(at0.MayCache(5));
  o.cache_step = 20;
  AahController at20(o, 1, 8, 1);
  REQUIRE(at20.Update(RoleObservations(0, 100), 0).ok());
  CHECK_FALSE(at20.MayCache(15));
  CHECK(at20.MayCache(20));
  AahController no_ema(Options(Regime::kDeepReuse, Control::kNoFeatureEma), 1, 8, 1);
  REQUIRE(no_ema.Update(RoleObservations(0, 100), 0).ok());
  CHECK(no_ema.MayCache(5));  // alpha = 0: x_bar = x holds observed diagnostics from u = 1
}

// Full attention is ordinary heads at any context, also where the candidates stop below it
// (the paper's [512, 1024, 2048, 4096] at T = 8192); the adaptive regimes start at the
// largest candidate (§5.8's full-window index).
TEST_CASE("aah full regime: every head at the context when the candidates stop short") {
  AahOptions o = Options(Regime::kFull);
  o.context = 128;  // candidates 8 .. 64
  REQUIRE(ValidateOptions(o).ok());
  AahController full(o, 2, 4, 1);
  for (const auto& layer : full.windows()) CHECK(layer == std::vector<int64_t>(4, 128));
  AahOptions a = Options(Regime::kFullAdaptive);
  a.context = 128;
  REQUIRE(ValidateOptions(a).ok());
  AahController adaptive(a, 2, 4, 1);
  for (const auto& layer : adaptive.windows()) CHECK(layer == std::vector<int64_t>(4, 64));
}

// The five regimes of AAH §7.1 on the role observations: Full never updates; Grouping off
// has one item per head; Full adaptive follows the features; Shallow freeze freezes a
// feature-derived [2] topology and Deep practical reuse a feature-derived level 0 of four
// groups (two levels) at update 7, then keeps them when the roles change. Deep reuse
// equals Full adaptive until its cached partition and the features part ways (same
// seeded scorers, same hierarchy), and the window assignments differ where the regimes do.
TEST_CASE("aah five regimes: different assignments where AAH §7.1 says they differ") {
  const int kUpdates = 50, kSwitch = 12, kCache = 7;
  const std::vector<int> bipartition = {0, 1, 0, 1, 0, 1, 0, 1};  // identical heads (§5.4 ties)
  const std::vector<int> roles = {0, 1, 2, 3, 0, 1, 2, 3};        // h % 4
  const std::vector<int> new_roles = {0, 0, 1, 1, 2, 2, 3, 3};    // h / 2
  AahController full(Options(Regime::kFull), 1, 8, 3);
  AahController off(Options(Regime::kGroupingOff), 1, 8, 3);
  AahController adaptive(Options(Regime::kFullAdaptive), 1, 8, 3);
  AahController shallow(Options(Regime::kShallowFreeze), 1, 8, 3);
  AahController deep(Options(Regime::kDeepReuse), 1, 8, 3);
  std::vector<WindowMap> w_off, w_adaptive, w_shallow, w_deep;
  // The smoothed features, computed here from §5.3 for the expected partitions: x_u holds
  // update u's Q/K/V statistics and update u-1's diagnostics (zero at u = 0).
  std::vector<Vec> xbar(8);
  std::vector<int> shallow_at_cache;
  for (int u = 0; u < kUpdates; ++u) {
    INFO("update " << u);
    const int64_t step = 5 * u;
    auto obs = RoleObservations(u, kSwitch);
    const auto prev = u > 0 ? RoleObservations(u - 1, kSwitch) : obs;
    for (int h = 0; h < 8; ++h) {
      Vec x(obs[0].qkv[size_t(h)].begin(), obs[0].qkv[size_t(h)].end());
      for (int i = 0; i < 3; ++i)
        x.push_back(u > 0 ? prev[0].attention[size_t(h)][size_t(i)] : 0.0f);
      if (u == 0) xbar[size_t(h)] = x;
      for (size_t i = 0; u > 0 && i < x.size(); ++i)
        xbar[size_t(h)][i] = 0.9f * xbar[size_t(h)][i] + (1 - 0.9f) * x[i];
    }
    CHECK_FALSE(full.Due(step));
    for (AahController* c : {&off, &adaptive, &shallow, &deep}) REQUIRE(c->Update(obs, step).ok());
    w_off.push_back(off.windows());
    w_adaptive.push_back(adaptive.windows());
    w_shallow.push_back(shallow.windows());
    w_deep.push_back(deep.windows());
    const Topology& a = adaptive.layer(0).topology();
    const Topology& s = shallow.layer(0).topology();
    const Topology& d = deep.layer(0).topology();
    CHECK(off.layer(0).topology().head_group == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
    CHECK(off.layer(0).levels_used() == 1);
    CHECK(s.levels() == 1);
    CHECK(s.items(0) == 2);
    if (u == 0) {  // heads at init: every regime with grouping sees the forced bipartition
      CHECK(a.head_group == bipartition);
      CHECK(d.head_group == bipartition);
    }
    if (u == kCache) {
      CHECK(d.head_group == roles);  // four feature-derived groups, cached now
      CHECK(d.head_group == Level0Partition(xbar, 0.98f, 16));
      CHECK(d.levels() == 2);  // 4 > 2 top items: one upper level of 2 parents
      CHECK(s.head_group == Level0Partition(xbar, 0.98f, 2));
      CHECK(s.head_group == std::vector<int>{0, 0, 1, 1, 0, 0, 1, 1});  // closer roles merged
      shallow_at_cache = s.head_group;
    }
    if (u < kCache) {  // not cached yet: deep reuse recomputes exactly like full adaptive
      CHECK(d.head_group == a.head_group);
      CHECK(w_deep.back() == w_adaptive.back());
    }
    if (u > kCache) {
      CHECK(d.head_group == roles);
      CHECK(s.head_group == shallow_at_cache);
    }
  }
  CHECK(adaptive.layer(0).topology().head_group == new_roles);  // followed the re-dealt roles
  CHECK(deep.layer(0).topology().head_group == roles);          // kept its cache
  CHECK(AttentionCoverageRatio(full.windows(), 64) == 1.0);
  auto differ_after = [](const std::vector<WindowMap>& a, const std::vector<WindowMap>& b,
                         int from) {
    for (size_t u = size_t(from); u < a.size(); ++u)
      if (a[u] != b[u]) return true;
    return false;
  };
  CHECK(differ_after(w_deep, w_shallow, kCache));
  CHECK(differ_after(w_deep, w_adaptive, kSwitch));
  CHECK(differ_after(w_off, w_adaptive, 0));
  CHECK(differ_after(w_off, w_deep, 0));
  CHECK(differ_after(w_shallow, w_adaptive, 0));
}

TEST_CASE("aah regime off: a controller without candidates keeps every head ordinary") {
  AahOptions o;  // regime off, no windows
  o.context = 64;
  AahController c(o, 2, 4, 0);
  CHECK_FALSE(c.Due(0));
  CHECK(c.windows() == WindowMap(2, std::vector<int64_t>(4, 64)));
}

TEST_CASE("aah control schedule and controls") {
  AahController adaptive(Options(Regime::kFullAdaptive), 1, 8, 0);
  CHECK(adaptive.Due(0));
  CHECK_FALSE(adaptive.Due(3));
  CHECK(adaptive.Due(5));
  AahController frozen(Options(Regime::kFullAdaptive, Control::kFreezeAfterWarmup), 1, 8, 0);
  CHECK(frozen.Due(5));
  CHECK_FALSE(frozen.Due(10));
  AahController fixed(Options(Regime::kFullAdaptive, Control::kFixedWindow), 2, 8, 0);
  CHECK_FALSE(fixed.Due(0));
  CHECK(AttentionCoverageRatio(fixed.windows(), 64) == Approx(16.0 / 64));
  AahController off(Options(Regime::kFullAdaptive, Control::kControlOff), 1, 8, 0);
  // Only an updating controller that may narrow windows moves them (SDPA's preparation).
  CHECK(adaptive.MovesWindows());
  CHECK(frozen.MovesWindows());
  CHECK_FALSE(fixed.MovesWindows());
  CHECK(off.Due(0));
  CHECK_FALSE(off.MovesWindows());
  CHECK_FALSE(AahController(Options(Regime::kFull), 1, 8, 0).MovesWindows());
  REQUIRE(off.Update(Observe(1, 8, 0), 0).ok());
  CHECK(off.levels_used() >= 1);
  CHECK(AttentionCoverageRatio(off.windows(), 64) == 1.0);

  // Shuffle-post-select keeps each layer's multiset of windows.
  AahController plain(Options(Regime::kFullAdaptive), 2, 8, 9);
  AahController shuffled(Options(Regime::kFullAdaptive, Control::kShufflePostSelect), 2, 8, 9);
  for (int t = 0; t < 4; ++t) {
    REQUIRE(plain.Update(Observe(2, 8, t), 0).ok());
    REQUIRE(shuffled.Update(Observe(2, 8, t), 0).ok());
  }
  for (int l = 0; l < 2; ++l) {
    auto a = plain.windows()[size_t(l)], b = shuffled.windows()[size_t(l)];
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    CHECK(a == b);
  }
  // Random-window: decisions come from the seeded draw, so two seeds differ somewhere.
  AahController r1(Options(Regime::kFullAdaptive, Control::kRandomWindow), 4, 16, 1);
  AahController r2(Options(Regime::kFullAdaptive, Control::kRandomWindow), 4, 16, 2);
  REQUIRE(r1.Update(Observe(4, 16, 0), 0).ok());
  REQUIRE(r2.Update(Observe(4, 16, 0), 0).ok());
  CHECK(r1.windows() != r2.windows());
  CHECK(r1.Update(Observe(3, 16, 0), 0).code() == Status::Code::kInvalidArgument);
  // A bad observation of the last layer changes no layer and counts no update.
  std::vector<HeadObservation> bad = Observe(4, 16, 1);
  bad.back().qkv.pop_back();
  const WindowMap before = r1.windows();
  const std::vector<std::vector<int>> index = r1.indices();
  CHECK(r1.Update(bad, 5).code() == Status::Code::kInvalidArgument);
  CHECK(r1.windows() == before);
  CHECK(r1.indices() == index);
  CHECK(r1.updates() == 1);
}

TEST_CASE("aah controller state survives a round trip and reproduces the same windows") {
  for (Control control :
       {Control::kNone, Control::kShufflePostSelect, Control::kFixedRandomGrouping}) {
    AahOptions o = Options(Regime::kDeepReuse, control);
    AahController a(o, 2, 8, 11);
    for (int t = 0; t < 3; ++t) REQUIRE(a.Update(Observe(2, 8, t), 0).ok());
    const std::string state = a.SaveState();
    AahController b(o, 2, 8, 999);  // another seed: everything must come from the state
    REQUIRE(b.LoadState(state, "ckpt").ok());
    CHECK(b.windows() == a.windows());
    CHECK(b.SaveState() == state);
    for (int t = 3; t < 8; ++t) {
      REQUIRE(a.Update(Observe(2, 8, t), 0).ok());
      REQUIRE(b.Update(Observe(2, 8, t), 0).ok());
      CHECK(b.windows() == a.windows());
    }
    AahController other(Options(Regime::kShallowFreeze), 2, 8, 11);
    CHECK(other.LoadState(state, "ckpt").code() == Status::Code::kCorruption);
    CHECK(b.LoadState("{", "ckpt").code() == Status::Code::kCorruption);
  }
}

}  // namespace headlab::aah
