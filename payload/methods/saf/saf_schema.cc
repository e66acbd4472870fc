// The saf.* keys: method, selection, patterns, fitting, schedules (SAF §3, App. A, C.1).
#include "payload/methods/saf/saf_schema.h"

namespace headlab::saf {
namespace {

std::vector<ConfigKey> Keys() {
  return {
      StrKey("saf.method", "none", "none|replace|prune",
             "no intervention; SAF; prune the SAF-selected heads"),
      NumKey("saf.rate", 0, 1, 0.25, "r; k = round(rLH)"),
      StrKey("saf.score", "variance", JoinNames(kScoreNames), "selection score (§3.1, App. A.3)"),
      StrKey("saf.pattern", "mean", JoinNames(kPatternNames), "fixed pattern (§3.2)"),
      StrKey("saf.storage", "compact", "compact|dense", "mean storage (others are fixed by kind)"),
      StrKey("saf.schedule", "one_time", JoinNames(kScheduleNames),
             "when heads are replaced (§3.3, App. A.3): one event at tau, gradual groups, or a "
             "controller (validation budget, train loss)"),
      NumKey("saf.tau", 0, 1, 0.5, "one-time replacement fraction"),
      NumKey("saf.tau_start", 0, 1, 0.3, "gradual first group / controller start"),
      NumKey("saf.tau_end", 0, 1, 0.7, "gradual last group / controller end"),
      IntKey("saf.groups", 1, 1000, 5, "gradual groups"),
      IntKey("saf.calib_sequences", 2, 1e6, 32, "N: calibration sequences (App. C.1: 32 at 4K)"),
      IntKey("saf.calib_batch", 1, 65536, 2, "sequences per calibration forward"),
      // train | calib (data.calib_fraction's held-out split, App. A.1) | val
      StrKey("saf.calib_split", "train", "train|calib|val",
             "calibration windows (own generator): training tokens, the held-out calibration split "
             "(`data.calib_fraction` > 0; App. A.1, C.3.1) or the reporting split"),
      // GiB of calibration statistics held at once: layers are calibrated in chunks that fit
      NumKey("saf.calib_memory_gb", 0, 1e6, 8,
             "GiB of calibration statistics held at once (layer chunks; dense patterns keep all "
             "layers)",
             /*lo_open=*/true),
      IntKey("saf.output_sequences", 1, 1e6, 16, "N_f (output-aware scores)"),
      IntKey("saf.output_queries", 1, 1e6, 64, "|I| per sequence"),
      IntKey("saf.fit_steps", 0, 1e6, 400, "J: compact-fit steps"),
      NumKey("saf.fit_lr", 0, 10, 0.05, "γ: compact-fit learning rate", /*lo_open=*/true),
      NumKey("saf.fit_max_kl", 0, 1e9, 0.2, "ε_fit (nats/row): a fit above it is rejected"),
      StrKey("saf.fit_path", "fft", "fft|dense", "the compact fitter: FFT convolution or dense"),
      StrKey("saf.heads", "", nullptr,
             "a prescribed set `L.H,...` (no substitution; fails on any failed fit)"),
      NumKey("saf.dirichlet_scale", 0, 1e9, 16,
             "the Dirichlet pattern's concentration scale (App. C.1: 16)", /*lo_open=*/true),
      IntKey("saf.trainable", 0, 1, 0, "trainable α/ρ (App. C.3.2; compact patterns only)"),
      NumKey("saf.budget", 0, 100, 0.01, "validation-budget relative PPL cost"),
      IntKey("saf.group_heads", 0, 1e6, 0, "controller increment (0 = round(0.05·LH), ≥ 1)"),
      IntKey("saf.check_every", 0, 1e8, 0, "validation controller cadence (0 = steps/20)"),
      NumKey("saf.z", 0, 100, 2.0, "train-loss controller multiplier"),
      IntKey("saf.window", 0, 1e8, 0, "train-loss controller W (0 = steps/20)"),
      IntKey("saf.pattern_seed", 0, 9007199254740992.0, 0,
             "sampled patterns (the same draw at every rate)"),
      IntKey("saf.selection_seed", -1, 9007199254740992.0, -1,
             "random selection's shuffle; -1 = per run (draw seed)"),
  };
}

Status Check(const Json& c, const std::string& file, const std::string& prefix) {
  const Json& s = c["saf"];
  if (s["storage"] == "dense" && s["pattern"] == "structured_random")
    return Status::InvalidArgument(file + ": " + prefix +
                                   ".saf.storage: \"dense\" does not apply to "
                                   "saf.pattern \"structured_random\" (compact only)");
  if (s["tau_start"].get<double>() > s["tau_end"].get<double>())
    return Status::InvalidArgument(file + ": " + prefix +
                                   ".saf.tau_start: expected <= saf.tau_end (" +
                                   s["tau_end"].dump() + "), got " + s["tau_start"].dump());
  return Status::Ok();
}

[[maybe_unused]] const bool kRegistered =
    RegisterMethodSchema({"saf", /*after=*/"aoh", /*on_key=*/"method", /*off_value=*/"none", Keys(),
                          Check, "payload/methods/saf/README.md"});

}  // namespace
}  // namespace headlab::saf
