// decode_attention_gpu_test.cu: numerics of the split-K decode kernel (decode_attention.h)
// against an fp64 CPU reference written here from the head-state definitions of
// hybrid_attention.h (not from head_mask.h, which the kernel uses), ctest label `gpu`.
// Sweep: cached entries 1, 97, 257, 1025, 4099 (16,411 without --quick); d = 64, 128;
// fp32, bf16, fp16; GQA groups 1, 3 and 16; B = 1, 2; full segments with every head state
// mixed inside a group, bounded streaming segments (sink run + recent run of positions,
// the query's position far beyond the slots) and local heads; a segment holding
// non-adjacent KV heads of the layer; a cache with spare capacity; 1, 7 and automatic
// splits; two and three segments in one launch (full + bounded, full + streaming ring +
// local ring at a device position). fp32: relative L2 <= 1e-5. bf16/fp16: error <= 2x (+1e-6) the
// error of the fp64 reference rounded to the dtype (flash-attention's rule; the kernel accumulates
// in fp32). Outputs start as NaN: heads outside the segment must stay NaN, pruned heads become 0.
// Every launch must leave its arrival counters zero and a second launch give the same bits.
//
//   build-kernels/kernels/kernels_decode_gpu_test [--quick]
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "kernels/decode_attention.h"
#include "kernels/testing/attention_harness.cuh"

namespace headlab {
namespace kernels {
namespace {

using testing::DeviceBuffer;
using testing::DTypeName;
using testing::FromHalfBits;
using testing::ToHalfBits;

int failures = 0;

// hybrid_attention.h's definitions, restated.
bool Sees(const HeadSpec& s, int q, int k) {
  if (k > q) return false;
  switch (s.state) {
    case HeadState::kOrdinary:
      return true;
    case HeadState::kLocal:
      return q - k < s.window;
    case HeadState::kStreaming:
      return k < s.sink || q - k < s.recent;
    default:
      return false;
  }
}

// Values stored in the kernel's dtype, kept on the host as the floats they round to.
struct HostTensor {
  std::vector<float> value;
  std::vector<uint8_t> bytes;
  HostTensor(size_t n, DType dt, std::mt19937* rng, float nan_fill = 0.f, bool random = true)
      : value(n), bytes(n * DTypeSize(dt)) {
    std::normal_distribution<float> normal(0.f, 1.f);
    for (size_t i = 0; i < n; ++i) {
      float x = random ? normal(*rng) : nan_fill;
      if (dt == DType::kF32) {
        std::memcpy(&bytes[4 * i], &x, 4);
      } else {
        uint16_t u = ToHalfBits(x, dt);
        std::memcpy(&bytes[2 * i], &u, 2);
        x = FromHalfBits(u, dt);
      }
      value[i] = x;
    }
  }
};

float ReadBack(const std::vector<uint8_t>& bytes, size_t i, DType dt) {
  if (dt == DType::kF32) {
    float x;
    std::memcpy(&x, &bytes[4 * i], 4);
    return x;
  }
  uint16_t u;
  std::memcpy(&u, &bytes[2 * i], 2);
  return FromHalfBits(u, dt);
}

float RoundTo(double x, DType dt) {
  return dt == DType::kF32 ? float(x) : FromHalfBits(ToHalfBits(float(x), dt), dt);
}

struct Case {
  const char* name;
  int B = 1, H = 12, KV = 4, d = 64, capacity_extra = 0, splits = 0;
  DType dt = DType::kBF16;
  std::vector<HeadSpec> specs;   // per layer query head
  std::vector<int> seg_kv;       // the segment's layer KV heads
  std::vector<int> positions;    // position of each slot (ascending; -1: an empty ring slot)
  int lead = 0, tail_start = 0;  // the kernel's slot -> position map of `positions`
  int ring = 0;                  // > 0: the ring layout (decode_attention.h)
  int query = 0;
  bool device_position = false;  // the kernel reads the query position from the device
  // More segments launched with this one (decode_attention.h "Segments"): each its own
  // seg_kv, positions, lead, tail_start, ring and capacity_extra; the rest is this case's.
  std::vector<Case> more;
};

// A full segment: positions 0..entries-1, the query at entries - 1.
void FullCache(Case* c, int entries) {
  c->positions.resize(size_t(entries));
  for (int i = 0; i < entries; ++i) c->positions[size_t(i)] = i;
  c->lead = entries;
  c->tail_start = entries;
  c->query = entries - 1;
}

// A bounded segment after AoH §5 eviction: positions < sink, then the recent run ending at
// the query position `query` (which has just been appended).
void BoundedCache(Case* c, int sink, int recent, int query) {
  c->positions.clear();
  for (int p = 0; p < std::min(sink, query + 1); ++p) c->positions.push_back(p);
  c->lead = int(c->positions.size());
  c->tail_start = std::max(c->lead, query - recent + 1);
  for (int p = c->tail_start; p <= query; ++p) c->positions.push_back(p);
  c->query = query;
}

// A ring segment (the decoder's graph steps): slots [0, sink) hold positions 0..sink-1,
// slot sink + r the latest position p <= query with (p - sink) mod recent == r, p >= sink;
// -1 where no such position was written yet.
void RingCache(Case* c, int sink, int recent, int query) {
  c->positions.assign(size_t(sink + recent), -1);
  for (int p = 0; p <= query; ++p)
    c->positions[size_t(p < sink ? p : sink + (p - sink) % recent)] = p;
  c->lead = sink;
  c->ring = recent;
  c->query = query;
}

void Run(const Case& c, std::mt19937* rng) {
  const int B = c.B, H = c.H, KV = c.KV, d = c.d, g = H / KV;
  const float scale = 1.f / std::sqrt(float(d));
  std::vector<const Case*> segs = {&c};
  for (const Case& m : c.more) segs.push_back(&m);
  const int S = int(segs.size());
  HostTensor q(size_t(B) * H * d, c.dt, rng);
  HostTensor o(size_t(B) * H * d, c.dt, rng, NAN, /*random=*/false);
  std::vector<HostTensor> ks, vs;
  std::vector<DeviceBuffer> dks, dvs;
  for (const Case* sc : segs) {
    const size_t cells =
        size_t(B) * sc->seg_kv.size() * (sc->positions.size() + sc->capacity_extra) * d;
    ks.emplace_back(cells, c.dt, rng);
    vs.emplace_back(cells, c.dt, rng);
    dks.emplace_back(ks.back().bytes.size());
    dvs.emplace_back(vs.back().bytes.size());
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemcpy(dks.back().ptr, ks.back().bytes.data(),
                                          ks.back().bytes.size(), cudaMemcpyHostToDevice));
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemcpy(dvs.back().ptr, vs.back().bytes.data(),
                                          vs.back().bytes.size(), cudaMemcpyHostToDevice));
  }
  DeviceBuffer dq(q.bytes.size()), dout(o.bytes.size());
  HEADLAB_CUDA_CHECK_OR_EXIT(
      cudaMemcpy(dq.ptr, q.bytes.data(), q.bytes.size(), cudaMemcpyHostToDevice));
  HEADLAB_CUDA_CHECK_OR_EXIT(
      cudaMemcpy(dout.ptr, o.bytes.data(), o.bytes.size(), cudaMemcpyHostToDevice));

  DecodeArgs a;
  a.batch = B;
  a.heads = H;
  a.kv_heads = KV;
  a.head_dim = d;
  a.scale = scale;
  a.dtype = c.dt;
  a.head_specs = c.specs.data();
  a.query_position = c.query;
  a.q = {dq.ptr, int64_t(H) * d, 0, d};
  a.o = {dout.ptr, int64_t(H) * d, 0, d};
  DeviceBuffer dpos(sizeof(int64_t));
  if (c.device_position) {
    const int64_t query = c.query;
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemcpy(dpos.ptr, &query, sizeof(query), cudaMemcpyHostToDevice));
    a.device_query_position = static_cast<const int64_t*>(dpos.ptr);
    a.query_position = -12345;  // must not be read
  }
  a.segments = S;
  for (int s = 0; s < S; ++s) {
    const Case& sc = *segs[size_t(s)];
    const int n = int(sc.seg_kv.size()), cap = int(sc.positions.size()) + sc.capacity_extra;
    DecodeCache& cc = a.caches[s];
    cc.k = dks[size_t(s)].ptr;
    cc.v = dvs[size_t(s)].ptr;
    cc.stride_b = int64_t(n) * cap * d;
    cc.stride_h = int64_t(cap) * d;
    cc.stride_t = d;
    cc.entries = int(sc.positions.size());
    cc.lead = sc.lead;
    cc.tail_start = sc.tail_start;
    cc.ring = sc.ring;
    if (c.device_position && sc.ring == 0)
      cc.entries = cc.lead = cap;  // every slot; the kernel stops at the query
    cc.kv_heads = n;
    cc.layer_kv_heads = sc.seg_kv.data();
  }
  a.splits = c.splits;
  DeviceBuffer work(std::max<size_t>(DecodeWorkspaceBytes(a), 1));
  a.workspace = work.ptr;
  DeviceBuffer counts(DecodeCountsBytes(a));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemset(counts.ptr, 0, DecodeCountsBytes(a)));
  a.counts = static_cast<int*>(counts.ptr);
  KernelStatus st = DecodeAttention(a, nullptr);
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaDeviceSynchronize());
  if (!st.ok()) {
    ++failures;
    std::printf("  FAIL %s: %s\n", c.name, st.message);
    return;
  }
  std::vector<uint8_t> got(o.bytes.size());
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemcpy(got.data(), dout.ptr, got.size(), cudaMemcpyDeviceToHost));
  // The launch leaves its arrival counters zero, so that a second launch on the same
  // counters (a replayed graph) combines exactly as the first: the same bits.
  std::vector<int> left(DecodeCountsBytes(a) / sizeof(int));
  HEADLAB_CUDA_CHECK_OR_EXIT(
      cudaMemcpy(left.data(), counts.ptr, DecodeCountsBytes(a), cudaMemcpyDeviceToHost));
  const bool counts_ok = std::all_of(left.begin(), left.end(), [](int x) { return x == 0; });
  st = DecodeAttention(a, nullptr);
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaDeviceSynchronize());
  std::vector<uint8_t> again(o.bytes.size());
  HEADLAB_CUDA_CHECK_OR_EXIT(
      cudaMemcpy(again.data(), dout.ptr, again.size(), cudaMemcpyDeviceToHost));
  const bool repeat_ok = st.ok() && again == got;

  double err = 0, ref_err = 0, norm = 0;
  bool untouched_ok = true, pruned_ok = true;
  std::vector<int> seg_of(size_t(H), -1),
      slot_of(size_t(H), -1);  // a head's segment, its KV head there
  for (int s = 0; s < S; ++s)
    for (size_t i = 0; i < segs[size_t(s)]->seg_kv.size(); ++i)
      for (int r = 0; r < g; ++r) {
        seg_of[size_t(segs[size_t(s)]->seg_kv[i] * g + r)] = s;
        slot_of[size_t(segs[size_t(s)]->seg_kv[i] * g + r)] = int(i);
      }
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const size_t orow = (size_t(b) * H + h) * d;
      if (seg_of[size_t(h)] < 0) {
        for (int x = 0; x < d; ++x) untouched_ok &= std::isnan(ReadBack(got, orow + x, c.dt));
        continue;
      }
      const Case& sc = *segs[size_t(seg_of[size_t(h)])];
      const HostTensor& k = ks[size_t(seg_of[size_t(h)])];
      const HostTensor& v = vs[size_t(seg_of[size_t(h)])];
      const int n = int(sc.seg_kv.size()), L = int(sc.positions.size()),
                cap = L + sc.capacity_extra;
      const size_t kbase = (size_t(b) * n + slot_of[size_t(h)]) * cap * d;
      std::vector<double> s(size_t(L), -INFINITY);
      double mx = -INFINITY;
      for (int j = 0; j < L; ++j) {
        if (sc.positions[size_t(j)] < 0 ||
            !Sees(c.specs[size_t(h)], c.query, sc.positions[size_t(j)]))
          continue;
        double dot = 0;
        for (int x = 0; x < d; ++x)
          dot += double(q.value[orow + x]) * k.value[kbase + size_t(j) * d + x];
        s[size_t(j)] = dot * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      std::vector<double> out(size_t(d), 0.0);
      if (mx > -INFINITY) {
        double sum = 0;
        for (int j = 0; j < L; ++j) sum += std::exp(s[size_t(j)] - mx);
        for (int j = 0; j < L; ++j) {
          const double p = std::exp(s[size_t(j)] - mx) / sum;
          if (p == 0) continue;
          for (int x = 0; x < d; ++x) out[size_t(x)] += p * v.value[kbase + size_t(j) * d + x];
        }
      }
      for (int x = 0; x < d; ++x) {
        const double gx = ReadBack(got, orow + x, c.dt), rx = out[size_t(x)];
        if (c.specs[size_t(h)].state == HeadState::kPruned) pruned_ok &= gx == 0.0;
        err += (gx - rx) * (gx - rx);
        ref_err += (RoundTo(rx, c.dt) - rx) * (RoundTo(rx, c.dt) - rx);
        norm += rx * rx;
      }
    }
  err = std::sqrt(err) / std::max(std::sqrt(norm), 1e-30);
  ref_err = std::sqrt(ref_err) / std::max(std::sqrt(norm), 1e-30);
  const double bound = c.dt == DType::kF32 ? 1e-5 : 2 * ref_err + 1e-6;
  const bool ok =
      err <= bound && untouched_ok && pruned_ok && counts_ok && repeat_ok;  // err NaN fails too
  if (!ok) ++failures;
  std::printf(
      "  %s %s: B=%d H=%d KV=%d d=%d %s L=%d q=%d segments=%d splits=%d: rel L2 %.3g (bound "
      "%.3g)%s%s%s%s\n",
      ok ? "ok  " : "FAIL", c.name, B, H, KV, d, DTypeName(c.dt), int(c.positions.size()), c.query,
      S, DecodeSplits(a), err, bound, untouched_ok ? "" : " [wrote outside the segments]",
      pruned_ok ? "" : " [pruned head not zero]", counts_ok ? "" : " [arrival counts not reset]",
      repeat_ok ? "" : " [a second launch differs]");
}

}  // namespace
}  // namespace kernels
}  // namespace headlab

int main(int argc, char** argv) {
  using namespace headlab::kernels;
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing to test here\n");
    return 1;
  }
  {  // bad input is refused before any launch
    DecodeArgs bad;
    bad.batch = 1;
    bad.heads = 12;
    bad.kv_heads = 5;
    bad.head_dim = 64;
    bad.scale = 0.125f;
    if (DecodeAttention(bad, nullptr).code != KernelCode::kInvalidArgument) {
      std::printf("FAIL: kv_heads not dividing heads was accepted\n");
      return 1;
    }
  }
  std::mt19937 rng(7);
  // HeadSpec{state, window, sink, recent}
  const HeadSpec ord{HeadState::kOrdinary}, pruned{HeadState::kPruned};
  const HeadSpec stream{HeadState::kStreaming, 0, 5, 37};
  const HeadSpec local{HeadState::kLocal, 50};
  std::vector<int> lengths = {1, 97, 257, 1025, 4099};
  if (!quick) lengths.push_back(16411);
  int runs = 0;
  for (int L : lengths)
    for (int d : {64, 128})
      for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
        if (L > 4099 && dt != DType::kBF16) continue;  // keep the fp64 reference affordable
        {  // full segment, every state inside a GQA group of 3, all KV heads, B = 2
          Case c;
          c.name = "full/mixed";
          c.B = 2, c.d = d, c.dt = dt;
          c.specs = {ord,    stream, local,  pruned, ord, ord,
                     stream, stream, stream, local,  ord, pruned};
          c.seg_kv = {0, 1, 2, 3};
          FullCache(&c, L);
          Run(c, &rng), ++runs;
        }
        {  // bounded streaming segment (sink 5 + recent 37) with the query far ahead
          Case c;
          c.name = "bounded/streaming";
          c.d = d, c.dt = dt, c.capacity_extra = 64;
          c.specs.assign(12, ord);
          for (int h = 3; h < 9; ++h) c.specs[size_t(h)] = stream;
          c.seg_kv = {1, 2};
          BoundedCache(&c, stream.sink, stream.recent, L + 3 * L / 2);
          Run(c, &rng), ++runs;
        }
        {  // group 16 over one KV head, ordinary and local, forced splits
          Case c;
          c.name = "gqa16/local";
          c.H = 16, c.KV = 1, c.d = d, c.dt = dt, c.splits = 7;
          c.specs.assign(16, ord);
          for (int h = 0; h < 16; h += 3) c.specs[size_t(h)] = local;
          c.seg_kv = {0};
          FullCache(&c, L);
          Run(c, &rng), ++runs;
        }
        {  // no GQA, a segment of non-adjacent KV heads, one split, spare capacity
          Case c;
          c.name = "mha/subset";
          c.H = 4, c.KV = 4, c.d = d, c.dt = dt, c.splits = 1, c.capacity_extra = 13 * 8;
          c.specs = {ord, stream, ord, local};
          c.seg_kv = {1, 3};
          FullCache(&c, L);
          Run(c, &rng), ++runs;
        }
        {  // a full segment read at a device position, spare (random, never visible) slots
          Case c;
          c.name = "full/device-position";
          c.B = 2, c.d = d, c.dt = dt, c.capacity_extra = 100;
          c.specs = {ord,    stream, local,  pruned, ord, ord,
                     stream, stream, stream, local,  ord, pruned};
          c.seg_kv = {0, 1, 2, 3};
          c.device_position = true;
          FullCache(&c, L);
          Run(c, &rng), ++runs;
        }
        {  // a streaming ring (sink 5 + recent 37), wrapped many times or still filling
          Case c;
          c.name = "ring/streaming";
          c.d = d, c.dt = dt, c.capacity_extra = 16;
          c.specs.assign(12, ord);
          for (int h = 3; h < 9; ++h) c.specs[size_t(h)] = stream;
          c.seg_kv = {1, 2};
          c.device_position = d == 64;  // d = 128: the host position
          RingCache(&c, stream.sink, stream.recent, L - 1);
          Run(c, &rng), ++runs;
        }
        {  // two segments in one launch: full KV heads 0 and 2, a bounded streaming segment of
           // KV heads 1 and 3 (sink 5 + recent 37); KV head 2's group mixes states
          Case c;
          c.name = "two/full+bounded";
          c.B = 2, c.d = d, c.dt = dt, c.capacity_extra = 8;
          c.specs = {ord, ord,   ord,    stream, stream, stream,
                     ord, local, pruned, stream, stream, stream};
          c.seg_kv = {0, 2};
          FullCache(&c, L);
          Case bounded;
          bounded.seg_kv = {1, 3};
          bounded.capacity_extra = 64;
          BoundedCache(&bounded, stream.sink, stream.recent, c.query);
          c.more.push_back(bounded);
          Run(c, &rng), ++runs;
        }
        {  // three segments at a device position, as the decoder's captured step has them: a
           // full one (spare slots), a streaming ring and a local ring; g = 1 (version 2 at d = 64)
          Case c;
          c.name = "three/device-position";
          c.H = 6, c.KV = 6, c.d = d, c.dt = dt, c.capacity_extra = 40;
          c.specs = {ord, stream, ord, local, stream, ord};
          c.seg_kv = {0, 2, 5};
          c.device_position = true;
          FullCache(&c, L);
          Case ring, window;
          ring.seg_kv = {1, 4};
          RingCache(&ring, stream.sink, stream.recent, c.query);
          window.seg_kv = {3};
          RingCache(&window, 0, local.window, c.query);
          c.more = {ring, window};
          Run(c, &rng), ++runs;
        }
        {  // a local ring (sink 0, window 50) at a device position
          Case c;
          c.name = "ring/local";
          c.d = d, c.dt = dt;
          c.specs.assign(12, ord);
          for (int h = 0; h < 3; ++h) c.specs[size_t(h)] = local;
          c.seg_kv = {0};
          c.device_position = true;
          RingCache(&c, 0, local.window, L + 20);
          Run(c, &rng), ++runs;
        }
      }
  std::printf("%d decode cases, %d failures\n", runs, failures);
  return failures == 0 ? 0 : 1;
}
