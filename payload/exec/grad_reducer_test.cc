#include "payload/exec/grad_reducer.h"

#include <functional>
#include <vector>

#include "payload/exec/attention.h"
#include "payload/exec/model_testing.h"
#include "payload/exec/replica_sync.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

// A process group of `world` ranks simulated inside one process: the other ranks hold
// `peer_scale` times this rank's tensor, so a sum is (1 + (world - 1) peer_scale) times
// it, applied when the collective is waited for (as an asynchronous one completes).
class SimulatedGroup : public ProcessGroup {
 public:
  explicit SimulatedGroup(int world, double peer_scale = 1.0)
      : world_(world), peer_scale_(peer_scale) {}
  int rank() const override { return 0; }
  int world() const override { return world_; }
  std::unique_ptr<CollectiveWork> StartAllReduceSum(torch::Tensor& t) override {
    if (on_start) on_start(t);
    struct Work : CollectiveWork {
      torch::Tensor t;
      double factor;
      void Wait() override { t.mul_(factor); }
    };
    auto w = std::make_unique<Work>();
    w->t = t;
    w->factor = 1.0 + double(world_ - 1) * peer_scale_;
    ++sums_started;
    return w;
  }
  void AllReduceMax(torch::Tensor& t) override {
    torch::Tensor peer = t + peer_max_offset;
    t.copy_(torch::max(t, peer));
  }
  void Broadcast(torch::Tensor&, int) override { ++broadcasts; }
  const char* backend() const override { return "simulated"; }

  std::function<void(const torch::Tensor&)> on_start;
  int sums_started = 0;
  int broadcasts = 0;
  int64_t peer_max_offset = 0;  // another rank's value in AllReduceMax: this one's + offset

 private:
  int world_;
  double peer_scale_;
};

// A chain of `layers` linear layers (weight and bias each) with tanh between, and
// optionally one parameter that the forward never uses (registered last).
struct Chain {
  Chain(int layers, bool with_unused, uint64_t seed) {
    torch::manual_seed(seed);
    for (int l = 0; l < layers; ++l) {
      params.push_back(torch::randn({6, 6}).mul_(0.5).requires_grad_(true));
      params.push_back(torch::randn({6}).mul_(0.1).requires_grad_(true));
    }
    if (with_unused) params.push_back(torch::randn({5}).requires_grad_(true));
  }
  torch::Tensor Loss(const torch::Tensor& x) const {
    torch::Tensor h = x;
    for (size_t i = 0; i + 1 < params.size(); i += 2) {
      if (params[i].dim() != 2) break;
      h = torch::tanh(torch::nn::functional::linear(h, params[i], params[i + 1]));
    }
    return h.pow(2).mean();
  }
  std::vector<torch::Tensor> params;
};

// Runs one update of `micro` backwards through `reducer` (the last one announced).
void ReducedUpdate(GradientReducer& reducer, Chain& c, const std::vector<torch::Tensor>& xs) {
  reducer.BeginUpdate(c.params);
  for (size_t m = 0; m < xs.size(); ++m) {
    torch::Tensor loss = c.Loss(xs[m]);
    if (m + 1 == xs.size()) reducer.ExpectLastBackward(loss);
    loss.backward();
  }
  reducer.FinishUpdate();
}

// The gradients plain autograd gives for the same micro-batches (accumulated).
std::vector<torch::Tensor> ReferenceGrads(Chain& c, const std::vector<torch::Tensor>& xs) {
  for (torch::Tensor& p : c.params) p.mutable_grad() = torch::Tensor();
  for (const torch::Tensor& x : xs) c.Loss(x).backward();
  std::vector<torch::Tensor> g;
  for (torch::Tensor& p : c.params) {
    g.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    p.mutable_grad() = torch::Tensor();
  }
  return g;
}

std::vector<torch::Tensor> Inputs(int n, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> xs;
  for (int i = 0; i < n; ++i) xs.push_back(torch::randn({4, 6}));
  return xs;
}

TEST_CASE("grad_reducer: buckets fill in reverse order up to the byte cap") {
  std::vector<torch::Tensor> ps = {
      torch::zeros({10}).requires_grad_(true), torch::zeros({20}).requires_grad_(true),
      torch::zeros({30}).requires_grad_(true), torch::zeros({40}).requires_grad_(true)};
  // 200 bytes = 50 floats: 40 alone (30 would make 70), then 30 + 20 = 50, then 10.
  CHECK(AssignGradientBuckets(ps, 200) == std::vector<std::vector<size_t>>{{3}, {2, 1}, {0}});
  // Everything fits: one bucket, last tensor first.
  CHECK(AssignGradientBuckets(ps, 1 << 20) == std::vector<std::vector<size_t>>{{3, 2, 1, 0}});
  // A tensor over the cap gets a bucket of its own; frozen tensors are left out; a dtype
  // change starts a new bucket.
  std::vector<torch::Tensor> mixed = {
      torch::zeros({100}).requires_grad_(true), torch::zeros({3}),  // requires no gradient
      torch::zeros({2}, torch::kDouble).requires_grad_(true),
      torch::zeros({2}).requires_grad_(true), torch::zeros({1}).requires_grad_(true)};
  CHECK(AssignGradientBuckets(mixed, 64) == std::vector<std::vector<size_t>>{{4, 3}, {2}, {0}});
}

TEST_CASE("grad_reducer: buckets start during backward, last layer first, and average") {
  for (double peer_scale : {1.0, 3.0}) {
    INFO("the other rank's gradient is " << peer_scale << " times this rank's");
    Chain c(4, /*with_unused=*/false, 7);
    const std::vector<torch::Tensor> xs = Inputs(1, 8);
    const std::vector<torch::Tensor> want = ReferenceGrads(c, xs);
    SimulatedGroup group(2, peer_scale);
    GradientReducer reducer(group, ReduceDtype::kFp32, /*bucket_bytes=*/1);  // one per tensor
    // When the first bucket (the last layer) starts, the first layer's gradient is not
    // computed yet: the all-reduce overlaps the rest of the backward.
    std::vector<double> first_layer_grad_at_start;
    group.on_start = [&](const torch::Tensor&) {
      first_layer_grad_at_start.push_back(
          reducer.bucket_buffer(reducer.bucket_count() - 1).abs().sum().item<double>());
    };
    ReducedUpdate(reducer, c, xs);
    REQUIRE(reducer.bucket_count() == 8);
    for (size_t b = 0; b < 8; ++b) CHECK(reducer.bucket_params(b) == std::vector<size_t>{7 - b});
    REQUIRE(reducer.started().size() == 8);
    for (size_t b = 0; b < 8; ++b) {
      CHECK(reducer.started()[b].first == b);  // in bucket order
      CHECK(reducer.started()[b].second);      // from a hook, not from FinishUpdate
    }
    REQUIRE(first_layer_grad_at_start.size() == 8);
    CHECK(first_layer_grad_at_start.front() == 0.0);
    CHECK(first_layer_grad_at_start.back() > 0.0);
    // The mean over the two ranks: (g + s g) / 2, and each gradient is its bucket's view.
    for (size_t i = 0; i < c.params.size(); ++i) {
      CHECK(torch::allclose(c.params[i].grad(), want[i] * (1 + peer_scale) / 2, 1e-6, 1e-7));
      CHECK(c.params[i].grad().is_alias_of(reducer.bucket_buffer(7 - i)));
    }
    CHECK(reducer.finished_updates() == 1);
    CHECK(reducer.exposed_seconds() >= 0);
  }
}

TEST_CASE("grad_reducer: an unused parameter holds back no bucket and keeps no gradient") {
  Chain c(2, /*with_unused=*/true, 3);  // params 0..3 used, 4 never
  const std::vector<torch::Tensor> xs = Inputs(1, 4);
  const std::vector<torch::Tensor> want = ReferenceGrads(c, xs);
  REQUIRE(!want[4].defined());
  SimulatedGroup group(2);
  // 24 floats per bucket: the unused [5] and the last bias [6] share the first bucket.
  GradientReducer reducer(group, ReduceDtype::kFp32, 24 * 4);
  for (int update = 0; update < 2; ++update) {  // the second reuses the buckets
    ReducedUpdate(reducer, c, xs);
    REQUIRE(reducer.bucket_params(0) == std::vector<size_t>{4, 3});
    for (const auto& [bucket, early] : reducer.started()) CHECK(early);
    CHECK(reducer.started().size() == reducer.bucket_count());
    CHECK(!c.params[4].grad().defined());
    for (size_t i = 0; i < 4; ++i) CHECK(torch::allclose(c.params[i].grad(), want[i], 1e-6, 1e-7));
  }
}

TEST_CASE("grad_reducer: accumulation reduces once, in the last micro-batch's backward") {
  Chain c(3, false, 11);
  const std::vector<torch::Tensor> xs = Inputs(3, 12);
  const std::vector<torch::Tensor> want = ReferenceGrads(c, xs);  // summed over the three
  SimulatedGroup group(4);
  GradientReducer reducer(group, ReduceDtype::kFp32, 1);
  reducer.BeginUpdate(c.params);
  c.Loss(xs[0]).backward();
  c.Loss(xs[1]).backward();
  CHECK(group.sums_started == 0);  // nothing travels before the last micro-batch
  torch::Tensor last = c.Loss(xs[2]);
  reducer.ExpectLastBackward(last);
  last.backward();
  CHECK(group.sums_started == int(c.params.size()));
  reducer.FinishUpdate();
  for (size_t i = 0; i < c.params.size(); ++i)
    CHECK(torch::allclose(c.params[i].grad(), want[i], 1e-6, 1e-7));
  // The next update starts from zero again.
  const std::vector<torch::Tensor> one = ReferenceGrads(c, {xs[0]});
  ReducedUpdate(reducer, c, {xs[0]});
  for (size_t i = 0; i < c.params.size(); ++i)
    CHECK(torch::allclose(c.params[i].grad(), one[i], 1e-6, 1e-7));
}

TEST_CASE("grad_reducer: bf16 travels rounded, and a reshaped tensor rebuilds the buckets") {
  Chain c(2, false, 21);
  const std::vector<torch::Tensor> xs = Inputs(1, 22);
  const std::vector<torch::Tensor> want = ReferenceGrads(c, xs);
  SimulatedGroup group(2);
  std::vector<torch::ScalarType> sent;
  group.on_start = [&](const torch::Tensor& t) { sent.push_back(t.scalar_type()); };
  GradientReducer reducer(group, ReduceDtype::kBf16);
  ReducedUpdate(reducer, c, xs);
  REQUIRE(reducer.bucket_count() == 1);
  CHECK(sent == std::vector<torch::ScalarType>{torch::kBFloat16});
  CHECK(reducer.bucket_buffer(0).scalar_type() == torch::kFloat);
  for (size_t i = 0; i < c.params.size(); ++i) {
    CHECK(!torch::equal(c.params[i].grad(), want[i]));                // rounded on the way...
    CHECK(torch::allclose(c.params[i].grad(), want[i], 1e-2, 1e-4));  // ...to bf16's precision
  }
  // Physical pruning shrinks tensors in place (set_data, gradients dropped): the next
  // update rebuilds the buckets for the new shapes, and the tensors' fresh accumulators
  // take the hooks. Here the last layer keeps 3 of its 6 outputs.
  {
    torch::NoGradGuard no_grad;
    for (size_t i : {2, 3}) {
      c.params[i].set_data(c.params[i].narrow(0, 0, 3).clone());
      c.params[i].mutable_grad() = torch::Tensor();
    }
  }
  const std::vector<torch::Tensor> again = ReferenceGrads(c, xs);
  ReducedUpdate(reducer, c, xs);
  CHECK(reducer.bucket_buffer(0).numel() == 6 * 6 + 6 + 3 * 6 + 3);
  for (size_t i = 0; i < c.params.size(); ++i)
    CHECK(torch::allclose(c.params[i].grad(), again[i], 1e-2, 1e-4));
  CHECK(ParseReduceDtype("bf16").value() == ReduceDtype::kBf16);
  CHECK(ParseReduceDtype("fp32").value() == ReduceDtype::kFp32);
  CHECK(std::string(ReduceDtypeName(ReduceDtype::kBf16)) == "bf16");
  CHECK(ParseReduceDtype("fp16").status().message() ==
        "unknown train.allreduce_dtype \"fp16\" (known: fp32, bf16)");
}

TEST_CASE("replica_sync: the head configuration is compared across ranks") {
  const ModelConfig m = testing::TinyModelConfig(2, 2, 16, 8, 32);
  torch::manual_seed(1);
  Gpt a(m), b(m);
  std::vector<torch::Tensor> pa = a->parameters(), pb = b->parameters();
  CHECK(HeadConfigurationFingerprint(a, pa) == HeadConfigurationFingerprint(b, pb));
  HeadState local;
  local.mode = HeadMode::kLocal;
  local.window = 4;
  b->attention(1)->SetHeadState(0, local);
  CHECK(HeadConfigurationFingerprint(a, pa) != HeadConfigurationFingerprint(b, pb));
  pb.pop_back();  // the optimiser lost a tensor
  CHECK(HeadConfigurationFingerprint(b, pb) != HeadConfigurationFingerprint(b, b->parameters()));

  SimulatedGroup group(2);
  ReplicaSync sync(group);
  // First sync: the fixed patterns of layers with fixed heads go out from rank 0.
  torch::Tensor alpha = torch::zeros({8}), rho = torch::zeros({8});
  a->attention(0)->SetFixedCompact(1, alpha, rho, CompactLogNormalizer(alpha, rho));
  pa = a->parameters();
  REQUIRE(sync.Sync(a, pa, "OnStart", 0).ok());
  CHECK(group.broadcasts == 3);  // layer 0's alpha, rho, logZ
  REQUIRE(sync.Sync(a, pa, "BeforeUpdate", 1).ok());
  CHECK(group.broadcasts == 3);  // unchanged: only compared
  a->attention(1)->SetHeadState(1, local);
  REQUIRE(sync.Sync(a, pa, "AfterUpdate", 1).ok());
  CHECK(group.broadcasts == 6);  // changed: sent again
  group.peer_max_offset = 5;     // another rank's fingerprint differs
  Status st = sync.Sync(a, pa, "the methods' AfterUpdate", 7);
  CHECK(st.code() == Status::Code::kInternal);
  CHECK(st.message().find("after the methods' AfterUpdate at step 7 differs across ranks") !=
        std::string::npos);
}

}  // namespace
}  // namespace headlab
