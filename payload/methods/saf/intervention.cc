// One SAF intervention: calibration, ranking, fitting, installation (Alg. 1, Table 13).
#include "payload/methods/saf/intervention.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "payload/methods/saf/chunked_calibration.h"

namespace headlab::saf {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The per-head scores of `kind` (u = l H + h) and the candidate order over all heads.
struct Ranking {
  std::vector<double> scores;
  std::vector<int64_t> order;
};

StatusOr<Ranking> Rank(const SafOptions& o, const CalibrationSummary& stats,
                       const OutputStats* outputs, const GradientEma* gradient,
                       const std::vector<double>& gate_taylor) {
  const int64_t L = stats.layers, H = stats.heads;
  Ranking r;
  std::vector<double> var = stats.VarianceScores();
  if (NeedsGradientEma(o.score) && (!gradient || gradient->empty()))
    return Status::InvalidArgument(std::string("saf.score ") + ScoreKindName(o.score) +
                                   " needs the Q/K gradient EMA, fed by the training loop");
  switch (o.score) {
    case ScoreKind::kVariance:
    case ScoreKind::kRandomGlobal:  // random: its report's scores are the variance ones
    case ScoreKind::kRandom:        // random ranks by variance first: its per-layer counts
      r.scores = var;
      break;
    case ScoreKind::kForwardKl:
      r.scores = stats.ForwardKlScores();
      break;
    case ScoreKind::kGradient:
      r.scores = gradient->scores();
      break;
    case ScoreKind::kRankSum:
      r.scores = RankSumScores(var, gradient->scores());
      break;
    case ScoreKind::kGradientVeto:
      r.scores = var;
      r.order = GradientVetoOrder(var, gradient->scores());
      return r;
    case ScoreKind::kMagnitude:
      r.scores = MagnitudeScores(*outputs);
      break;
    case ScoreKind::kRedundancy:
      r.scores = RedundancyScores(*outputs);
      break;
    case ScoreKind::kResidualCos:
      r.scores = ResidualCosScores(*outputs);
      break;
    case ScoreKind::kResidualRel:
      r.scores = ResidualRelScores(*outputs);
      break;
    case ScoreKind::kGateTaylor:
      r.scores = gate_taylor;
      break;
  }
  if (int64_t(r.scores.size()) != L * H)
    return Status::InvalidArgument("saf: score vector has " + std::to_string(r.scores.size()) +
                                   " entries for " + std::to_string(L * H) + " heads");
  r.order = IncreasingOrder(r.scores);
  return r;
}

// The compact fits of the selection's candidates, run in batches (FitCompactBatched) on
// `device` from the heads' summaries. The selection asks for one head at a time (Alg. 1's
// lazy walk); a miss fits that head together with the next unfitted heads of the walk, as
// many as the selection still needs to accept: the first batch holds the first k
// candidates, and each later one the walk's next (k - accepted) heads, so a walk that
// accepts as it goes fits no head the lazy walk would not. Outcomes are those of per-head
// fits (FitCompactBatched), whatever the batching.
class BatchedFits {
 public:
  BatchedFits(const CalibrationSummary& summary, const CompactFitOptions& options,
              torch::Device device)
      : summary_(summary), options_(options), device_(device) {}

  // The walk the next selection takes and how many heads it must accept.
  void Walk(const std::vector<HeadId>& walk, int64_t accept) {
    walk_ = walk;
    accept_ = accept;
    accepted_ = 0;
  }

  const CompactFit& Fit(const HeadId& u) {
    const int64_t key = u.layer * summary_.heads + u.head;
    if (!done_.count(key)) FitAhead(u);
    const CompactFit& f = done_.at(key);
    if (f.accepted) ++accepted_;
    return f;
  }

 private:
  void FitAhead(const HeadId& u) {
    const int64_t H = summary_.heads;
    std::vector<HeadId> batch = {u};
    const int64_t want = std::max<int64_t>(1, accept_ - accepted_);
    auto it = std::find(walk_.begin(), walk_.end(), u);
    for (it = it == walk_.end() ? it : it + 1; it != walk_.end() && int64_t(batch.size()) < want;
         ++it)
      if (!done_.count(it->layer * H + it->head)) batch.push_back(*it);
    std::vector<torch::Tensor> abs, rel;
    std::vector<double> entropy;
    for (const HeadId& v : batch) {
      const HeadSummary& s = summary_.at(v.layer, v.head);
      abs.push_back(s.eta.eta_abs);
      rel.push_back(s.eta.eta_rel);
      entropy.push_back(s.target_entropy);
    }
    Marginals eta = {torch::stack(abs).to(device_), torch::stack(rel).to(device_)};
    std::vector<CompactFit> fits =
        FitCompactBatched(eta, torch::tensor(entropy, torch::kFloat64).to(device_), options_);
    for (size_t i = 0; i < batch.size(); ++i) done_[batch[i].layer * H + batch[i].head] = fits[i];
  }

  const CalibrationSummary& summary_;
  const CompactFitOptions options_;
  const torch::Device device_;
  std::vector<HeadId> walk_;
  int64_t accept_ = 0, accepted_ = 0;
  std::map<int64_t, CompactFit> done_;  // u -> fit, requested or fitted ahead
};

}  // namespace

CompactFitOptions FitOptionsOf(const SafOptions& o) {
  CompactFitOptions f;
  f.steps = o.fit_steps;
  f.lr = o.fit_lr;
  f.max_kl = o.fit_max_kl;
  f.path = o.fit_path == "dense" ? NormalizerPath::kDense : NormalizerPath::kFft;
  return f;
}

Status InstallPattern(HybridAttentionImpl& layer, int64_t h, const FixedPattern& p) {
  const int64_t context = layer.fixed_alpha.size(1);
  const torch::TensorOptions to = layer.fixed_alpha.options();
  if (p.dense) {
    if (p.p.size(0) != context || p.p.size(1) != context)
      return Status::InvalidArgument("saf: dense pattern is " + std::to_string(p.p.size(0)) +
                                     " long, the model context is " + std::to_string(context));
    layer.SetFixedDense(h, p.p.to(to));
  } else {
    if (p.alpha.size(0) != context)
      return Status::InvalidArgument("saf: compact pattern is " + std::to_string(p.alpha.size(0)) +
                                     " long, the model context is " + std::to_string(context));
    layer.SetFixedCompact(h, p.alpha.to(to), p.rho.to(to), p.log_z.to(to));
  }
  return Status::Ok();
}

void RevertToOrdinary(HybridAttentionImpl& layer, int64_t h) { layer.SetHeadState(h, HeadState{}); }

std::vector<torch::Tensor> DrawCalibrationBatches(const TokenSpan& split, int64_t context,
                                                  int64_t sequences, int64_t batch, uint64_t seed,
                                                  torch::Device device) {
  BatchSampler sampler(seed ^ kCalibrationSalt, context);
  std::vector<torch::Tensor> out;
  for (int64_t done = 0; done < sequences; done += batch) {
    const int64_t b = std::min(batch, sequences - done);
    std::vector<int64_t> tokens;
    sampler.Next(split, b, &tokens);  // windows of context + 1 tokens
    torch::Tensor t = torch::tensor(tokens, torch::kLong).view({b, context + 1});
    out.push_back(t.narrow(1, 0, context).contiguous().to(device));
  }
  return out;
}

StatusOr<InterventionResult> RunIntervention(const SafOptions& o, const InterventionInputs& in) {
  const int64_t L = int64_t(in.layers.size()), H = in.view.heads;
  if (L == 0 || int64_t(in.view.layers.size()) != L)
    return Status::InvalidArgument("saf: the model view and the attention layers disagree");
  // Installation is the same for both; the caller makes trainable heads' alpha/rho
  // parameters afterwards (HybridAttentionImpl::MakeFixedTrainable).
  if (o.trainable && !TrainablePatternOk(o))
    return Status::InvalidArgument(
        "saf.trainable = 1 needs compact patterns (saf.method replace, saf.pattern mean with "
        "saf.storage compact, or structured_random): only they have alpha/rho to train");
  if (in.calibration.empty()) return Status::InvalidArgument("saf: no calibration batches");
  const int64_t T = in.calibration[0].size(1), context = in.layers[0]->fixed_alpha.size(1);
  if (T != context)
    return Status::InvalidArgument("saf: calibration length " + std::to_string(T) +
                                   " must equal the model context " + std::to_string(context));
  InterventionResult result;
  InterventionReport& rep = result.report;
  rep.event = in.event;
  rep.step = in.step;
  rep.schedule = ScheduleKindName(o.schedule);
  rep.score = in.prescribed.empty() ? ScoreKindName(o.score) : "prescribed";
  rep.pattern = o.method == "prune" ? "none" : PatternKindName(o.pattern);
  rep.storage = o.pattern == PatternKind::kMean               ? o.storage
                : o.pattern == PatternKind::kStructuredRandom ? "compact"
                                                              : "dense";

  // Calibration (App. A.1), plus the output-aware pass when the score needs it: in layer
  // chunks under saf.calib_memory_gb, unless a dense pattern or the dense fitter reads
  // full per-head statistics (then every layer's are kept, one chunk).
  Clock::time_point t0 = Clock::now();
  ChunkedCalibrationOptions copt;
  copt.needs = PatternNeeds(o.pattern);
  copt.keep_stats = NeedsFullStatistics(o);
  if (!copt.keep_stats) copt.needs = CalibrationNeeds{};
  copt.memory_bytes = int64_t(o.calib_memory_gb * double(int64_t(1) << 30));
  copt.floor = FitOptionsOf(o).floor;
  if (in.prescribed.empty() && NeedsOutputPass(o.score)) {
    copt.output_batches = in.output_calibration.empty() ? &in.calibration : &in.output_calibration;
    copt.output_queries = o.output_queries;
  }
  ChunkedCalibration cal = CalibrateInChunks(in.view, in.calibration, copt);
  const CalibrationSummary& stats = cal.summary;
  const CalibrationStats* full = cal.stats ? &*cal.stats : nullptr;
  std::vector<double> gate_taylor;  // eq. 19 on the same calibration sequences (App. C.3.4)
  if (in.prescribed.empty() && o.score == ScoreKind::kGateTaylor)
    gate_taylor = NormalizeGateTaylor(GateTaylorImportance(in.view, in.calibration), H);
  rep.cost.calibration_s = Seconds(t0);
  rep.memory.statistics_bytes_peak = stats.statistics_bytes_peak;
  rep.memory.layers_per_chunk = stats.layers_per_chunk;
  rep.memory.device_bytes_peak = stats.device_bytes_peak;
  rep.memory.device_peak_raised = stats.device_peak_raised;

  // Ranking (§3.1): only heads that still use ordinary attention are candidates.
  t0 = Clock::now();
  auto ranking = Rank(o, stats, &cal.outputs, in.gradient, gate_taylor);
  if (!ranking.ok()) return ranking.status();
  std::vector<bool> eligible(size_t(L * H));
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h)
      eligible[size_t(l * H + h)] =
          in.layers[size_t(l)]->head_states()[size_t(h)].mode == HeadMode::kOrdinary;
  std::vector<HeadId> order;
  for (const HeadId& u : HeadsInOrder(ranking->order, H))
    if (eligible[size_t(u.layer * H + u.head)]) order.push_back(u);
  rep.cost.ranking_s = Seconds(t0);

  // Fitting (eq. 3-4): lazily, in candidate order, until k pass (Alg. 1 l.11-23).
  t0 = Clock::now();
  const CompactFitOptions fit_options = FitOptionsOf(o);
  std::map<int64_t, CompactFit> fits;  // u -> fit
  // Gate-Taylor pruning has no fit rule (App. C.3.4): its heads get no pattern.
  const bool fit_free = o.method == "prune" && o.score == ScoreKind::kGateTaylor;
  // All of a walk's fits run batched on the calibration's device; the dense fitter (the
  // checking path) fits head by head from the full statistics.
  BatchedFits batched(stats, fit_options, in.calibration[0].device());
  FitFn fit = [&](const HeadId& u) {
    if (fit_free) return FitOutcome{0.0, true};
    CompactFit f =
        full && fit_options.path == NormalizerPath::kDense
            ? FitCompact(PrepareTarget(full->Mean(u.layer, u.head), fit_options.floor), fit_options)
            : batched.Fit(u);
    fits[u.layer * H + u.head] = f;
    return FitOutcome{f.kl, f.accepted};
  };
  StatusOr<Selection> selection = Status::Internal("unset");
  if (!in.prescribed.empty()) {
    for (const HeadId& u : in.prescribed)
      if (u.layer < 0 || u.layer >= L || u.head < 0 || u.head >= H ||
          !eligible[size_t(u.layer * H + u.head)])
        return Status::InvalidArgument("saf: prescribed head " + std::to_string(u.layer) + "." +
                                       std::to_string(u.head) + " is not an ordinary head");
    batched.Walk(in.prescribed, int64_t(in.prescribed.size()));
    selection = SelectPrescribed(in.prescribed, fit);
  } else if (o.score == ScoreKind::kRandom) {
    // Random selection matches the per-layer counts of the variance selection (App. C.3.1).
    batched.Walk(order, in.k);
    auto reference = SelectInOrder(order, in.k, fit);
    if (!reference.ok()) return reference.status();
    std::vector<HeadId> shuffled;
    for (const HeadId& u : ShuffledHeads(L, H, in.selection_seed ^ 0x7A4D0ULL))
      if (eligible[size_t(u.layer * H + u.head)]) shuffled.push_back(u);
    order = shuffled;
    batched.Walk(order, int64_t(reference->heads.size()));
    selection = SelectWithLayerQuota(order, PerLayerCounts(reference->heads, L), fit);
  } else if (o.score == ScoreKind::kRandomGlobal) {
    // Random heads over the whole model: k eligible heads in a shuffled order that pass.
    std::vector<HeadId> shuffled;
    for (const HeadId& u : ShuffledHeads(L, H, in.selection_seed ^ 0x7A4D1ULL))
      if (eligible[size_t(u.layer * H + u.head)]) shuffled.push_back(u);
    order = shuffled;
    selection = SelectInOrder(order, in.k, fit);
  } else {
    batched.Walk(order, in.k);
    selection = SelectInOrder(order, in.k, fit);
  }
  rep.cost.fitting_s = Seconds(t0);
  if (!selection.ok()) return selection.status();

  // Installation: build each pattern (sampled ones drawn here, once) and set the heads.
  t0 = Clock::now();
  for (const HeadId& u : selection->heads) {
    if (!in.install) {
      result.installed.push_back(u);
      continue;
    }
    if (o.method == "prune") {  // the pruning control: the same heads, removed (App. C.3.1)
      HeadState pruned;
      pruned.mode = HeadMode::kPruned;
      in.layers[size_t(u.layer)]->SetHeadState(u.head, pruned);
      result.installed.push_back(u);
      result.patterns.emplace_back();
      continue;
    }
    FixedPattern p = BuildPattern(o, full, u.layer, u.head, fits.at(u.layer * H + u.head));
    HEADLAB_RETURN_IF_ERROR(InstallPattern(*in.layers[size_t(u.layer)], u.head, p));
    result.installed.push_back(u);
    result.patterns.push_back(std::move(p));
  }
  rep.cost.installation_s = Seconds(t0);
  rep.k = int64_t(result.installed.size());
  rep.fits_run = selection->fitted;
  rep.fits_rejected = int64_t(selection->rejected.size());

  // What a control can show (outside the timed phases): its overlap with the variance
  // selection of this event, and how much variance scores differ inside layers.
  const std::vector<double> var = stats.VarianceScores();
  const ScoreSpread spread = WithinLayerSpread(var, H);
  rep.variance_layer_sd = spread.layer_sd;
  rep.variance_within_share = spread.within_share;
  if (in.prescribed.empty()) {
    std::vector<HeadId> by_variance;
    for (const HeadId& u : HeadsInOrder(IncreasingOrder(var), H))
      if (eligible[size_t(u.layer * H + u.head)]) by_variance.push_back(u);
    batched.Walk(by_variance, in.k);             // the reference's walk, fitted batched as `fit` is
    auto fit_reference = [&](const HeadId& u) {  // as `fit`, leaving the head map's fits alone
      if (full && fit_options.path == NormalizerPath::kDense) {
        CompactFit f =
            FitCompact(PrepareTarget(full->Mean(u.layer, u.head), fit_options.floor), fit_options);
        return FitOutcome{f.kl, f.accepted};
      }
      const CompactFit& f = batched.Fit(u);
      return FitOutcome{f.kl, f.accepted};
    };
    std::map<int64_t, FitOutcome> outcomes;  // fits already run, and the reference's own
    for (const auto& [u, f] : fits) outcomes[u] = {f.kl, f.accepted};
    FitFn cached = [&](const HeadId& u) {
      auto it = outcomes.find(u.layer * H + u.head);
      if (it != outcomes.end()) return it->second;
      return outcomes[u.layer * H + u.head] = fit_free ? FitOutcome{0.0, true} : fit_reference(u);
    };
    auto reference =
        o.score == ScoreKind::kVariance ? selection : SelectInOrder(by_variance, in.k, cached);
    if (reference.ok()) rep.overlap_variance = HeadOverlap(result.installed, reference->heads);
  }

  std::map<int64_t, int64_t> rank_of;
  for (size_t i = 0; i < order.size(); ++i)
    rank_of[order[i].layer * H + order[i].head] = int64_t(i);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t u = l * H + h;
      HeadMapRow row;
      row.layer = l;
      row.head = h;
      row.role = HeadModeName(in.layers[size_t(l)]->head_states()[size_t(h)].mode);
      row.score = ranking->scores[size_t(u)];
      row.rank = rank_of.count(u) ? rank_of[u] : -1;
      if (fits.count(u)) row.fit_kl = fits[u].kl;
      for (size_t i = 0; i < result.installed.size(); ++i)
        if (result.installed[i].layer == l && result.installed[i].head == h)
          row.pattern = o.method == "prune" ? "" : rep.pattern;
      rep.head_map.push_back(row);
    }
  return result;
}

}  // namespace headlab::saf
