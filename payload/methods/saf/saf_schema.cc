// The saf.* keys: method, selection, patterns, fitting, schedules (SAF §3, App. A, C.1).
#include "payload/methods/saf/saf_schema.h"

namespace headlab::saf {
namespace {

std::vector<ConfigKey> Keys() {
  return {
      StrKey("saf.method", "none", "none|replace|prune"),  // prune: the same heads, pruned
      NumKey("saf.rate", 0, 1, 0.25),                       // r: k = round(r L H)
      StrKey("saf.score", "variance", JoinNames(kScoreNames)),  // §3.1, App. A.3
      StrKey("saf.pattern", "mean", JoinNames(kPatternNames)),  // §3.2
      StrKey("saf.storage", "compact", "compact|dense"),        // dense: mean patterns only
      StrKey("saf.schedule", "one_time", JoinNames(kScheduleNames)),  // §3.3, App. A.3
      NumKey("saf.tau", 0, 1, 0.5),        // one-time replacement at this fraction of the run
      NumKey("saf.tau_start", 0, 1, 0.3),  // first gradual group / controller start
      NumKey("saf.tau_end", 0, 1, 0.7),    // last gradual group / controller end
      IntKey("saf.groups", 1, 1000, 5),    // gradual groups (App. A.3: five)
      IntKey("saf.calib_sequences", 2, 1e6, 32),  // N (App. C.1: 32 at 4K)
      IntKey("saf.calib_batch", 1, 65536, 2),     // sequences per calibration forward
      // train | calib (data.calib_fraction's held-out split, App. A.1) | val
      StrKey("saf.calib_split", "train", "train|calib|val"),
      // GiB of calibration statistics held at once: layers are calibrated in chunks that fit
      NumKey("saf.calib_memory_gb", 0, 1e6, 8, /*lo_open=*/true),
      IntKey("saf.output_sequences", 1, 1e6, 16),  // N_f of the output-aware scores
      IntKey("saf.output_queries", 1, 1e6, 64),    // |I| per sequence
      IntKey("saf.fit_steps", 0, 1e6, 400),        // J
      NumKey("saf.fit_lr", 0, 10, 0.05, /*lo_open=*/true),  // gamma
      NumKey("saf.fit_max_kl", 0, 1e9, 0.2),       // epsilon_fit, nats per row
      StrKey("saf.fit_path", "fft", "fft|dense"),
      StrKey("saf.heads", "", nullptr),            // prescribed "L.H,..." (no substitution)
      NumKey("saf.dirichlet_scale", 0, 1e9, 16, /*lo_open=*/true),  // App. C.1: 16
      IntKey("saf.trainable", 0, 1, 0),     // 1: alpha/rho trained after install (App. C.3.2)
      NumKey("saf.budget", 0, 100, 0.01),   // validation-budget relative PPL cost
      IntKey("saf.group_heads", 0, 1e6, 0),   // controller increment; 0 = round(0.05 L H)
      IntKey("saf.check_every", 0, 1e8, 0),   // controller cadence in updates; 0 = steps/20
      NumKey("saf.z", 0, 100, 2.0),           // train-loss controller SD multiplier
      IntKey("saf.window", 0, 1e8, 0),        // train-loss controller window; 0 = steps/20
      IntKey("saf.pattern_seed", 0, 9007199254740992.0, 0),     // sampled patterns
      IntKey("saf.selection_seed", -1, 9007199254740992.0, -1),  // random heads; -1 = per run
  };
}

Status Check(const Json& c, const std::string& file, const std::string& prefix) {
  const Json& s = c["saf"];
  if (s["storage"] == "dense" && s["pattern"] == "structured_random")
    return Status::InvalidArgument(file + ": " + prefix +
                                   ".saf.storage: \"dense\" does not apply to "
                                   "saf.pattern \"structured_random\" (compact only)");
  if (s["tau_start"].get<double>() > s["tau_end"].get<double>())
    return Status::InvalidArgument(file + ": " + prefix + ".saf.tau_start: expected <= saf.tau_end (" +
                                   s["tau_end"].dump() + "), got " + s["tau_start"].dump());
  return Status::Ok();
}

[[maybe_unused]] const bool kRegistered = RegisterMethodSchema(
    {"saf", /*after=*/"aoh", Keys(), Check, "payload/methods/saf/README.md"});

}  // namespace
}  // namespace headlab::saf
