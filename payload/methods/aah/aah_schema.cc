// The aah.* keys: regime, control, hierarchy, windows and the controller constants
// (AAH §5.3-5.8, §7.1, App. A.4).
#include "payload/methods/aah/aah_schema.h"

#include <limits>

namespace headlab::aah {
namespace {

std::vector<ConfigKey> Keys() {
  return {
      StrKey("aah.regime", "off", JoinNames(kRegimeNames),
             "the hierarchy regime (§7.1); off = no AAH"),
      StrKey("aah.control", "none", JoinNames(kControlNames),
             "an ablation control (§7.1, §7.3, App. A.2); none = the method itself"),
      StrKey(
          "aah.hierarchy", "", nullptr,
          "branching factors per level, e.g. `2,2,2,2`; \"\" = the regime's default shape (`2` / "
          "`2,2,2,2`)"),
      StrKey("aah.windows", "", nullptr,
             "candidate windows W, a comma list; \"\" = T/8, T/4, T/2, T (§5.2 scaled to "
             "model.context)"),
      IntKey("aah.min_window", 0, 1048576, 0, "W_min (§5.8); 0 = the smallest candidate"),
      IntKey("aah.control_every", 1, 1e8, 5, "control updates every N steps (§5.3)"),
      NumKey("aah.feature_ema", 0, 1, 0.9, "α: the feature EMA (§5.3)", false, /*hi_open=*/true),
      NumKey("aah.resolution_ema", 0, 1, 0.15, "β: the resolution EMA (§5.8)", false,
             /*hi_open=*/true),
      // §5.8's rounded state | the unrounded variant (docs/REPRODUCTIONS.md)
      StrKey("aah.resolution_state", "rounded", JoinNames(kResolutionStateNames),
             "rounded (§5.8) or running (the unrounded state)"),
      NumKey("aah.norm_penalty", 0, std::numeric_limits<double>::infinity(), 16,
             "λ of cosine_normdiff (§5.4)"),
      NumKey("aah.cluster_threshold", -1, 1, 0.98, "the level-0 centroid-threshold cosine"),
      IntKey("aah.scorer_hidden", 1, 4096, 64, "hidden width of f_base and f_joint"),
      IntKey("aah.fixed_window", 0, 1048576, 0,
             "the fixed_window control's window; 0 = the second candidate"),
      IntKey("aah.freeze_step", -1, 1e8, -1, "freeze_after_warmup's step; -1 = train.warmup_steps"),
      IntKey("aah.cache_step", -1, 1e8, -1,
             "the shallow_freeze / deep_reuse topology cache: -1 = the first update with α^u <= "
             "1/2; s = from step s"),
      IntKey("aah.observe_rows", 0, 65536, 1, "observation-pass rows; 0 = the whole batch"),
  };
}

[[maybe_unused]] const bool kRegistered =
    RegisterMethodSchema({"aah", /*after=*/"saf", /*on_key=*/"regime", /*off_value=*/"off", Keys(),
                          nullptr, "payload/methods/aah/README.md"});

}  // namespace
}  // namespace headlab::aah
