// Argument validation of the kernel entry points (host code; needs no GPU): bad shapes,
// head specs and views (and decode_linear's shapes and alignment, RoPE+append's tables and
// segments, add+norm's rows and strides) are refused with a clear status before anything is
// launched.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/add_norm.h"
#include "kernels/decode_linear.h"
#include "kernels/hybrid_attention.h"
#include "kernels/rope_append.h"

namespace headlab {
namespace kernels {
namespace {

// A 16-byte aligned address for every pointer argument: validation takes pointers and never
// dereferences them (the GPU tests run the kernels on real memory).
alignas(16) float fake_device_memory[4] = {0, 0, 0, 0};

struct Args {
  std::vector<HeadSpec> heads;
  ForwardArgs fwd;
  BackwardArgs bwd;

  Args() : heads(4) {
    AttentionShape s;
    s.batch = 2;
    s.seq_len = 97;
    s.heads = 4;
    s.kv_heads = 2;
    s.head_dim = 64;
    s.scale = 0.125f;
    s.dtype = DType::kBF16;
    TensorView v{fake_device_memory, 97 * 4 * 64, 4 * 64, 64};
    fwd.shape = bwd.shape = s;
    fwd.heads = bwd.heads = heads.data();
    fwd.q = fwd.k = fwd.v = fwd.o = v;
    fwd.lse = fake_device_memory;
    bwd.q = bwd.k = bwd.v = bwd.o = bwd.d_o = bwd.dq = bwd.dk = bwd.dv = v;
    bwd.lse = fake_device_memory;
    bwd.workspace = fake_device_memory;
  }
};

bool Mentions(const KernelStatus& st, const char* word) {
  return std::strstr(st.message, word) != nullptr;
}

TEST_CASE("valid arguments pass validation") {
  Args a;
  a.heads[1].state = HeadState::kLocal;
  a.heads[1].window = 5;
  a.heads[2].state = HeadState::kStreaming;
  a.heads[2].recent = 3;
  a.heads[3].state = HeadState::kPruned;
  REQUIRE(ValidateForward(a.fwd).ok());
  REQUIRE(ValidateBackward(a.bwd).ok());
}

TEST_CASE("bad shapes are refused") {
  Args a;
  a.fwd.shape.kv_heads = 3;
  KernelStatus st = ValidateForward(a.fwd);
  REQUIRE(st.code == KernelCode::kInvalidArgument);
  REQUIRE(Mentions(st, "kv_heads"));
  a = Args();
  a.fwd.shape.head_dim = 80;
  REQUIRE(ValidateForward(a.fwd).code == KernelCode::kUnsupported);
  a = Args();
  a.fwd.shape.seq_len = 0;
  REQUIRE(ValidateForward(a.fwd).code == KernelCode::kInvalidArgument);
  a = Args();
  a.fwd.shape.heads = kMaxHeads + 1;
  a.fwd.shape.kv_heads = 1;
  REQUIRE(ValidateForward(a.fwd).code == KernelCode::kInvalidArgument);
  a = Args();
  a.fwd.shape.scale = 0.f;
  REQUIRE(ValidateForward(a.fwd).code == KernelCode::kInvalidArgument);
}

TEST_CASE("bad head specs are refused") {
  Args a;
  a.heads[0].state = HeadState::kLocal;  // window 0
  REQUIRE(Mentions(ValidateForward(a.fwd), "window"));
  a = Args();
  a.heads[0].state = HeadState::kStreaming;  // recent 0
  REQUIRE(Mentions(ValidateForward(a.fwd), "recent"));
  a = Args();
  a.heads[0].state = HeadState::kFixed;  // no alpha/rho/log_z
  REQUIRE(Mentions(ValidateBackward(a.bwd), "alpha"));
  a = Args();
  a.heads[0].state = static_cast<HeadState>(9);
  REQUIRE(Mentions(ValidateForward(a.fwd), "state"));
  a = Args();
  a.fwd.heads = nullptr;
  REQUIRE(ValidateForward(a.fwd).code == KernelCode::kInvalidArgument);
}

TEST_CASE("missing buffers are refused") {
  Args a;
  a.fwd.o.data = nullptr;
  REQUIRE(Mentions(ValidateForward(a.fwd), "o is null"));
  a = Args();
  a.fwd.lse = nullptr;
  REQUIRE(Mentions(ValidateForward(a.fwd), "lse"));
  a = Args();
  a.bwd.workspace = nullptr;
  REQUIRE(Mentions(ValidateBackward(a.bwd), "workspace"));
  a = Args();
  a.bwd.dk.stride_t = -1;
  REQUIRE(Mentions(ValidateBackward(a.bwd), "stride"));
}

TEST_CASE("the warp-specialised kernels are refused where they cannot run, before any launch") {
  Args a;
  a.fwd.path = a.bwd.path = KernelPath::kWgmmaWs;
  a.fwd.shape.head_dim = a.bwd.shape.head_dim = 96;  // d = 64 or 128 only, on any device
  REQUIRE(std::string(ForwardPathName(a.fwd)) == "refused");
  const KernelStatus st = HybridAttentionForward(a.fwd, nullptr);
  REQUIRE(st.code == KernelCode::kUnsupported);
  REQUIRE(Mentions(st, "warp-specialised"));
  REQUIRE(std::string(BackwardPathName(a.bwd)) == "refused");
  const KernelStatus bst = HybridAttentionBackward(a.bwd, nullptr);
  REQUIRE(bst.code == KernelCode::kUnsupported);
  REQUIRE(Mentions(bst, "warp-specialised"));
}

TEST_CASE("workspace size covers the fp32 dQ accumulator and the row sums") {
  Args a;
  const AttentionShape& s = a.fwd.shape;
  REQUIRE(BackwardWorkspaceBytes(s) == 4u * s.batch * s.heads * s.seq_len * (s.head_dim + 1));
}

TEST_CASE("decode_linear: bad shapes, dtypes and alignment are refused") {
  DecodeLinearArgs a;
  a.rows = 16;
  a.in = 768;
  a.out = 2304;
  a.x = a.w = a.y = fake_device_memory;
  a.x_stride = a.w_stride = 768;
  a.y_stride = 2304;
  REQUIRE(ValidateDecodeLinear(a).ok());
  DecodeLinearArgs b = a;
  b.rows = 17;  // more than one m16n8k16 A tile
  CHECK(Mentions(ValidateDecodeLinear(b), "rows"));
  b = a;
  b.in = 760;  // not a multiple of 32
  CHECK(Mentions(ValidateDecodeLinear(b), "in (K)"));
  b = a;
  b.out = 2300;  // not a multiple of 8
  CHECK(Mentions(ValidateDecodeLinear(b), "out (N)"));
  b = a;
  b.dtype = DType::kF32;
  CHECK(ValidateDecodeLinear(b).code == KernelCode::kUnsupported);
  b = a;
  b.w = reinterpret_cast<const char*>(fake_device_memory) +
        2;  // a weight row off its 16-byte boundary
  CHECK(Mentions(ValidateDecodeLinear(b), "16-byte"));
  b = a;
  b.x_stride = 772;  // rows after the first off their 16-byte boundaries
  CHECK(Mentions(ValidateDecodeLinear(b), "16-byte"));
  b = a;
  b.y_stride = 2000;
  CHECK(Mentions(ValidateDecodeLinear(b), "stride"));
  b = a;
  b.activation = static_cast<DecodeActivation>(7);
  CHECK(Mentions(ValidateDecodeLinear(b), "activation"));
  b = a;
  b.y = nullptr;
  CHECK(Mentions(ValidateDecodeLinear(b), "null"));
}

TEST_CASE("rope_append: tables, segments and shapes are checked") {
  void* mem = fake_device_memory;
  const int64_t position_mem = 0;  // stands for the step's device position; never read here
  const int layer_kv[1] = {2};
  RopeAppendArgs a;  // a decode step: B = 2, 6 query heads over 3 KV heads, d = 64
  a.batch = 2;
  a.heads = 6;
  a.kv_heads = 3;
  a.head_dim = 64;
  a.qkv = a.q = mem;
  a.cos = a.sin = mem;
  a.table_rows = 40;  // positions [0, 40)
  a.position = &position_mem;
  a.segments = 1;
  a.seg[0].k = a.seg[0].v = mem;
  a.seg[0].capacity = 40;
  a.seg[0].kv_heads = 1;
  a.seg[0].layer_kv_heads = layer_kv;
  REQUIRE(ValidateRopeAppend(a).ok());
  RopeAppendArgs b = a;
  b.table_rows = 0;  // tables without a row
  CHECK(Mentions(ValidateRopeAppend(b), "tables"));
  b = a;
  b.sin = nullptr;
  CHECK(Mentions(ValidateRopeAppend(b), "together"));
  b = a;  // a chunk of 5 tokens needs a row per token
  b.position = nullptr;
  b.tokens = 5;
  b.seg[0].first_slot = 0;
  b.table_rows = 4;
  CHECK(Mentions(ValidateRopeAppend(b), "tables"));
  b.table_rows = 5;
  CHECK(ValidateRopeAppend(b).ok());
  b.seg[0].first_slot = 36;  // slots 36 .. 40 past the capacity of 40
  CHECK(Mentions(ValidateRopeAppend(b), "first_slot"));
  b = a;
  b.tokens = 2;  // a device position takes one token
  CHECK(Mentions(ValidateRopeAppend(b), "one token"));
  b = a;
  b.segments = 2;  // KV head 2 in both segments
  b.seg[1] = b.seg[0];
  CHECK(Mentions(ValidateRopeAppend(b), "two segments"));
  b = a;
  b.head_dim = 96;
  CHECK(ValidateRopeAppend(b).code == KernelCode::kUnsupported);
}

TEST_CASE("add_norm: rows, widths, strides and the norm's parameters are checked") {
  AddNormArgs a;  // a decode step's 16 rows of 768, LayerNorm
  a.rows = 16;
  a.width = 768;
  a.x = fake_device_memory;
  a.x_stride = 768;
  a.delta = a.y = fake_device_memory;
  a.delta_stride = a.y_stride = 768;
  a.weight = a.bias = fake_device_memory;
  REQUIRE(ValidateAddNorm(a).ok());
  AddNormArgs b = a;
  b.rows = 0;
  CHECK(Mentions(ValidateAddNorm(b), "rows"));
  b = a;
  b.width = kMaxAddNormWidth + 1;
  CHECK(Mentions(ValidateAddNorm(b), "width"));
  b = a;
  b.delta_stride = 700;  // shorter than a row
  CHECK(Mentions(ValidateAddNorm(b), "stride"));
  b = a;
  b.rms = true;  // RMSNorm with a bias
  CHECK(Mentions(ValidateAddNorm(b), "bias"));
  b = a;
  b.eps = 0.f;
  CHECK(Mentions(ValidateAddNorm(b), "eps"));
  b = a;
  b.weight = nullptr;
  CHECK(Mentions(ValidateAddNorm(b), "null"));
}

}  // namespace
}  // namespace kernels
}  // namespace headlab
