// The AAH-v3 settings of a run (the aah.* run-config keys, README.md) read into plain
// structs: regime (AAH §7.1), control (§7.1, §7.3, App. A.2) and the controller constants
// (§5.3-5.8, App. A.4). Torch-free, so config readers can use it without LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace headlab::aah {

// The principal regimes of AAH §7.1 (plus kOff: no AAH at all in the run).
enum class Regime {
  kOff,            // AAH not part of the run: no diagnostics, no controller
  kFull,           // "Full attention": ordinary causal MHA, ACR 1 by definition
  kGroupingOff,    // every head its own level-0 item, base scorer, no pairing, no parents
  kFullAdaptive,   // grouping and hierarchy recomputed at every control update
  kShallowFreeze,  // feature-derived [2] topology from the first update, then frozen
  kDeepReuse,      // [2,2,2,2]: level-0 partition cached, upper levels recomputed
};

// One-mechanism controls (AAH §7.1 "additional diagnostic regimes", §7.3, App. A.2),
// applied on top of a regime. "Shallow control interval 10" is shallow_freeze with
// aah.control_every = 10, not a control of its own.
enum class Control {
  kNone,
  kControlOff,           // features, grouping and scoring run; windows stay at full span
  kFixedRandomGrouping,  // level-0 partition: the first feature partition's group sizes,
                         // heads drawn at random, fixed for the run
  kFreezeAfterWarmup,    // updates stop at aah.freeze_step; cached windows pass through
  kIndependentScoring,   // base logits for every item (no joint sibling scorer)
  kNoParentConstraint,   // c = c_hat, no top-down min (§5.7)
  kNoFeatureEma,         // alpha = 0: x_bar = x (§5.3)
  kFixedWindow,          // every head at aah.fixed_window from step 0 (fixed-1024)
  kRandomWindow,         // per-head decision drawn uniformly from the candidates
  kShufflePostSelect,    // executed windows permuted within each layer at each update
};

// What the final per-head resolution EMA (AAH §5.8) keeps between control updates.
enum class ResolutionState {
  kRounded,  // the paper's rule: c~_t = round(beta c~_{t-1} + (1 - beta) c_t); the rounded
             // index is the state (docs/REPRODUCTIONS.md: a no-op when beta (K - 1) < 1/2)
  kRunning,  // variant: s_t = beta s_{t-1} + (1 - beta) c_t kept unrounded, round(s_t) runs
};

// Returns the config name ("full_adaptive", "shuffle_post_select", "running", ...).
const char* RegimeName(Regime r);
const char* ControlName(Control c);
const char* ResolutionStateName(ResolutionState s);
// Parses a name as the *Name functions print it; InvalidArgument listing the names.
StatusOr<Regime> ParseRegime(const std::string& s);
StatusOr<Control> ParseControl(const std::string& s);
StatusOr<ResolutionState> ParseResolutionState(const std::string& s);

// Everything the controller needs. The keys' defaults are the paper's main protocol
// (App. A.4), defined in aah_schema.cc; the initialisers below repeat them for code that
// builds options directly, and aah_options_test checks that they agree.
struct AahOptions {
  Regime regime = Regime::kOff;
  Control control = Control::kNone;
  std::vector<int64_t> hierarchy;  // shape, e.g. {2} or {2,2,2,2}; top-down (README)
  std::vector<int64_t> windows;    // candidate list W, increasing (§5.7)
  int64_t min_window = 0;          // W_min (§5.8)
  int64_t context = 0;             // T
  int64_t control_every = 5;       // control updates every N optimizer steps (§5.3)
  double feature_ema = 0.9;        // alpha (§5.3)
  double resolution_ema = 0.15;    // beta (§5.8)
  ResolutionState resolution_state = ResolutionState::kRounded;  // §5.8 rule or the variant
  double norm_penalty = 16.0;       // lambda of cosine_normdiff (§5.4)
  double cluster_threshold = 0.98;  // level-0 centroid-threshold cosine (README: a choice)
  int64_t scorer_hidden = 64;       // hidden width of f_base and f_joint
  int64_t fixed_window = 0;         // kFixedWindow's window
  int64_t freeze_step = 0;          // kFreezeAfterWarmup: no updates at steps >= this
  // When shallow_freeze freezes its [2] topology and deep_reuse caches its level-0
  // partition (§7.1). -1: at the first control update u (0-based) whose smoothed features
  // are at least half observed diagnostics, alpha^u <= 1/2 (the diagnostics enter x_bar
  // as zeros at u = 0, §5.3): u = 7 at alpha = 0.9. s >= 0: at the first update at or
  // after step s, never the first update. Before it both recompute like full_adaptive.
  int64_t cache_step = -1;
  int64_t observe_rows = 1;  // batch rows used by the observation pass (0 = all)
};

// Returns the paper's candidate set [512, 1024, 2048, 4096] scaled to `context`
// (T/8, T/4, T/2, T; at least 1 each, duplicates removed).
std::vector<int64_t> ScaledWindows(int64_t context);

// Returns the regime's default hierarchy shape: {2} shallow_freeze, {2,2,2,2}
// full_adaptive / deep_reuse, {} otherwise.
std::vector<int64_t> DefaultHierarchy(Regime r);

// Checks the fields against each other (windows increasing, in [1, context]; W_min and the
// fixed window in [1, context]; hierarchy entries >= 2; controls their regime allows). The
// single keys' ranges are the schema's (aah_schema.cc).
Status ValidateOptions(const AahOptions& o);

// Reads the "aah" section of a normalised run config (NormalizeRunConfig has checked every
// key against aah_schema.cc; a config that is not normalised is InvalidArgument) for a
// model of `context` tokens. `warmup_steps` fills the run-dependent default freeze_step =
// warmup_steps. Bad lists and fields that disagree are InvalidArgument naming `file` and
// the key.
StatusOr<AahOptions> AahOptionsFromJson(const Json& config, int64_t context, int64_t warmup_steps,
                                        const std::string& file);

}  // namespace headlab::aah
