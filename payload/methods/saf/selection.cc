// SAF head selection: score order, compact-fit acceptance, per-layer quotas, prescribed sets.
#include "payload/methods/saf/selection.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "common/head_list.h"

namespace headlab::saf {
namespace {

std::string Name(const HeadId& h) { return std::to_string(h.layer) + "." + std::to_string(h.head); }

void Record(const HeadId& h, const FitOutcome& f, Selection* s) {
  ++s->fitted;
  if (f.accepted) {
    s->heads.push_back(h);
    s->kl.push_back(f.kl);
  } else {
    s->rejected.push_back(h);
    s->rejected_kl.push_back(f.kl);
  }
}

}  // namespace

int64_t TargetHeadCount(double rate, int64_t layers, int64_t heads) {
  return int64_t(std::llround(rate * double(layers * heads)));
}

StatusOr<Selection> SelectInOrder(const std::vector<HeadId>& order, int64_t k, const FitFn& fit) {
  Selection s;
  for (const HeadId& h : order) {
    if (int64_t(s.heads.size()) == k) break;  // Alg. 1 l.12
    Record(h, fit(h), &s);
  }
  if (int64_t(s.heads.size()) < k)
    return Status::InvalidArgument("saf: selection needs " + std::to_string(k) +
                                   " heads but only " + std::to_string(s.heads.size()) + " of " +
                                   std::to_string(order.size()) +
                                   " candidates have a compact fit within the KL tolerance");
  return s;
}

StatusOr<Selection> SelectWithLayerQuota(const std::vector<HeadId>& order,
                                         const std::vector<int64_t>& quota, const FitFn& fit) {
  Selection s;
  std::vector<int64_t> taken(quota.size(), 0);
  int64_t need = 0;
  for (int64_t q : quota) need += q;
  for (const HeadId& h : order) {
    if (int64_t(s.heads.size()) == need) break;
    if (h.layer < 0 || h.layer >= int64_t(quota.size())) continue;
    if (taken[size_t(h.layer)] >= quota[size_t(h.layer)]) continue;
    size_t before = s.heads.size();
    Record(h, fit(h), &s);
    if (s.heads.size() > before) ++taken[size_t(h.layer)];
  }
  for (size_t l = 0; l < quota.size(); ++l)
    if (taken[l] < quota[l])
      return Status::InvalidArgument("saf: layer " + std::to_string(l) + " needs " +
                                     std::to_string(quota[l]) + " heads but only " +
                                     std::to_string(taken[l]) +
                                     " have a compact fit within the KL tolerance");
  return s;
}

StatusOr<Selection> SelectPrescribed(const std::vector<HeadId>& heads, const FitFn& fit) {
  Selection s;
  for (const HeadId& h : heads) {
    FitOutcome f = fit(h);
    Record(h, f, &s);
    if (!f.accepted)
      return Status::InvalidArgument("saf: prescribed head " + Name(h) +
                                     " fails its compact fit (KL " + std::to_string(f.kl) +
                                     " nats > tolerance); prescribed sets are not substituted");
  }
  return s;
}

std::vector<HeadId> HeadsInOrder(const std::vector<int64_t>& order, int64_t heads) {
  std::vector<HeadId> out;
  for (int64_t u : order) out.push_back({u / heads, u % heads});
  return out;
}

std::vector<HeadId> ShuffledHeads(int64_t layers, int64_t heads, uint64_t seed) {
  std::vector<HeadId> out;
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t h = 0; h < heads; ++h) out.push_back({l, h});
  std::mt19937_64 rng(seed);
  // Fisher-Yates with our own index draws: std::shuffle's use of the engine is
  // implementation-defined, and the order must not change with the standard library.
  for (size_t i = out.size(); i > 1; --i) std::swap(out[i - 1], out[size_t(rng() % i)]);
  return out;
}

StatusOr<std::vector<HeadId>> ParseHeadList(const std::string& spec, int64_t layers,
                                            int64_t heads) {
  auto list = headlab::ParseHeadList(spec, layers, heads, "saf.heads");  // common/head_list.h
  if (!list.ok()) return list.status();
  std::vector<HeadId> out;
  for (const HeadAt& h : *list) out.push_back({h.layer, h.head});
  return out;
}

std::vector<int64_t> PerLayerCounts(const std::vector<HeadId>& heads, int64_t layers) {
  std::vector<int64_t> counts(size_t(layers), 0);
  for (const HeadId& h : heads)
    if (h.layer >= 0 && h.layer < layers) ++counts[size_t(h.layer)];
  return counts;
}

int64_t HeadOverlap(const std::vector<HeadId>& a, const std::vector<HeadId>& b) {
  int64_t n = 0;
  for (const HeadId& u : a) n += std::find(b.begin(), b.end(), u) != b.end();
  return n;
}

ScoreSpread WithinLayerSpread(const std::vector<double>& scores, int64_t heads) {
  ScoreSpread out;
  const int64_t layers = heads > 0 ? int64_t(scores.size()) / heads : 0;
  if (layers == 0) return out;
  double mean = 0;
  for (double s : scores) mean += s;
  mean /= double(layers * heads);
  double within = 0, total = 0;
  for (int64_t l = 0; l < layers; ++l) {
    double m = 0;
    for (int64_t h = 0; h < heads; ++h) m += scores[size_t(l * heads + h)];
    m /= double(heads);
    double ss = 0;
    for (int64_t h = 0; h < heads; ++h) {
      const double s = scores[size_t(l * heads + h)];
      ss += (s - m) * (s - m);
      total += (s - mean) * (s - mean);
    }
    within += ss;
    out.layer_sd.push_back(std::sqrt(ss / double(heads)));
  }
  out.within_share = total > 0 ? within / total : 0.0;
  return out;
}

}  // namespace headlab::saf
