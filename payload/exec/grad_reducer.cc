// Bucketed gradient all-reduce started from gradient-accumulator hooks.
#include "payload/exec/grad_reducer.h"

#include <cstdint>
#include <unordered_set>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "common/config_key.h"
#include "common/run_config.h"

#if HEADLAB_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace headlab {
namespace {

constexpr size_t kNotReduced = SIZE_MAX;

bool SameKind(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.device() == b.device();
}

}  // namespace

// Runs after tensor `index`'s AccumulateGrad node, i.e. once its .grad holds the whole
// gradient of the current backward (the engine sums every path into a leaf before it).
class GradientReducer::ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(GradientReducer* reducer, size_t index) : reducer_(reducer), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    reducer_->OnGradientReady(index_);
    return outputs;
  }

 private:
  GradientReducer* reducer_;
  size_t index_;
};

// A pair of timing events on the compute stream around FinishUpdate: the stream reaches
// `start` when the last backward's kernels are done and `stop` once it has waited for the
// all-reduces (and the bf16 copies back), so their distance is the exposed communication.
struct GradientReducer::DeviceTimer {
#if HEADLAB_TORCH_CUDA
  explicit DeviceTimer(torch::Device d) : device(d) {}
  // Adds the latest pair's seconds (waiting for `stop` if need be).
  double Collect() {
    if (!pending) return 0;
    pending = false;
    stop.synchronize();
    return double(start.elapsed_time(stop)) / 1e3;
  }
  torch::Device device;
  at::cuda::CUDAEvent start{cudaEventDefault};
  at::cuda::CUDAEvent stop{cudaEventDefault};
  bool pending = false;
#endif
};

StatusOr<ReduceDtype> ParseReduceDtype(const std::string& name) {
  return ParseNamed<ReduceDtype>(kAllreduceDtypeNames, name, "train.allreduce_dtype");
}

const char* ReduceDtypeName(ReduceDtype d) { return kAllreduceDtypeNames[int(d)]; }

std::vector<std::vector<size_t>> AssignGradientBuckets(const std::vector<torch::Tensor>& params,
                                                       int64_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  int64_t bytes = 0;
  for (size_t k = params.size(); k-- > 0;) {
    const torch::Tensor& p = params[k];
    if (!p.defined() || !p.requires_grad()) continue;
    const int64_t n = p.numel() * int64_t(p.element_size());
    const bool fits = !buckets.empty() && bytes + n <= bucket_bytes &&
                      SameKind(params[buckets.back().front()], p);
    if (!fits) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(k);
    bytes += n;
  }
  return buckets;
}

GradientReducer::GradientReducer(ProcessGroup& group, ReduceDtype dtype, int64_t bucket_bytes)
    : group_(group), dtype_(dtype), bucket_bytes_(bucket_bytes) {}

GradientReducer::~GradientReducer() { RemoveHooks(); }

bool GradientReducer::SameParams(const std::vector<torch::Tensor>& params) const {
  if (params.size() != params_.size()) return false;
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].unsafeGetTensorImpl() != params_[i].unsafeGetTensorImpl() ||
        params[i].sizes() != torch::IntArrayRef(shapes_[i]))
      return false;
  return true;
}

void GradientReducer::RemoveHooks() {
  for (Hook& h : hooks_) h.accumulator->del_post_hook(h.key);
  hooks_.clear();
}

void GradientReducer::Rebuild(const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  params_ = params;
  shapes_.clear();
  for (const torch::Tensor& p : params_) shapes_.push_back(p.sizes().vec());
  views_.assign(params_.size(), torch::Tensor());
  bucket_of_.assign(params_.size(), kNotReduced);
  buckets_.clear();
  for (std::vector<size_t>& members : AssignGradientBuckets(params_, bucket_bytes_)) {
    Bucket b;
    int64_t total = 0;
    for (size_t i : members) total += params_[i].numel();
    const torch::Tensor& first = params_[members.front()];
    b.flat = torch::zeros({total}, torch::dtype(first.scalar_type()).device(first.device()));
    int64_t offset = 0;
    for (size_t i : members) {
      const int64_t n = params_[i].numel();
      views_[i] = b.flat.narrow(0, offset, n).view(params_[i].sizes());
      bucket_of_[i] = buckets_.size();
      offset += n;
    }
    if (dtype_ == ReduceDtype::kBf16 && b.flat.scalar_type() == torch::kFloat)
      b.comm = torch::empty({total}, b.flat.options().dtype(torch::kBFloat16));
    b.params = std::move(members);
    buckets_.push_back(std::move(b));
  }
  device_timer_.reset();
#if HEADLAB_TORCH_CUDA
  if (!params_.empty() && params_.front().is_cuda())
    device_timer_ = std::make_unique<DeviceTimer>(params_.front().device());
#endif
}

void GradientReducer::InstallHooks() {
  // Between updates nothing holds a tensor's accumulator (the graph of the last backward is
  // gone), so each update hooks the one its forward will attach to, and holds it until
  // FinishUpdate. A tensor that physical pruning shrank (set_data) thus gets a fresh
  // AccumulateGrad, whose input metadata has the new shape.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (bucket_of_[i] == kNotReduced) continue;
    std::shared_ptr<torch::autograd::Node> acc =
        torch::autograd::impl::grad_accumulator(params_[i]);
    if (!acc) continue;  // not a leaf: its bucket starts in FinishUpdate
    const uintptr_t key = acc->add_post_hook(std::make_unique<ReadyHook>(this, i));
    hooks_.push_back({std::move(acc), key, i});
  }
}

void GradientReducer::BeginUpdate(const std::vector<torch::Tensor>& params) {
  RemoveHooks();  // an update that never finished (its error ended the run)
  if (!SameParams(params)) Rebuild(params);
  {
    torch::NoGradGuard no_grad;
    for (Bucket& b : buckets_) b.flat.zero_();
    for (size_t i = 0; i < params_.size(); ++i)
      if (views_[i].defined() && !params_[i].grad().is_same(views_[i]))
        params_[i].mutable_grad() = views_[i];
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_backward_ = false;
    used_.assign(params_.size(), 0);
    ready_.assign(params_.size(), 0);
    next_start_ = 0;
    started_.clear();
  }
  InstallHooks();
}

void GradientReducer::ExpectLastBackward(const torch::Tensor& loss) {
  // The accumulators `loss` reaches are the tensors this backward will give a gradient
  // (DDP's find_unused_parameters): the others are ready now, so that a bucket holding a
  // tensor the model did not use does not hold back every bucket after it.
  std::unordered_set<const torch::autograd::Node*> reached;
  std::vector<torch::autograd::Node*> stack;
  if (loss.grad_fn()) stack.push_back(loss.grad_fn().get());
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (!reached.insert(node).second) continue;
    for (const torch::autograd::Edge& e : node->next_edges())
      if (e.function) stack.push_back(e.function.get());
  }
  std::lock_guard<std::mutex> lock(mu_);
  last_backward_ = true;
  for (Bucket& b : buckets_) b.pending = int64_t(b.params.size());
  ready_.assign(params_.size(), 0);
  next_start_ = 0;
  started_.clear();
  // (A tensor without an accumulator, not a leaf, never reports: its bucket waits for
  // FinishUpdate.)
  for (const Hook& h : hooks_)
    if (!reached.count(h.accumulator.get())) MarkReady(h.param);
  StartReadyBuckets(/*early=*/true);
}

void GradientReducer::OnGradientReady(size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  if (i >= used_.size()) return;
  used_[i] = 1;
  if (!last_backward_) return;
  TORCH_CHECK(!ready_[i], "gradient reducer: tensor ", i,
              " got a gradient in the update's "
              "last backward after its bucket was counted complete");
  MarkReady(i);
  StartReadyBuckets(/*early=*/true);
}

void GradientReducer::MarkReady(size_t i) {
  ready_[i] = 1;
  --buckets_[bucket_of_[i]].pending;
}

void GradientReducer::StartReadyBuckets(bool early) {
  while (next_start_ < buckets_.size() && buckets_[next_start_].pending == 0)
    Start(next_start_++, early);
}

void GradientReducer::Start(size_t index, bool early) {
  Bucket& b = buckets_[index];
  torch::Tensor& payload = b.comm.defined() ? b.comm : b.flat;
  if (b.comm.defined()) b.comm.copy_(b.flat);
  // Divided before the sum (overlapped with backward; exact for a power-of-two world).
  if (group_.world() > 1) payload.div_(double(group_.world()));
  b.work = group_.StartAllReduceSum(payload);
  started_.emplace_back(index, early);
}

void GradientReducer::FinishUpdate() {
  torch::NoGradGuard no_grad;
  const auto t0 = std::chrono::steady_clock::now();
#if HEADLAB_TORCH_CUDA
  if (device_timer_) {
    exposed_s_ += device_timer_->Collect();
    device_timer_->start.record(at::cuda::getCurrentCUDAStream(device_timer_->device.index()));
  }
#endif
  {
    // The backward has returned: no hook runs any more. Buckets still waiting (a tensor
    // that is not a leaf, or no last backward came) start now, in order.
    std::lock_guard<std::mutex> lock(mu_);
    while (next_start_ < buckets_.size()) Start(next_start_++, /*early=*/false);
    last_backward_ = false;
  }
  for (Bucket& b : buckets_) {
    if (!b.work) continue;
    b.work->Wait();
    b.work.reset();
    if (b.comm.defined()) b.flat.copy_(b.comm);
  }
#if HEADLAB_TORCH_CUDA
  if (device_timer_) {
    device_timer_->stop.record(at::cuda::getCurrentCUDAStream(device_timer_->device.index()));
    device_timer_->pending = true;
  }
#endif
  if (!device_timer_)
    exposed_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RemoveHooks();
  for (size_t i = 0; i < params_.size(); ++i)
    if (views_[i].defined() && !used_[i]) params_[i].mutable_grad() = torch::Tensor();
  ++finished_;
}

double GradientReducer::exposed_seconds() {
#if HEADLAB_TORCH_CUDA
  if (device_timer_) exposed_s_ += device_timer_->Collect();
#endif
  return exposed_s_;
}

}  // namespace headlab
