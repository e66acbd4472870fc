// rope_append_op_test.cc: the RoPE + K/V append kernel (rope_append_op.h) against the same
// steps in LibTorch, written here: swap the halves, x * cos' then + swapped * sin' (each
// rounded to the dtype, as two kernels would), index_copy_ of keys and values into the slot
// of the position (slot = p, or sink + (p - sink) mod ring in a ring), rotated by row p of
// tables of 40 positions (every other row different). bf16 and fp32, d = 64 and 128, a full
// segment and a ring in one call, a KV head no segment caches, no rotation, a position past
// the tables (nothing written).
// The written slot must match to 1 unit in the last place of bf16 (fp32: 1e-6 relative), every
// other slot must be untouched, values copied exactly. The same for a prefill chunk
// (RopeAppendChunkInto: per-token tables, slots from first_slot on), and a qkv off the 16-byte
// alignment the vector form needs (the one-element form). Plain main; gpu label.
#include <cstdio>
#include <string>

#include "kernels/torch/plain_test.h"
#include "kernels/torch/rope_append_op.h"

namespace headlab {
namespace kernels {
namespace {

using plain_test::Expect;

// x [.., d] rotated as the decoder's reference does (decoder_attention.cc Rotate).
torch::Tensor Rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  torch::Tensor swapped = torch::cat({x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return torch::addcmul(x * cos, swapped, sin);
}

bool Close(const torch::Tensor& got, const torch::Tensor& want) {
  const double rel = got.scalar_type() == torch::kFloat ? 1e-6 : 1.0 / 128;  // bf16: 8 bits
  torch::Tensor g = got.to(torch::kDouble), w = want.to(torch::kDouble);
  return ((g - w).abs() <= w.abs() * rel + 1e-6).all().item<bool>();
}

// misaligned: qkv starts one element into its buffer, so the kernel takes its one-element
// form instead of 16-byte vectors.
void Case(torch::ScalarType dt, int64_t d, bool rotate, int64_t position, bool misaligned = false) {
  const int64_t B = 2, H = 6, KV = 3;  // g = 2
  const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(dt);
  const int64_t n = B * (H + 2 * KV) * d;
  torch::Tensor qkv = misaligned
                          ? torch::randn({n + 1}, opts).narrow(0, 1, n).view({B, H + 2 * KV, d})
                          : torch::randn({B, H + 2 * KV, d}, opts);
  constexpr int64_t kPositions = 40;  // the tables' rows
  torch::Tensor cos, sin;
  if (rotate) {
    torch::Tensor angle = torch::rand({kPositions, d / 2}, opts.dtype(torch::kFloat)) * 6.28;
    cos = torch::cat({angle.cos(), angle.cos()}, 1).to(dt);
    sin = torch::cat({-angle.sin(), angle.sin()}, 1).to(dt);
  }
  const bool past = rotate && position >= kPositions;  // the kernel writes nothing
  // KV head 2 in a full segment of 40 slots; KV head 0 in a ring (sink 3, ring 5); KV head 1
  // in no segment.
  AppendTarget full, ring;
  full.k_buf = torch::randn({B, 1, 40, d}, opts);
  full.v_buf = torch::randn({B, 1, 40, d}, opts);
  full.layer_kv_heads = {2};
  ring.k_buf = torch::randn({B, 1, 8, d}, opts);
  ring.v_buf = torch::randn({B, 1, 8, d}, opts);
  ring.layer_kv_heads = {0};
  ring.sink = 3;
  ring.ring = 5;
  const torch::Tensor fk0 = full.k_buf.clone(), fv0 = full.v_buf.clone(), rk0 = ring.k_buf.clone(),
                      rv0 = ring.v_buf.clone();
  torch::Tensor pos = torch::full({1}, position, torch::dtype(torch::kLong).device(torch::kCUDA));
  torch::Tensor q = RopeAppendInto(qkv, H, KV, cos, sin, {full, ring}, pos);

  auto rot = [&](const torch::Tensor& x) {
    return rotate && !past ? Rotate(x, cos[position], sin[position]) : x;
  };
  const torch::Tensor want_q = rot(qkv.narrow(1, 0, H));
  const torch::Tensor keys = rot(qkv.narrow(1, H, KV)), values = qkv.narrow(1, H + KV, KV);
  const int64_t ring_slot = position < 3 ? position : 3 + (position - 3) % 5;
  torch::Tensor fk = fk0.clone(), fv = fv0.clone(), rk = rk0.clone(), rv = rv0.clone();
  if (!past) {
    fk.select(2, position).copy_(keys.select(1, 2).unsqueeze(1));
    fv.select(2, position).copy_(values.select(1, 2).unsqueeze(1));
    rk.select(2, ring_slot).copy_(keys.select(1, 0).unsqueeze(1));
    rv.select(2, ring_slot).copy_(values.select(1, 0).unsqueeze(1));
  }
  char what[160];
  std::snprintf(what, sizeof(what), "%s d=%lld %s position %lld (ring slot %lld)%s",
                std::string(c10::toString(dt)).c_str(), (long long)d,
                rotate ? "rotated" : "no rotation", (long long)position, (long long)ring_slot,
                misaligned ? ", qkv misaligned" : "");
  if (!past) Expect(Close(q, want_q), std::string(what) + ": queries");
  Expect(Close(full.k_buf, fk) && Close(ring.k_buf, rk),
         std::string(what) + ": keys in their slots, the rest untouched");
  Expect(torch::equal(full.v_buf, fv) && torch::equal(ring.v_buf, rv),
         std::string(what) + ": values copied exactly");
}

// A prefill chunk of T = 5 tokens: token t rotated by row t of the tables and written to
// slot first_slot + t of each target (KV head 2 from slot 7 of 20, KV head 0 from slot 3 of
// 10, KV head 1 in no target).
void ChunkCase(torch::ScalarType dt, int64_t d, bool rotate) {
  const int64_t B = 2, T = 5, H = 6, KV = 3;
  const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(dt);
  torch::Tensor qkv = torch::randn({B, T, H + 2 * KV, d}, opts);
  torch::Tensor cos, sin;
  if (rotate) {
    torch::Tensor angle = torch::rand({T, d / 2}, opts.dtype(torch::kFloat)) * 6.28;
    cos = torch::cat({angle.cos(), angle.cos()}, 1).to(dt);
    sin = torch::cat({-angle.sin(), angle.sin()}, 1).to(dt);
  }
  AppendTarget a, b;
  a.k_buf = torch::randn({B, 1, 20, d}, opts);
  a.v_buf = torch::randn({B, 1, 20, d}, opts);
  a.layer_kv_heads = {2};
  a.first_slot = 7;
  b.k_buf = torch::randn({B, 1, 10, d}, opts);
  b.v_buf = torch::randn({B, 1, 10, d}, opts);
  b.layer_kv_heads = {0};
  b.first_slot = 3;
  torch::Tensor ak = a.k_buf.clone(), av = a.v_buf.clone(), bk = b.k_buf.clone(),
                bv = b.v_buf.clone();
  torch::Tensor q = RopeAppendChunkInto(qkv, H, KV, cos, sin, {a, b});

  // [B, T, n, d] rotated by each token's row: the tables broadcast over the heads.
  auto rot = [&](const torch::Tensor& x) {
    return rotate ? Rotate(x, cos.unsqueeze(1), sin.unsqueeze(1)) : x;
  };
  const torch::Tensor want_q = rot(qkv.narrow(2, 0, H));
  const torch::Tensor keys = rot(qkv.narrow(2, H, KV)), values = qkv.narrow(2, H + KV, KV);
  ak.select(1, 0).narrow(1, 7, T).copy_(keys.select(2, 2));
  av.select(1, 0).narrow(1, 7, T).copy_(values.select(2, 2));
  bk.select(1, 0).narrow(1, 3, T).copy_(keys.select(2, 0));
  bv.select(1, 0).narrow(1, 3, T).copy_(values.select(2, 0));
  char what[160];
  std::snprintf(what, sizeof(what), "chunk of %lld, %s d=%lld %s", (long long)T,
                std::string(c10::toString(dt)).c_str(), (long long)d,
                rotate ? "rotated" : "no rotation");
  Expect(q.sizes() == torch::IntArrayRef({B, T, H, d}) && Close(q, want_q),
         std::string(what) + ": queries");
  Expect(Close(a.k_buf, ak) && Close(b.k_buf, bk),
         std::string(what) + ": keys in their slots, the rest untouched");
  Expect(torch::equal(a.v_buf, av) && torch::equal(b.v_buf, bv),
         std::string(what) + ": values copied exactly");
}

}  // namespace
}  // namespace kernels
}  // namespace headlab

int main() {
  using namespace headlab::kernels;
  if (!plain_test::CudaDevice()) return 1;
  torch::manual_seed(9);
  torch::NoGradGuard no_grad;
  for (torch::ScalarType dt : {torch::kBFloat16, torch::kFloat})
    for (int64_t d : {64, 128})
      for (bool rotate : {true, false})
        for (int64_t position : {1, 17, 39}) Case(dt, d, rotate, position);
  Case(torch::kBFloat16, 64, true, 40);  // past the tables: the caches untouched
  for (int64_t d : {64, 128}) Case(torch::kBFloat16, d, true, 17, /*misaligned=*/true);
  for (torch::ScalarType dt : {torch::kBFloat16, torch::kFloat})
    for (int64_t d : {64, 128})
      for (bool rotate : {true, false}) ChunkCase(dt, d, rotate);
  {  // a chunk past a target's capacity is refused
    const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
    AppendTarget a;
    a.k_buf = torch::zeros({1, 1, 4, 64}, opts);
    a.v_buf = torch::zeros({1, 1, 4, 64}, opts);
    a.layer_kv_heads = {0};
    a.first_slot = 2;
    bool refused = false;
    try {
      RopeAppendChunkInto(torch::zeros({1, 3, 3, 64}, opts), 1, 1, {}, {}, {a});
    } catch (const c10::Error& e) {
      refused = std::string(e.what()).find("first_slot") != std::string::npos;
    }
    Expect(refused, "a chunk past a target's capacity is refused");
  }
  {  // a KV head in two targets is refused
    const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
    AppendTarget a, b;
    a.k_buf = a.v_buf = torch::zeros({1, 1, 4, 64}, opts);
    a.layer_kv_heads = {0};
    b = a;
    bool refused = false;
    try {
      RopeAppendInto(torch::zeros({1, 3, 64}, opts), 1, 1, {}, {}, {a, b},
                     torch::zeros({1}, torch::dtype(torch::kLong).device(torch::kCUDA)));
    } catch (const c10::Error& e) {
      refused = std::string(e.what()).find("two segments") != std::string::npos;
    }
    Expect(refused, "a KV head in two targets is refused");
  }
  return plain_test::Finish();
}
