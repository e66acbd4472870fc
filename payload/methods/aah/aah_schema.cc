// The aah.* keys: regime, control, hierarchy, windows and the controller constants
// (AAH §5.3-5.8, §7.1, App. A.4).
#include "payload/methods/aah/aah_schema.h"

#include <limits>

namespace headlab::aah {
namespace {

std::vector<ConfigKey> Keys() {
  return {
      StrKey("aah.regime", "off", JoinNames(kRegimeNames)),    // §7.1
      StrKey("aah.control", "none", JoinNames(kControlNames)),  // §7.1, §7.3, App. A.2
      StrKey("aah.hierarchy", "", nullptr),  // "2,2,2,2"; "" = the regime's default shape
      StrKey("aah.windows", "", nullptr),    // candidates W; "" = T/8, T/4, T/2, T
      IntKey("aah.min_window", 0, 1048576, 0),      // W_min (§5.8); 0 = the smallest candidate
      IntKey("aah.control_every", 1, 1e8, 5),       // control updates every N steps (§5.3)
      NumKey("aah.feature_ema", 0, 1, 0.9, false, /*hi_open=*/true),      // alpha (§5.3)
      NumKey("aah.resolution_ema", 0, 1, 0.15, false, /*hi_open=*/true),  // beta (§5.8)
      // §5.8's rounded state | the unrounded variant (docs/REPRODUCTIONS.md)
      StrKey("aah.resolution_state", "rounded", JoinNames(kResolutionStateNames)),
      NumKey("aah.norm_penalty", 0, std::numeric_limits<double>::infinity(), 16),      // lambda of cosine_normdiff (§5.4)
      NumKey("aah.cluster_threshold", -1, 1, 0.98),  // level-0 centroid-threshold cosine
      IntKey("aah.scorer_hidden", 1, 4096, 64),      // hidden width of f_base and f_joint
      IntKey("aah.fixed_window", 0, 1048576, 0),     // fixed_window control; 0 = W[1]
      IntKey("aah.freeze_step", -1, 1e8, -1),        // freeze_after_warmup; -1 = warmup steps
      IntKey("aah.cache_step", -1, 1e8, -1),  // topology cache of shallow_freeze / deep_reuse
      IntKey("aah.observe_rows", 0, 65536, 1),       // observation-pass rows; 0 = all
  };
}

[[maybe_unused]] const bool kRegistered = RegisterMethodSchema(
    {"aah", /*after=*/"saf", Keys(), nullptr, "payload/methods/aah/README.md"});

}  // namespace
}  // namespace headlab::aah
