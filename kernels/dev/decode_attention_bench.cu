// decode_attention_bench.cu: dev bench of the split-K decode kernel (decode_attention.h).
//
// One decode step's attention of one layer, as the AoH decoder launches it (one launch per
// cache segment), on constant bf16 caches: the 124M shape (12 heads, 12 KV heads, d = 64)
// with every head full, and with half the KV heads in a bounded streaming segment (sink 128
// + recent 256) and half full; then a GQA shape (32 heads over 8 KV heads, d = 128); at
// B = 1, then at B = 16 (the decode target's batch). Prints the median time of a step's
// launches (CUDA events, 20 warm-ups, 200 timed, the segments' launches back to back) and
// the bytes of K and V the visible slots hold, read once, as GB/s (a cache below the L2's
// 50 MB may be served from L2 after the first round: read the B = 1, 4K rows with that in
// mind), with the split count used; the 124M shapes also at forced split counts, at B = 1
// and 16 (what the automatic choice, DecodeSplits, is tuned from: version 1 aims at four
// CTAs per SM, version 2 — g = 1 at d = 64, the 124M shape — at one wave of its five
// resident CTAs an SM). The numerics are
// kernels_decode_gpu_test's job (run it first).
//
//   cmake -S . -B /tmp/kb -DHEADLAB_ONLY=kernels && cmake --build /tmp/kb -j
//   /tmp/kb/kernels/decode_attention_bench
#include <algorithm>
#include <cstdio>
#include <vector>

#include "kernels/decode_attention.h"
#include "kernels/testing/attention_harness.cuh"

namespace headlab {
namespace kernels {
namespace {

using testing::DeviceBuffer;

struct Segment {
  int kv_heads;  // KV heads in the segment
  int entries, lead, tail_start;
  HeadSpec spec;  // the state of all its query heads
};

// Median ms of `launch()` (one step's launches): CUDA events around it, 20 warm-ups, 200 timed.
template <typename Launch>
double MedianMs(Launch&& launch) {
  cudaEvent_t e0, e1;
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventCreate(&e0));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int rep = 0; rep < 220; ++rep) {
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventRecord(e0));
    launch();
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventRecord(e1));
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventSynchronize(e1));
    float t = 0;
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventElapsedTime(&t, e0, e1));
    if (rep >= 20) ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median ms of the launches of one decode step over `segments` (one launch for all of them,
// or with `per_segment` one launch each, as before segments shared a launch); *bytes
// receives the K/V bytes of the slots the kernel loads.
double TimeStep(int B, int H, int KV, int d, int query, const std::vector<Segment>& segments,
                int splits, double* bytes, int* used_splits, bool per_segment = false) {
  const int g = H / KV;
  std::vector<HeadSpec> specs(static_cast<size_t>(H), HeadSpec{});
  std::vector<std::vector<int>> kv(segments.size());
  std::vector<DeviceBuffer> caches;
  DeviceBuffer q(size_t(B) * H * d * 2), o(size_t(B) * H * d * 2);
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemset(q.ptr, 0x3c, q.bytes));  // bf16 ~0.011 everywhere
  *bytes = 0;
  int next_kv = 0;
  for (size_t s = 0; s < segments.size(); ++s) {
    const Segment& seg = segments[s];
    for (int i = 0; i < seg.kv_heads; ++i, ++next_kv) {
      kv[s].push_back(next_kv);
      for (int r = 0; r < g; ++r) specs[size_t(next_kv * g + r)] = seg.spec;
    }
    caches.emplace_back(size_t(B) * seg.kv_heads * seg.entries * d * 2 * 2);  // K then V
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemset(caches.back().ptr, 0x3c, caches.back().bytes));
  }
  DecodeArgs all;
  all.batch = B;
  all.heads = H;
  all.kv_heads = KV;
  all.head_dim = d;
  all.scale = 1.f / std::sqrt(float(d));
  all.dtype = DType::kBF16;
  all.head_specs = specs.data();
  all.query_position = query;
  all.q = {q.ptr, int64_t(H) * d, 0, d};
  all.o = {o.ptr, int64_t(H) * d, 0, d};
  all.splits = splits;
  all.segments = int(segments.size());
  for (size_t s = 0; s < segments.size(); ++s) {
    const Segment& seg = segments[s];
    DecodeCache& c = all.caches[s];
    const size_t half = size_t(seg.kv_heads) * seg.entries * d;  // elements of one sequence's K
    c.k = caches[s].ptr;
    c.v = static_cast<char*>(caches[s].ptr) + 2 * half * B;
    c.stride_b = int64_t(half);
    c.stride_h = int64_t(seg.entries) * d;
    c.stride_t = d;
    c.entries = seg.entries;
    c.lead = seg.lead;
    c.tail_start = seg.tail_start;
    c.kv_heads = seg.kv_heads;
    c.layer_kv_heads = kv[s].data();
    *bytes += 2.0 * 2 * B * seg.kv_heads * seg.entries * d;  // every slot is visible here
  }
  *used_splits = DecodeSplits(all, 0);
  std::vector<DecodeArgs> args;  // the launches of one step
  if (per_segment) {
    for (size_t s = 0; s < segments.size(); ++s) {
      DecodeArgs one = all;
      one.segments = 1;
      one.caches[0] = all.caches[s];
      args.push_back(one);
    }
  } else {
    args.push_back(all);
  }
  std::vector<DeviceBuffer> work;
  DeviceBuffer counts(DecodeCountsBytes(all));  // zero, and left zero by every launch
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemset(counts.ptr, 0, DecodeCountsBytes(all)));
  for (DecodeArgs& a : args) {
    work.emplace_back(DecodeWorkspaceBytes(a));
    a.workspace = work.back().ptr;
    a.counts = static_cast<int*>(counts.ptr);
  }
  return MedianMs([&] {
    for (const DecodeArgs& a : args) {
      KernelStatus st = DecodeAttention(a, nullptr);
      if (!st.ok()) {
        std::printf("launch refused: %s\n", st.message);
        std::exit(1);
      }
    }
  });
}

// The decode kernel's bytes without its work: CTA (split, head, b) of the same grid reads its
// split's K and V rows (`heads` caches of `entries` slots of d = 64 bf16, K then V as TimeStep
// lays them out) as the version-2 kernel does, 8 lanes a slot and four steps of 16 slots in
// flight, and folds them into a word it writes only if it equals a value it cannot take.
// `work` 0 skips the loads: a launch of the grid alone.
__global__ void __launch_bounds__(128)
    PlainReadKernel(const uint4* k, const uint4* v, int heads, int entries, int split_len, int work,
                    unsigned* sink) {
  const int split = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, grp = lane / 8, li = lane % 8;
  const int64_t head = (int64_t(b) * heads + h) * entries;  // rows of 8 vectors
  const int lo = split * split_len, hi = min(entries, lo + split_len);
  unsigned acc = 0;
  for (int base = lo + warp * 4; work && base < hi; base += 64) {
    uint4 kr[4], vr[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int slot = base + grp + 16 * u;
      kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
      if (slot < hi) {
        kr[u] = k[(head + slot) * 8 + li];
        vr[u] = v[(head + slot) * 8 + li];
      }
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= kr[u].x ^ kr[u].w ^ vr[u].y ^ vr[u].z;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;  // never, but the loads must stay
}

// Median ms of PlainReadKernel over B sequences x `heads` full caches of `entries` slots in
// `splits` splits, timed as TimeStep times a step.
double TimePlainRead(int B, int heads, int entries, int splits, bool work) {
  const size_t half = size_t(B) * heads * entries * 64 * 2;  // bytes of K
  DeviceBuffer kv(2 * half), sink(4);
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemset(kv.ptr, 0x3c, kv.bytes));
  const uint4* k = static_cast<const uint4*>(kv.ptr);
  const uint4* v = reinterpret_cast<const uint4*>(static_cast<const char*>(kv.ptr) + half);
  const int split_len = (entries + splits - 1) / splits;
  return MedianMs([&] {
    PlainReadKernel<<<dim3(splits, heads, B), 128>>>(k, v, heads, entries, split_len, work ? 1 : 0,
                                                     static_cast<unsigned*>(sink.ptr));
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaGetLastError());
  });
}

// splits 0: the kernel's own choice (DecodeSplits); the column shows the first segment's.
void Report(const char* name, int H, int KV, int d, int L, const std::vector<Segment>& segs,
            int splits = 0, int B = 1, bool per_segment = false) {
  double bytes = 0;
  int used = 0;
  const double ms = TimeStep(B, H, KV, d, L - 1, segs, splits, &bytes, &used, per_segment);
  std::printf("%-28s B=%2d L=%6d  splits %3d%s  %8.4f ms  %8.2f MiB  %7.1f GB/s\n", name, B, L,
              used, splits > 0 ? " (forced)" : "         ", ms, bytes / (1 << 20),
              bytes / (ms * 1e-3) / 1e9);
}

}  // namespace
}  // namespace kernels
}  // namespace headlab

int main() {
  using namespace headlab::kernels;
  HeadSpec ordinary;
  HeadSpec streaming;
  streaming.state = HeadState::kStreaming;
  streaming.sink = 128;
  streaming.recent = 256;
  std::printf("one layer's decode-step attention, bf16, B = 1 (median of 200)\n");
  for (int L : {4096, 16384, 32000}) {
    Report("124M full (12/12, d 64)", 12, 12, 64, L, {{12, L, L, L, ordinary}});
    // After a step: sink 128 + recent 256 slots (lead 128, tail from L - 256).
    Report("124M 50% streaming", 12, 12, 64, L,
           {{6, L, L, L, ordinary}, {6, 384, 128, L - 256, streaming}});
    Report("  ... a launch per segment", 12, 12, 64, L,
           {{6, L, L, L, ordinary}, {6, 384, 128, L - 256, streaming}}, 0, 1, true);
    Report("GQA 32/8, d 128, full", 32, 8, 128, L, {{8, L, L, L, ordinary}});
    // The split count's effect on the 124M full shape (more CTAs: more bytes in flight).
    for (int splits : {11, 22, 33, 44, 88, 176})
      Report("124M full (12/12, d 64)", 12, 12, 64, L, {{12, L, L, L, ordinary}}, splits);
  }
  // The decode target's shape (B = 16, 16K; docs/BENCHMARKS.md): the time to read the cache
  // once at the H200's 4.8 TB/s is bytes / 4.8e12.
  std::printf("the same at B = 16\n");
  for (int L : {4096, 16384}) {
    Report("124M full (12/12, d 64)", 12, 12, 64, L, {{12, L, L, L, ordinary}}, 0, 16);
    Report("124M 50% streaming", 12, 12, 64, L,
           {{6, L, L, L, ordinary}, {6, 384, 128, L - 256, streaming}}, 0, 16);
    Report("  ... a launch per segment", 12, 12, 64, L,
           {{6, L, L, L, ordinary}, {6, 384, 128, L - 256, streaming}}, 0, 16, true);
    Report("GQA 32/8, d 128, full", 32, 8, 128, L, {{8, L, L, L, ordinary}}, 0, 16);
  }
  // The split count at B = 16, 16K: 192 (full) or 96 + 96 (streaming) (sequence, KV head)
  // pairs, so each split adds 1.5 or 0.7 CTAs per SM; where one wave ends matters here.
  // Past 8: several waves, so that the block scheduler hands the short splits to whichever
  // SM frees first (does the launch's tail shrink more than the merges grow?).
  for (int splits : {1, 2, 3, 4, 6, 8, 12, 16, 24}) {
    const int L = 16384;
    Report("124M full (12/12, d 64)", 12, 12, 64, L, {{12, L, L, L, ordinary}}, splits, 16);
    Report("124M 50% streaming", 12, 12, 64, L,
           {{6, L, L, L, ordinary}, {6, 384, 128, L - 256, streaming}}, splits, 16);
  }
  // What a launch costs beyond its bytes: the full 124M layer at B = 16 over lengths (the
  // intercept of time against bytes), beside a plain read of the same bytes by the same grid
  // (3 splits: the automatic count here) and that grid launched with nothing to read.
  std::printf("the decode kernel against a plain read of its bytes, B = 16, 3 splits\n");
  for (int L : {1024, 2048, 4096, 8192, 16384}) {
    Report("124M full (12/12, d 64)", 12, 12, 64, L, {{12, L, L, L, ordinary}}, 3, 16);
    const double bytes = 2.0 * 2 * 16 * 12 * double(L) * 64;
    const double read = TimePlainRead(16, 12, L, 3, true),
                 empty = TimePlainRead(16, 12, L, 3, false);
    std::printf(
        "  plain read, same grid      B=16 L=%6d  splits   3 (forced)  %8.4f ms  %8.2f MiB  %7.1f "
        "GB/s"
        "   (the grid alone %.4f ms)\n",
        L, read, bytes / (1 << 20), bytes / (read * 1e-3) / 1e9, empty);
  }
  return 0;
}
