// Host side of the decode kernel (decode_attention.h; needs no GPU): bad arguments are
// refused before a launch, and the split plan loads only the slots some head may see.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "kernels/decode_attention.h"

namespace headlab {
namespace kernels {
namespace {

// B = 1, 4 query heads over 2 KV heads, d = 64, bf16, one segment holding both KV heads.
struct Args {
  // Head specs are written HeadSpec{state, window, sink, recent}.
  std::vector<HeadSpec> specs = std::vector<HeadSpec>(4, HeadSpec{HeadState::kOrdinary});
  std::vector<int> kv = {0, 1};
  alignas(16) float fake_device_memory[4] = {0, 0, 0, 0};  // never dereferenced
  int fake_counts[1] = {0};                                // never dereferenced
  DecodeArgs a;
  Args(int entries) {
    a.batch = 1;
    a.heads = 4;
    a.kv_heads = 2;
    a.head_dim = 64;
    a.scale = 0.125f;
    a.dtype = DType::kBF16;
    a.head_specs = specs.data();
    a.query_position = entries - 1;
    a.q = a.o = {fake_device_memory, 4 * 64, 0, 64};
    a.caches[0].k = a.caches[0].v = fake_device_memory;
    a.caches[0].stride_b = int64_t(2) * 4096 * 64;
    a.caches[0].stride_h = 4096 * 64;
    a.caches[0].stride_t = 64;
    a.caches[0].entries = a.caches[0].lead = a.caches[0].tail_start = entries;
    a.caches[0].kv_heads = 2;
    a.caches[0].layer_kv_heads = kv.data();
    a.workspace = fake_device_memory;
    a.counts = fake_counts;
  }
};

bool Mentions(const KernelStatus& st, const char* word) {
  return std::strstr(st.message, word) != nullptr;
}

TEST_CASE("decode kernel: bad arguments are refused before a launch") {
  Args ok(100);
  CHECK(ValidateDecode(ok.a).ok());
  {
    Args x(100);
    x.specs[1] = HeadSpec{HeadState::kFixed};
    CHECK(x.a.head_specs == x.specs.data());
    CHECK(ValidateDecode(x.a).code == KernelCode::kUnsupported);
  }
  {
    Args x(100);
    x.a.head_dim = 96;
    CHECK(ValidateDecode(x.a).code == KernelCode::kUnsupported);
  }
  {
    Args x(100);
    x.a.kv_heads = 3;
    CHECK(Mentions(ValidateDecode(x.a), "divide"));
  }
  {
    Args x(100);
    x.specs[2] = HeadSpec{HeadState::kStreaming, 0, 4, 0};
    CHECK(Mentions(ValidateDecode(x.a), "recent"));
  }
  {
    Args x(100);
    x.kv[1] = 2;
    CHECK(Mentions(ValidateDecode(x.a), "out of range"));
  }
  {
    Args x(100);
    x.a.caches[0].lead = 101;
    CHECK(Mentions(ValidateDecode(x.a), "lead"));
  }
  {
    Args x(100);
    x.a.caches[0].stride_t = 60;  // rows no longer 16-byte aligned
    CHECK(Mentions(ValidateDecode(x.a), "aligned"));
  }
  {
    Args x(100);
    x.a.workspace = nullptr;
    CHECK(Mentions(ValidateDecode(x.a), "workspace"));
  }
  {
    Args x(100);
    x.a.counts = nullptr;
    CHECK(Mentions(ValidateDecode(x.a), "counts"));
    // One arrival counter per (sequence, KV head): B = 3 x 2 KV heads.
    x.a.batch = 3;
    CHECK(DecodeCountsBytes(x.a) == sizeof(int) * 3 * 2);
  }
  {  // a ring holds exactly lead + ring slots
    Args x(72);
    x.a.caches[0].lead = 8;
    x.a.caches[0].ring = 64;
    CHECK(ValidateDecode(x.a).ok());
    x.a.caches[0].ring = 63;
    CHECK(Mentions(ValidateDecode(x.a), "ring"));
    x.a.caches[0].ring = -1;
    CHECK(Mentions(ValidateDecode(x.a), "ring"));
  }
}

TEST_CASE("decode kernel: the split plan covers exactly the visible slots") {
  // Full cache of 16,384 slots (512 tiles), ordinary heads, 2 CTAs per split: the plan aims
  // at 528 CTAs (264 splits), capped at 256 splits of 2 tiles;
  // workspace = query rows * splits * (d + 2) floats.
  Args full(16384);
  CHECK(DecodeSplits(full.a) == 256);
  CHECK(DecodeWorkspaceBytes(full.a) == sizeof(float) * 4 * 256 * (64 + 2));
  // 4,096 slots (128 tiles): one tile per split.
  Args shorter(4096);
  CHECK(DecodeSplits(shorter.a) == 128);
  // Local heads of window 100 at query 16,383 see 100 slots: 4 tiles, so at most 4 splits.
  Args local(16384);
  for (auto& s : local.specs) s = HeadSpec{HeadState::kLocal, 100};
  CHECK(DecodeSplits(local.a) == 4);
  // A bounded streaming cache (sink 8 + recent 64: lead 8, tail from 10,000) of 72 slots,
  // all visible: 3 tiles.
  Args bounded(72);
  for (auto& s : bounded.specs) s = HeadSpec{HeadState::kStreaming, 0, 8, 64};
  bounded.a.caches[0].lead = 8;
  bounded.a.caches[0].tail_start = 10000 - 63;
  bounded.a.query_position = 10000;
  CHECK(DecodeSplits(bounded.a) == 3);
  // Forced splits are capped by the tiles; pruned heads alone see nothing: one empty split.
  Args forced(100);
  forced.a.splits = 50;
  CHECK(DecodeSplits(forced.a) == 4);
  Args pruned(100);
  for (auto& s : pruned.specs) s = HeadSpec{HeadState::kPruned};
  CHECK(DecodeSplits(pruned.a) == 1);
  // One query head per KV head in bf16 at d = 64 takes version 2, which fills one wave of
  // 660 resident CTAs: 2 KV heads ask for floor(660 / 2) = 330 splits, capped at 256 splits
  // of 2 tiles; 192 KV heads (B = 96 x 2) get floor(660 / 192) = 3, where a ceiling would
  // give 4 (768 CTAs: two waves); more pairs than resident CTAs get one split. In fp32 it is
  // version 1's 528 CTAs again (264 splits, capped at 256).
  Args mha(16384);
  mha.a.heads = 2;
  CHECK(DecodeSplits(mha.a) == 256);
  mha.a.batch = 96;
  CHECK(DecodeSplits(mha.a) == 3);
  mha.a.batch = 700;
  CHECK(DecodeSplits(mha.a) == 1);
  mha.a.batch = 1;
  mha.a.dtype = DType::kF32;
  CHECK(DecodeSplits(mha.a) == 256);
}

TEST_CASE("decode kernel: segments of one launch are planned apart and share the workspace") {
  // KV head 0: a full segment of positions 0..10,000 (the query's), its heads ordinary;
  // KV head 1: a bounded streaming segment (sink 8 + recent 64) of 72 slots.
  Args two(10001);
  two.specs[2] = two.specs[3] = HeadSpec{HeadState::kStreaming, 0, 8, 64};
  std::vector<int> kv0 = {0}, kv1 = {1};
  two.a.caches[0].kv_heads = 1;
  two.a.caches[0].layer_kv_heads = kv0.data();
  two.a.segments = 2;
  DecodeCache& bounded = two.a.caches[1];
  bounded = two.a.caches[0];
  bounded.layer_kv_heads = kv1.data();
  bounded.entries = 72;
  bounded.lead = 8;
  bounded.tail_start = 10000 - 63;
  REQUIRE(ValidateDecode(two.a).ok());
  // Version 1 (g = 2) aims at 528 CTAs of one KV head each: the full segment's 313 tiles
  // give 256 splits of ceil(313 / 256) = 2 tiles, so ceil(313 / 2) = 157; the bounded one's
  // 3 tiles give 3.
  CHECK(DecodeSplits(two.a, 0) == 157);
  CHECK(DecodeSplits(two.a, 1) == 3);
  // Each segment's rows (1 KV head x 2 query heads) x splits x (d + 2) floats, summed.
  CHECK(DecodeWorkspaceBytes(two.a) == sizeof(float) * (2 * 157 * 66 + 2 * 3 * 66));
  // A KV head in two segments, and segment counts outside [1, kMaxDecodeSegments], are refused.
  bounded.layer_kv_heads = kv0.data();
  CHECK(Mentions(ValidateDecode(two.a), "two segments"));
  bounded.layer_kv_heads = kv1.data();
  two.a.segments = 0;
  CHECK(Mentions(ValidateDecode(two.a), "segments"));
  two.a.segments = kMaxDecodeSegments + 1;
  CHECK(Mentions(ValidateDecode(two.a), "segments"));
}

TEST_CASE("decode kernel: a device position or a ring plans over every slot") {
  // The position is unknown on the host: local heads of window 100 in a full cache of
  // 16,384 slots no longer shrink the span to 4 tiles; it is the whole cache (256 splits,
  // as the ordinary heads above), and the kernel skips what the position hides.
  alignas(8) int64_t position = 0;  // never dereferenced on the host
  Args local(16384);
  for (auto& s : local.specs) s = HeadSpec{HeadState::kLocal, 100};
  local.a.device_query_position = &position;
  CHECK(DecodeSplits(local.a) == 256);
  CHECK(DecodeWorkspaceBytes(local.a) == sizeof(float) * 4 * 256 * (64 + 2));
  // A ring of sink 128 + recent 256 (384 slots, 12 tiles) at a host position: every slot
  // may hold a visible key, so all 12 tiles are planned (a linear cache with its recent run
  // at the end would be the same size).
  Args ring(384);
  for (auto& s : ring.specs) s = HeadSpec{HeadState::kStreaming, 0, 128, 256};
  ring.a.caches[0].lead = 128;
  ring.a.caches[0].ring = 256;
  ring.a.query_position = 20000;
  CHECK(DecodeSplits(ring.a) == 12);
}

}  // namespace
}  // namespace kernels
}  // namespace headlab
