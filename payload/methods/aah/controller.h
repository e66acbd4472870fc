// The AAH-v3 hierarchy-aware window controller (AAH §5.3-5.8) for every attention layer
// of a model: features -> feature EMA -> level-0 grouping and upper hierarchy (per regime)
// -> enriched inputs -> base + joint sibling scoring -> argmax -> top-down parent clamp ->
// group-to-head mapping -> resolution EMA -> execution windows. Torch-free: the Q/K/V
// statistics come in as HeadObservation (aah_model.h computes them from a model).
//
// Thread: single-threaded, owned by the training loop.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "payload/methods/aah/aah_options.h"
#include "payload/methods/aah/coverage.h"
#include "payload/methods/aah/ema.h"
#include "payload/methods/aah/hierarchy.h"
#include "payload/methods/aah/scorer.h"

namespace headlab::aah {

// What one control update observes of one layer, per head.
struct HeadObservation {
  // mu(|q|), sigma(q), mu(|k|), sigma(k), mu(|v|), sigma(v): mean-absolute and standard
  // deviation over batch, sequence and head-feature axes (AAH §5.3).
  std::vector<std::array<float, 6>> qkv;
  // entropy, output norm, usage measured in this pass; used as the *previous* attention
  // diagnostics (e_h, n_h, rho_h) at the next update (AAH §5.3). May be empty.
  std::vector<std::array<float, 3>> attention;
};

// Returns x_h = [qkv stats, e, n, rho] with the diagnostics zero when `prev` is null (§5.3).
Vec BaseFeature(const std::array<float, 6>& qkv, const std::array<float, 3>* prev);

// The selection stage of one layer (AAH §5.5-5.8).
struct Selection {
  std::vector<std::vector<int>> raw;          // c_hat per level and item
  std::vector<std::vector<int>> constrained;  // c per level and item
  std::vector<int> head_index;                // c_h = c_group(h)^(0)
};

// Runs enriched inputs, base scoring, joint sibling replacement (when `joint`: the children
// of each parent, and the top-level items, paired in index order (0,1), (2,3), ...), argmax
// and the top-down parent clamp c = min(c_hat, c_parent) (when `parent_constraint`).
Selection SelectWindows(const Topology& t, const std::vector<LevelFeatures>& f,
                        const BaseScorer& base, const JointSiblingScorer& joint_scorer, bool joint,
                        bool parent_constraint);

// The controller of one attention layer.
class LayerController {
 public:
  LayerController(const AahOptions& o, int heads, uint64_t seed);

  // Runs one control update from this layer's observation. `may_cache`: this update may
  // freeze the shallow_freeze topology / cache the deep_reuse level-0 partition (§7.1; the
  // schedule is AahController's, AahOptions::cache_step); until one does, both recompute.
  void Update(const HeadObservation& obs, bool may_cache);

  const std::vector<int64_t>& windows() const { return windows_; }       // executed W_h
  const std::vector<int>& index() const { return resolution_.index(); }  // c_tilde_h
  int levels_used() const { return levels_used_; }
  const Topology& topology() const { return topology_; }
  const Selection& last_selection() const { return selection_; }
  const BaseScorer& base_scorer() const { return base_; }
  const JointSiblingScorer& joint_scorer() const { return joint_; }

  Json ToJson() const;
  Status FromJson(const Json& j, const std::string& what);

 private:
  std::vector<int> Level0(const std::vector<Vec>& xbar, bool may_cache);
  void SetWindows(const std::vector<int>& index);

  // Constant after construction.
  AahOptions o_;
  int heads_;
  // State (all of it checkpointed).
  FeatureEma ema_;
  ResolutionEma resolution_;
  BaseScorer base_;
  JointSiblingScorer joint_;
  Rng rng_;                                           // random controls only
  std::vector<std::array<float, 3>> prev_attention_;  // empty until observed
  std::vector<int> cached_level0_;                    // deep reuse / fixed random grouping
  bool topology_frozen_ = false;                      // shallow freeze, once cached
  Topology topology_;
  Selection selection_;
  std::vector<int64_t> windows_;
  int levels_used_ = 0;
};

// The controllers of all layers and the control schedule.
class AahController {
 public:
  // `seed` is the run seed (scorer weights and random controls derive from it, §5.7).
  AahController(const AahOptions& o, int layers, int heads, uint64_t seed);

  // Returns true iff a control update is due before optimizer step `step` (0-based: every
  // control_every steps from step 0; never for full, fixed_window, or after freeze_step
  // under freeze_after_warmup). Between updates the cached windows are reused (§5.3).
  bool Due(int64_t step) const;
  // Returns true iff control updates can change the installed windows: a regime with
  // candidates other than full, and neither control_off (windows stay at the full span) nor
  // fixed_window (windows set once).
  bool MovesWindows() const;
  // Runs one control update before optimizer step `step` with one observation per layer.
  Status Update(const std::vector<HeadObservation>& obs, int64_t step);
  // Returns true iff the update now due (the updates()-th, 0-based) before `step` may cache
  // the shallow_freeze topology / deep_reuse level 0: never the first update (its
  // diagnostics are zero, §5.3); with cache_step -1 from the first update u with
  // alpha^u <= 1/2 (the zero-initialised diagnostics weigh at most half of x_bar), else
  // from step cache_step on.
  bool MayCache(int64_t step) const;

  WindowMap windows() const;
  std::vector<std::vector<int>> indices() const;
  // Mean over layers of the hierarchy levels used at the last update (0 before any).
  double levels_used() const;
  int64_t updates() const { return updates_; }
  const AahOptions& options() const { return o_; }
  const LayerController& layer(int l) const { return layers_[size_t(l)]; }

  // The checkpointed AAH state (§5.7): scorer weights, topology cache, EMAs, windows.
  std::string SaveState() const;
  // Restores SaveState's bytes into a controller built with the same options and shape;
  // Corruption naming `source` otherwise.
  Status LoadState(const std::string& bytes, const std::string& source);

 private:
  // Whether control updates run at all: a regime with candidates other than full, and not
  // fixed_window.
  bool Controls() const;
  // InvalidArgument unless `obs` has one row per head.
  Status CheckObservation(const HeadObservation& obs) const;

  AahOptions o_;
  int heads_;
  std::vector<LayerController> layers_;
  int64_t updates_ = 0;
};

}  // namespace headlab::aah
