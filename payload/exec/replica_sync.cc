// Head-configuration checks across ranks and rank 0's fixed patterns broadcast.
#include "payload/exec/replica_sync.h"

#include "payload/exec/attention.h"

namespace headlab {
namespace {

constexpr uint64_t kFingerprintMask = (uint64_t(1) << 62) - 1;  // -fp fits in an int64

// FNV-1a over 64-bit words.
class Fnv {
 public:
  void Add(int64_t v) {
    for (int i = 0; i < 8; ++i) {
      h_ ^= uint64_t(v >> (8 * i)) & 0xff;
      h_ *= 1099511628211ULL;
    }
  }
  void AddAll(const std::vector<int64_t>& values) {
    Add(int64_t(values.size()));
    for (int64_t v : values) Add(v);
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 1469598103934665603ULL;
};

// Copies rank 0's `t` into `t` on every rank. Through a temporary and copy_, so the
// in-place write bumps t's version counter: the CUDA fast path caches fixed patterns
// under the buffers' versions (attention_cuda.cc) and must see the change.
void BroadcastInto(ProcessGroup& group, torch::Tensor t) {
  torch::Tensor received = t.detach().clone();
  group.Broadcast(received, 0);
  t.copy_(received);
}

}  // namespace

uint64_t HeadConfigurationFingerprint(Gpt& model, const std::vector<torch::Tensor>& trained) {
  Fnv f;
  for (int64_t l = 0; l < model->config().layers; ++l) {
    const HybridAttentionImpl& a = *model->attention(l);
    f.Add(a.heads());
    for (int64_t h = 0; h < a.heads(); ++h) {
      const HeadState& s = a.head_states()[size_t(h)];
      for (int64_t v : {int64_t(s.mode), s.window, s.sink, s.recent, int64_t(s.dense),
                        int64_t(a.fixed_trainable(h))})
        f.Add(v);
    }
    f.AddAll(a.kept_heads());
    f.AddAll(a.kept_kv_heads());
  }
  f.Add(int64_t(trained.size()));
  for (const torch::Tensor& t : trained) f.AddAll(t.sizes().vec());
  return f.value() & kFingerprintMask;
}

Status ReplicaSync::Sync(Gpt& model, const std::vector<torch::Tensor>& trained,
                         const std::string& where, int64_t step) {
  const int64_t fp = int64_t(HeadConfigurationFingerprint(model, trained));
  const torch::Device device = model->parameters().front().device();
  // max(fp) and max(-fp) = -min(fp) in one collective.
  torch::Tensor both = torch::tensor(std::vector<int64_t>{fp, -fp}, torch::kLong).to(device);
  group_.AllReduceMax(both);
  both = both.cpu();
  const int64_t hi = both[0].item<int64_t>(), lo = -both[1].item<int64_t>();
  if (hi != lo)
    return Status::Internal(
        "data-parallel rank " + std::to_string(group_.rank()) + " of " +
        std::to_string(group_.world()) + ": the head configuration after " + where + " at step " +
        std::to_string(step) + " differs across ranks (fingerprints " + std::to_string(lo) +
        " .. " + std::to_string(hi) +
        "): a method chose differently on some rank, so the replicas would diverge");
  if (synced_ && *synced_ == uint64_t(fp)) return Status::Ok();
  synced_ = uint64_t(fp);
  torch::NoGradGuard no_grad;
  for (int64_t l = 0; l < model->config().layers; ++l) {
    HybridAttentionImpl& a = *model->attention(l);
    bool fixed = false;
    for (const HeadState& s : a.head_states()) fixed = fixed || s.mode == HeadMode::kFixed;
    if (!fixed) continue;
    for (torch::Tensor* t : {&a.fixed_alpha, &a.fixed_rho, &a.fixed_log_z})
      BroadcastInto(group_, *t);
    for (int64_t h = 0; h < a.heads(); ++h) {
      const HeadState& s = a.head_states()[size_t(h)];
      if (s.mode != HeadMode::kFixed) continue;
      if (s.dense && a.fixed_dense.defined()) BroadcastInto(group_, a.fixed_dense[h]);
      if (a.fixed_trainable(h)) {
        auto [alpha, rho] = a.MakeFixedTrainable(h);  // the existing pair
        BroadcastInto(group_, alpha);
        BroadcastInto(group_, rho);
      }
    }
  }
  return Status::Ok();
}

}  // namespace headlab
