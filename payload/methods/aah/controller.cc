// AAH §5.3-5.8: the hierarchy-aware window controller.
#include "payload/methods/aah/controller.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace headlab::aah {
namespace {

// SplitMix64: decorrelates the per-layer, per-purpose seeds derived from the run seed.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool HasHierarchy(Regime r) {
  return r == Regime::kFullAdaptive || r == Regime::kShallowFreeze || r == Regime::kDeepReuse;
}

}  // namespace

Vec BaseFeature(const std::array<float, 6>& qkv, const std::array<float, 3>* prev) {
  Vec x(qkv.begin(), qkv.end());
  for (int i = 0; i < 3; ++i)
    x.push_back(prev ? (*prev)[size_t(i)] : 0.0f);  // §5.3: zero when missing
  return x;
}

Selection SelectWindows(const Topology& t, const std::vector<LevelFeatures>& f,
                        const BaseScorer& base, const JointSiblingScorer& joint_scorer, bool joint,
                        bool parent_constraint) {
  const int R = t.levels();
  Selection s;
  s.raw.resize(size_t(R));
  for (int r = 0; r < R; ++r) {
    const LevelFeatures& lf = f[size_t(r)];
    const int n = int(lf.g.size());
    std::vector<int> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    const Vec mean = MeanOf(lf.g, all);
    const float eta = LevelCoordinate(r, R);
    std::vector<Vec> u(static_cast<size_t>(n)), z(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      // §5.5: at the top p = g, so g - p is the zero vector.
      const Vec& p =
          r + 1 < R ? f[size_t(r + 1)].g[size_t(t.parent[size_t(r)][size_t(i)])] : lf.g[size_t(i)];
      u[size_t(i)] = EnrichedInput(lf.g[size_t(i)], eta, p, mean, lf.size_fraction[size_t(i)]);
      z[size_t(i)] = base.Logits(u[size_t(i)]);
    }
    if (joint) {
      // §5.6: sibling pairs' joint logits replace their base logits. Siblings = children
      // of one parent (index order); the top-level items are siblings of the root.
      std::vector<std::vector<int>> sibs;
      if (r + 1 < R) {
        sibs.resize(size_t(t.items(r + 1)));
        for (int i = 0; i < n; ++i) sibs[size_t(t.parent[size_t(r)][size_t(i)])].push_back(i);
      } else {
        sibs.push_back(all);
      }
      for (const auto& group : sibs)
        for (size_t k = 0; k + 1 < group.size(); k += 2) {
          const int a = group[k], b = group[k + 1];
          auto [za, zb] = joint_scorer.Logits(u[size_t(a)], u[size_t(b)]);
          z[size_t(a)] = std::move(za);
          z[size_t(b)] = std::move(zb);
        }
    }
    for (int i = 0; i < n; ++i)
      s.raw[size_t(r)].push_back(Argmax(z[size_t(i)].data(), int(z[size_t(i)].size())));
  }
  // §5.7: the top uses its raw choice; below, c = min(c_hat, c_parent), top-down.
  s.constrained = s.raw;
  for (int r = R - 2; r >= 0 && parent_constraint; --r)
    for (size_t i = 0; i < s.constrained[size_t(r)].size(); ++i) {
      int& c = s.constrained[size_t(r)][i];
      c = std::min(c, s.constrained[size_t(r + 1)][size_t(t.parent[size_t(r)][i])]);
    }
  // §5.8: c_h = c_group(h)^(0).
  for (int g : t.head_group) s.head_index.push_back(s.constrained[0][size_t(g)]);
  return s;
}

LayerController::LayerController(const AahOptions& o, int heads, uint64_t seed)
    : o_(o),
      heads_(heads),
      ema_(o.control == Control::kNoFeatureEma ? 0.0 : o.feature_ema),
      resolution_(heads, int(o.windows.size()), o.resolution_ema,
                  o.resolution_state == ResolutionState::kRunning),
      rng_(Mix(seed ^ 0x5EEDC0DEull)) {
  // §5.7: scorer weights are seeded AAH state from the run seed, never gradient-trained.
  Rng init(Mix(seed));
  const int K = int(o.windows.size());
  base_ = BaseScorer(K, int(o.scorer_hidden), &init);
  joint_ = JointSiblingScorer(K, int(o.scorer_hidden), &init);
  topology_.head_group.resize(size_t(heads));
  std::iota(topology_.head_group.begin(), topology_.head_group.end(), 0);
  // Regime off (no candidates) and Full attention (§7.1: ordinary heads, ACR 1 by
  // definition, even where the largest candidate is below the context): every head ordinary.
  if (o.windows.empty() || o.regime == Regime::kFull)
    windows_.assign(size_t(heads), o.context);
  else if (o.control == Control::kFixedWindow)
    windows_.assign(size_t(heads), std::min(o.fixed_window, o.context));
  else
    SetWindows(resolution_.index());  // the full-window index: ordinary attention (§5.8)
}

void LayerController::SetWindows(const std::vector<int>& index) {
  windows_.clear();
  for (int c : index) {
    // §5.8: W_h = clamp(W[c_tilde_h], W_min, T) after clamping c_tilde to the candidates.
    const int k = std::clamp(c, 0, int(o_.windows.size()) - 1);
    windows_.push_back(std::clamp(o_.windows[size_t(k)], o_.min_window, o_.context));
  }
  if (o_.control == Control::kShufflePostSelect)  // same multiset, structure destroyed
    std::shuffle(windows_.begin(), windows_.end(), rng_.gen());
}

std::vector<int> LayerController::Level0(const std::vector<Vec>& xbar, bool may_cache) {
  const int cap = MaxLevel0Groups(o_.hierarchy);
  const float tau = float(o_.cluster_threshold);
  if (o_.control == Control::kFixedRandomGrouping) {
    if (cached_level0_.empty()) {
      // The feature partition's group sizes with heads assigned at random, fixed for the run.
      std::vector<int> p = Level0Partition(xbar, tau, cap);
      std::vector<int> order(static_cast<size_t>(heads_));
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng_.gen());
      std::vector<int> sorted = p;
      std::sort(sorted.begin(), sorted.end());
      cached_level0_.assign(size_t(heads_), 0);
      for (int i = 0; i < heads_; ++i) cached_level0_[size_t(order[size_t(i)])] = sorted[size_t(i)];
      // Renumber by first member so sibling order follows head order.
      std::vector<int> first;
      for (int& g : cached_level0_) {
        auto it = std::find(first.begin(), first.end(), g);
        if (it == first.end())
          first.push_back(g), g = int(first.size()) - 1;
        else
          g = int(it - first.begin());
      }
    }
    return cached_level0_;
  }
  if (o_.regime == Regime::kDeepReuse) {  // cached level-0 partition (§7.1, §8)
    if (!cached_level0_.empty()) return cached_level0_;
    std::vector<int> p = Level0Partition(xbar, tau, cap);
    if (may_cache) cached_level0_ = p;  // reused from here on; recomputed until then
    return p;
  }
  return Level0Partition(xbar, tau, cap);
}

void LayerController::Update(const HeadObservation& obs, bool may_cache) {
  if (o_.windows.empty()) return;  // regime off
  std::vector<Vec> x;
  for (int h = 0; h < heads_; ++h)
    x.push_back(BaseFeature(obs.qkv[size_t(h)],
                            prev_attention_.empty() ? nullptr : &prev_attention_[size_t(h)]));
  if (obs.attention.size() == size_t(heads_)) prev_attention_ = obs.attention;
  const std::vector<Vec>& xbar = ema_.Update(x);  // §5.3

  const bool hier = HasHierarchy(o_.regime);
  if (!hier) {
    // Grouping off: every head its own level-0 item, one level, no parents (§7.1).
    topology_ = Topology{};
    topology_.head_group.resize(size_t(heads_));
    std::iota(topology_.head_group.begin(), topology_.head_group.end(), 0);
  } else if (!(o_.regime == Regime::kShallowFreeze && topology_frozen_)) {
    std::vector<int> level0 = Level0(xbar, may_cache);
    Topology base;
    base.head_group = level0;
    std::vector<Vec> g0 = AggregateFeatures(base, xbar)[0].g;
    topology_ = BuildUpperLevels(level0, g0, o_.hierarchy, float(o_.norm_penalty));
    // Shallow freeze: the feature-derived [2] topology is frozen once features are
    // meaningful (§7.1); until then it follows the features like full_adaptive's.
    if (o_.regime == Regime::kShallowFreeze) topology_frozen_ = may_cache;
  }
  levels_used_ = topology_.levels();
  const std::vector<LevelFeatures> f = AggregateFeatures(topology_, xbar);
  const bool joint = hier && o_.control != Control::kIndependentScoring;
  const bool parents = hier && o_.control != Control::kNoParentConstraint;
  selection_ = SelectWindows(topology_, f, base_, joint_, joint, parents);

  std::vector<int> c = selection_.head_index;
  if (o_.control == Control::kRandomWindow)
    for (int& ci : c) ci = int(rng_.Below(int64_t(o_.windows.size())));
  if (o_.control == Control::kControlOff) return;  // windows stay at the full-span start
  SetWindows(resolution_.Update(c));               // §5.8
}

Json LayerController::ToJson() const {
  std::ostringstream rng;
  rng << rng_.gen();
  Json prev = Json::array();
  for (const auto& a : prev_attention_) prev.push_back({a[0], a[1], a[2]});
  return {{"feature_ema", ema_.ToJson()},
          {"resolution_ema", resolution_.ToJson()},
          {"base_scorer", base_.mlp().ToJson()},
          {"joint_scorer", joint_.mlp().ToJson()},
          {"rng", rng.str()},
          {"prev_attention", prev},
          {"cached_level0", cached_level0_},
          {"topology_frozen", topology_frozen_},
          {"head_group", topology_.head_group},
          {"parent", topology_.parent},
          {"windows", windows_},
          {"levels_used", levels_used_}};
}

Status LayerController::FromJson(const Json& j, const std::string& what) {
  HEADLAB_RETURN_IF_ERROR(ema_.FromJson(j.at("feature_ema"), what));
  HEADLAB_RETURN_IF_ERROR(resolution_.FromJson(j.at("resolution_ema"), what));
  HEADLAB_RETURN_IF_ERROR(base_.mlp().FromJson(j.at("base_scorer"), what + ": base scorer"));
  HEADLAB_RETURN_IF_ERROR(joint_.mlp().FromJson(j.at("joint_scorer"), what + ": joint scorer"));
  std::istringstream rng(j.at("rng").get<std::string>());
  rng >> rng_.gen();
  if (rng.fail()) return Status::Corruption(what + ": unreadable generator state");
  prev_attention_.clear();
  for (const Json& a : j.at("prev_attention"))
    prev_attention_.push_back({a.at(0).get<float>(), a.at(1).get<float>(), a.at(2).get<float>()});
  cached_level0_ = j.at("cached_level0").get<std::vector<int>>();
  topology_frozen_ = j.at("topology_frozen").get<bool>();
  topology_.head_group = j.at("head_group").get<std::vector<int>>();
  topology_.parent = j.at("parent").get<std::vector<std::vector<int>>>();
  windows_ = j.at("windows").get<std::vector<int64_t>>();
  levels_used_ = j.at("levels_used").get<int>();
  if (topology_.head_group.size() != size_t(heads_) || windows_.size() != size_t(heads_) ||
      (!prev_attention_.empty() && prev_attention_.size() != size_t(heads_)))
    return Status::Corruption(what + ": state is for another number of heads");
  return Status::Ok();
}

AahController::AahController(const AahOptions& o, int layers, int heads, uint64_t seed)
    : o_(o), heads_(heads) {
  for (int l = 0; l < layers; ++l)
    layers_.emplace_back(o, heads, Mix(seed * 1000003ull + uint64_t(l)));
}

bool AahController::Due(int64_t step) const {
  if (!Controls()) return false;
  if (o_.control == Control::kFreezeAfterWarmup && step >= o_.freeze_step) return false;
  return step % o_.control_every == 0;  // §5.3: every control_every steps, cached between
}

bool AahController::Controls() const {
  return o_.regime != Regime::kOff && o_.regime != Regime::kFull &&
         o_.control != Control::kFixedWindow;
}

bool AahController::MovesWindows() const {
  return Controls() && o_.control != Control::kControlOff;
}

bool AahController::MayCache(int64_t step) const {
  if (updates_ == 0) return false;  // §5.3: the first update's diagnostics are zero
  if (o_.cache_step >= 0) return step >= o_.cache_step;
  const double alpha = o_.control == Control::kNoFeatureEma ? 0.0 : o_.feature_ema;
  return std::pow(alpha, double(updates_)) <= 0.5;  // x_bar_u weighs the zeros by alpha^u
}

Status AahController::Update(const std::vector<HeadObservation>& obs, int64_t step) {
  if (obs.size() != layers_.size())
    return Status::InvalidArgument("aah: " + std::to_string(obs.size()) +
                                   " layer observations for " + std::to_string(layers_.size()) +
                                   " layers");
  // Every observation is checked before any layer changes: a bad one leaves no partial update.
  for (const HeadObservation& h : obs) HEADLAB_RETURN_IF_ERROR(CheckObservation(h));
  const bool may_cache = MayCache(step);
  for (size_t l = 0; l < layers_.size(); ++l) layers_[l].Update(obs[l], may_cache);
  ++updates_;
  return Status::Ok();
}

Status AahController::CheckObservation(const HeadObservation& obs) const {
  if (obs.qkv.size() != size_t(heads_) ||
      (!obs.attention.empty() && obs.attention.size() != size_t(heads_)))
    return Status::InvalidArgument("aah: an observation does not have one row per head");
  return Status::Ok();
}

WindowMap AahController::windows() const {
  WindowMap w;
  for (const auto& l : layers_) w.push_back(l.windows());
  return w;
}

std::vector<std::vector<int>> AahController::indices() const {
  std::vector<std::vector<int>> out;
  for (const auto& l : layers_) out.push_back(l.index());
  return out;
}

double AahController::levels_used() const {
  if (updates_ == 0 || layers_.empty()) return 0;
  double s = 0;
  for (const auto& l : layers_) s += l.levels_used();
  return s / double(layers_.size());
}

std::string AahController::SaveState() const {
  // aah_state := JSON {version: 1, regime, control, context, windows: [K], heads,
  //                    updates, layers: [LayerController::ToJson()]}
  Json layers = Json::array();
  for (const auto& l : layers_) layers.push_back(l.ToJson());
  Json j = {{"version", 1},
            {"regime", RegimeName(o_.regime)},
            {"control", ControlName(o_.control)},
            {"context", o_.context},
            {"windows", o_.windows},
            {"heads", heads_},
            {"updates", updates_},
            {"layers", layers}};
  return j.dump();
}

Status AahController::LoadState(const std::string& bytes, const std::string& source) {
  StatusOr<Json> parsed = ParseJson(bytes, source);
  if (!parsed.ok()) return Status::Corruption(parsed.status().message());
  const Json& j = parsed.value();
  try {
    if (j.at("version").get<int>() != 1)
      return Status::Corruption(source + ": unknown aah_state version");
    if (j.at("regime").get<std::string>() != RegimeName(o_.regime) ||
        j.at("control").get<std::string>() != ControlName(o_.control) ||
        j.at("context").get<int64_t>() != o_.context ||
        j.at("windows").get<std::vector<int64_t>>() != o_.windows ||
        j.at("heads").get<int>() != heads_ || j.at("layers").size() != layers_.size())
      return Status::Corruption(source +
                                ": aah_state was written by another regime, control, "
                                "candidate list or model shape");
    for (size_t l = 0; l < layers_.size(); ++l)
      HEADLAB_RETURN_IF_ERROR(
          layers_[l].FromJson(j.at("layers")[l], source + ": layer " + std::to_string(l)));
    updates_ = j.at("updates").get<int64_t>();
  } catch (const Json::exception& e) {
    return Status::Corruption(source + ": aah_state: " + e.what());
  }
  return Status::Ok();
}

}  // namespace headlab::aah
