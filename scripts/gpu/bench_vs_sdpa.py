#!/usr/bin/env python3
"""bench_vs_sdpa.py: times the headlab hybrid-head kernels against PyTorch's attention in ONE
process on the device machine: SDPA with the flash and the cuDNN backends
(torch.nn.attention.sdpa_kernel) and compiled FlexAttention where it applies (causal and
sliding-window masks), for every row of the kernel-targets table (docs/BENCHMARKS.md) at d = 64 and d = 128: all ordinary
heads (fwd, fwd+bwd), fixed heads 25 % / 50 %, local W=512 and W=1024, pruned 50 %, streaming
50 % (sink 128 + recent 256); bf16, B=8, H=12, T=4096, causal.

The kernels come in through libheadlab_kernels_capi.so (kernels/dev/c_api.cu) and ctypes;
tensors are torch CUDA tensors, timed with torch.cuda.Event: warm-ups discarded, median over
launches, and legs alternating per round (ABBA); ratios are reported as median [min, max]
over the rounds. The whole layer as training runs it (train.attention = auto: the measured
choice among all-fused, SDPA + fused, and fixed heads as GEMM / convolution / fused) is timed
by the C++ layer bench (kernels_exec_fused_test "[layer_bench]", docs/BENCHMARKS.md).

  python3 scripts/gpu/bench_vs_sdpa.py --lib BUILD/libheadlab_kernels_capi.so [--quick]
"""
import argparse
import ctypes
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

ORDINARY, FIXED, STREAMING, LOCAL, PRUNED = 0, 1, 2, 3, 4
DTYPE_CODE = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}


class Kernels:
    """ctypes binding of kernels/dev/c_api.cu."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.err = ctypes.create_string_buffer(256)

    @staticmethod
    def _arr(ctype, values):
        return (ctype * len(values))(*values)

    @staticmethod
    def _view(t):  # (B, T, heads, d) tensor view, last dim contiguous
        assert t.stride(3) == 1
        return [t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)]

    def _common(self, q, k, states, fixed=None):
        """fixed: None, or per head None or (alpha, rho, log_z) fp32 device tensors."""
        B, T, H, d = q.shape
        dims = self._arr(ctypes.c_int32, [B, T, H, k.shape[2], d, DTYPE_CODE[q.dtype]])
        flat = [x for s in states for x in s]
        ptrs = []
        for h in range(H):
            f = fixed[h] if fixed else None
            ptrs += [t.data_ptr() for t in f] if f else [0, 0, 0]
        return dims, self._arr(ctypes.c_int32, flat), self._arr(ctypes.c_uint64, ptrs)

    def forward(self, q, k, v, o, lse, states, path=0, fixed=None):
        dims, st, fx = self._common(q, k, states, fixed)
        views = self._arr(ctypes.c_uint64, sum((self._view(t) for t in (q, k, v, o)), []))
        rc = self.lib.headlab_attention_forward(
            dims, ctypes.c_float(q.shape[3] ** -0.5), st, fx, views, ctypes.c_uint64(lse.data_ptr()),
            ctypes.c_int32(path), ctypes.c_uint64(torch.cuda.current_stream().cuda_stream),
            self.err, 256)
        if rc:
            raise RuntimeError(self.err.value.decode())

    def backward(self, q, k, v, o, do, dq, dk, dv, lse, ws, states, path=0, fixed=None):
        dims, st, fx = self._common(q, k, states, fixed)
        views = self._arr(ctypes.c_uint64,
                          sum((self._view(t) for t in (q, k, v, o, do, dq, dk, dv)), []))
        rc = self.lib.headlab_attention_backward(
            dims, ctypes.c_float(q.shape[3] ** -0.5), st, fx, views, ctypes.c_uint64(lse.data_ptr()),
            ctypes.c_uint64(ws.data_ptr()), ctypes.c_int32(path),
            ctypes.c_uint64(torch.cuda.current_stream().cuda_stream), self.err, 256)
        if rc:
            raise RuntimeError(self.err.value.decode())

    def workspace_bytes(self, q, k):
        B, T, H, d = q.shape
        dims = self._arr(ctypes.c_int32, [B, T, H, k.shape[2], d, DTYPE_CODE[q.dtype]])
        self.lib.headlab_attention_workspace_bytes.restype = ctypes.c_uint64
        return self.lib.headlab_attention_workspace_bytes(dims)


def time_ms(fn, reps=10, warm=3):
    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def compare(fa, fb, rounds=5):
    """Times A and B alternately; returns (median A ms, median B ms, B/A median, min, max)."""
    ta, tb, r = [], [], []
    for i in range(rounds):
        if i % 2 == 0:
            x, y = time_ms(fa), time_ms(fb)
        else:
            y, x = time_ms(fb), time_ms(fa)
        ta.append(x)
        tb.append(y)
        r.append(y / x)
    return statistics.median(ta), statistics.median(tb), statistics.median(r), min(r), max(r)


def rel_l2(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def fixed_prior(T, dev, seed):
    """A compact fixed pattern (SAF eq. 3): alpha, rho and log_z = log sum_k exp(alpha + rho)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    alpha = (torch.randn(T, generator=g) * 0.5).to(dev)
    rho = (-0.01 * torch.arange(T) + torch.randn(T, generator=g) * 0.2).to(dev)
    i = torch.arange(T, device=dev)
    logits = alpha[None, :] + rho[(i[:, None] - i[None, :]).clamp(min=0)]
    logits = logits.masked_fill(i[None, :] > i[:, None], float("-inf"))
    return alpha.contiguous(), rho.contiguous(), torch.logsumexp(logits, 1).contiguous()


def flex_runner(mask_name, window, T, qt, kt, vt, dot, bwd):
    """Compiled FlexAttention with a causal or sliding-window block mask; None if unavailable."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError:
        return None
    if mask_name == "causal":
        def mask(b, h, q, k):
            return q >= k
    else:
        def mask(b, h, q, k):
            return (q >= k) & (q - k < window)
    block = create_block_mask(mask, None, None, T, T, device=qt.device)
    flex = torch.compile(flex_attention)
    qg, kg, vg = (x.detach().contiguous().requires_grad_(bwd) for x in (qt, kt, vt))

    def run():
        out = flex(qg, kg, vg, block_mask=block)
        if bwd:
            torch.autograd.grad(out, (qg, kg, vg), dot)
    try:
        run()
        with torch.no_grad():  # validate before timing: against SDPA with the same mask
            got = flex(qt, kt, vt, block_mask=block)
            i = torch.arange(T, device=qt.device)
            allowed = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < (window or T))
            want = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=allowed)
        err = rel_l2(got, want)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - any compile failure means "not measured"
        print(f"  flex {mask_name}: unavailable ({type(e).__name__}: {str(e)[:120]})")
        return None
    print(f"  validate flex-{mask_name} vs sdpa with the mask: rel L2 o {err:.1e} {'ok' if err < 2e-2 else 'FAIL'}")
    return run if err < 2e-2 else None


def fmt(r):
    """A ratio triple (median, min, max) as 'median [min, max]'."""
    return f"{r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]"


def rows(kern, B, H, T, d, dt, fwd_only=False):
    """The kernel-targets table at head dim d: ours against SDPA flash, SDPA cuDNN and FlexAttention."""
    dev = "cuda"
    torch.manual_seed(d)
    q, k, v, do = (torch.randn(B, T, H, d, device=dev, dtype=dt) for _ in range(4))
    o = torch.empty_like(q)
    lse = torch.empty(B, H, T, device=dev, dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    ws = torch.empty(kern.workspace_bytes(q, k), device=dev, dtype=torch.uint8)
    qt, kt, vt, dot = (x.transpose(1, 2) for x in (q, k, v, do))
    priors = [fixed_prior(T, dev, h) for h in range(H)]
    print(f"\n== kernel-target rows: bf16 B={B} H={H} T={T} d={d} causal ==")

    def ours(states, bwd, fixed=None, path=0):
        def run():
            kern.forward(q, k, v, o, lse, states, path, fixed)
            if bwd:
                kern.backward(q, k, v, o, do, dq, dk, dv, lse, ws, states, path, fixed)
        return run

    def sdpa(backend, bwd):
        qg, kg, vg = (x.detach().clone().requires_grad_(bwd) for x in (qt, kt, vt))

        def run():
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
            if bwd:
                torch.autograd.grad(out, (qg, kg, vg), dot)
        try:
            run()
        except RuntimeError as e:
            print(f"  sdpa {backend}: unavailable ({str(e)[:120]})")
            return None
        return run

    ordinary = [(ORDINARY, 0, 0, 0)] * H
    # Validate this head dim before timing: our forward (the dispatched path) against SDPA.
    ours(ordinary, False)()
    want = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    err = rel_l2(o.transpose(1, 2), want)
    print(f"  validate ours fwd vs sdpa at d={d}: rel L2 o {err:.1e} {'ok' if err < 2e-2 else 'FAIL'}")
    if err >= 2e-2:
        sys.exit(1)

    def baseline_rows(label, mine, bwd, flex_mask=None, window=0):
        """Ours vs each baseline: throughput ours/baseline = baseline ms / our ms."""
        legs = [("sdpa-flash", sdpa(SDPBackend.FLASH_ATTENTION, bwd)),
                ("sdpa-cudnn", sdpa(SDPBackend.CUDNN_ATTENTION, bwd))]
        if flex_mask:
            legs.append((f"flex-{flex_mask}", flex_runner(flex_mask, window, T, qt, kt, vt, dot, bwd)))
        for name, fn in legs:
            if fn is None:
                continue
            ba, oa, r, lo, hi = compare(fn, mine)
            print(f"  {label:34s} {name:14s} {ba:8.3f} ms | ours {oa:8.3f} ms | "
                  f"throughput ours/{name} {fmt((1 / r, 1 / hi, 1 / lo))}")

    def own_ratio(label, states, bwd, fixed=None):
        """Our time for `states` over our all-ordinary time (lower is better)."""
        a, b, r, lo, hi = compare(ours(ordinary, bwd), ours(states, bwd, fixed))
        print(f"  {label:34s} ours {b:8.3f} ms / ours all-ordinary {a:8.3f} ms = {fmt((r, lo, hi))}")

    for bwd, what in ((False, "fwd"),) + ((True, "fwd+bwd"),) * (not fwd_only):
        baseline_rows(f"all ordinary {what}", ours(ordinary, bwd), bwd, "causal")
    # Our paths against each other (path 4: warp-specialised, the dispatched one on sm_90;
    # 3: synchronous wgmma, d = 64 only; 2: mma.sync), forward and forward + backward.
    for bwd, what in ((False, "fwd"),) + ((True, "fwd+bwd"),) * (not fwd_only):
        for path, name in ((3, "sync wgmma"), (2, "mma.sync")):
            if path == 3 and d != 64:
                continue
            a, b, r, lo, hi = compare(ours(ordinary, bwd, path=path), ours(ordinary, bwd, path=4))
            label = f"all ordinary {what}, ws / {name}"
            print(f"  {label:34s} ours-ws {b:8.3f} ms / {name} {a:8.3f} ms = {fmt((r, lo, hi))}")
    half = H // 2
    streaming = [(STREAMING, 0, 128, 256)] * half + ordinary[half:]
    if fwd_only:
        own_ratio("streaming 50% (128+256) fwd", streaming, False)
        for W in (512, 1024):
            own_ratio(f"local W={W} fwd", [(LOCAL, W, 0, 0)] * H, False)
        return
    for frac in (0.25, 0.5):
        n = int(H * frac)
        states = [(FIXED, 0, 0, 0)] * n + [(ORDINARY, 0, 0, 0)] * (H - n)
        fixed = [priors[h] if h < n else None for h in range(H)]
        own_ratio(f"fixed {int(frac * 100)}% fwd+bwd", states, True, fixed)
    for W in (512, 1024):
        c = (W * T - W * (W - 1) / 2) / (T * (T + 1) / 2)  # keys visited / causal keys
        local = [(LOCAL, W, 0, 0)] * H
        own_ratio(f"local W={W} (c={c:.3f}) fwd+bwd", local, True)
        baseline_rows(f"local W={W} fwd", ours(local, False), False, "sliding", W)
    own_ratio("pruned 50% fwd+bwd", [(PRUNED, 0, 0, 0)] * half + ordinary[half:], True)
    own_ratio("streaming 50% (128+256) fwd+bwd", streaming, True)
    own_ratio("streaming 50% (128+256) fwd", streaming, False)
    own_ratio("local W=512 fwd", [(LOCAL, 512, 0, 0)] * H, False)


def allow_flex_recompiles(limit=64):
    """Every FlexAttention runner compiles the same function (each mask, head dim and grad
    mode is a new graph); past dynamo's default limit of 8 it silently ran unfused, and the
    d = 128 rows then compared against a 50-130 ms eager fallback)."""
    import torch._dynamo
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), limit))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="path to libheadlab_kernels_capi.so")
    ap.add_argument("--quick", action="store_true", help="T=1024 instead of 4096")
    ap.add_argument("--fwd-only", action="store_true",
                    help="only the forward rows (all ordinary vs the baselines and our other paths, "
                         "streaming and local over all ordinary)")
    args = ap.parse_args()
    allow_flex_recompiles()
    kern = Kernels(args.lib)
    torch.manual_seed(0)
    B, H, T, d = 8, 12, (1024 if args.quick else 4096), 64
    dt = torch.bfloat16
    dev = "cuda"
    q, k, v, do = (torch.randn(B, T, H, d, device=dev, dtype=dt) for _ in range(4))
    o = torch.empty_like(q)
    lse = torch.empty(B, H, T, device=dev, dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    ws = torch.empty(kern.workspace_bytes(q, k), device=dev, dtype=torch.uint8)
    states = [(ORDINARY, 0, 0, 0)] * H
    print(f"device {torch.cuda.get_device_name()} torch {torch.__version__}; bf16 B={B} H={H} T={T} d={d}")

    # SDPA takes (B, H, T, d); transposed views of the same storage, no copies.
    qt, kt, vt, dot = (x.transpose(1, 2) for x in (q, k, v, do))
    qg, kg, vg = (x.detach().clone().requires_grad_(True) for x in (qt, kt, vt))

    # path 0: the dispatched kernels (on sm_90 the warp-specialised forward and backward);
    # 2: the mma.sync kernels, validated against flash.
    def ours(path, bwd):
        def run():
            kern.forward(q, k, v, o, lse, states, path)
            if bwd:
                kern.backward(q, k, v, o, do, dq, dk, dv, lse, ws, states, path)
        return run

    results = {}  # backends validated
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        def sdpa_fwd():
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)

        def sdpa_fwd_bwd():
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
            return out, torch.autograd.grad(out, (qg, kg, vg), dot)

        # Validate before timing: our outputs and gradients against this backend's.
        try:
            ref, (gq, gk, gv) = sdpa_fwd_bwd()
        except RuntimeError as e:
            print(f"sdpa {name}: unavailable ({e})")
            continue
        paths = ((0, "ours"), (2, "ours-mma")) if name == "flash" else ((0, "ours"),)
        for path, label in paths:
            ours(path, True)()
            torch.cuda.synchronize()
            errs = [rel_l2(o.transpose(1, 2), ref), rel_l2(dq.transpose(1, 2), gq),
                    rel_l2(dk.transpose(1, 2), gk), rel_l2(dv.transpose(1, 2), gv)]
            ok = all(e < 2e-2 for e in errs)
            print(f"validate {label} vs sdpa {name}: rel L2 o {errs[0]:.1e} dq {errs[1]:.1e} "
                  f"dk {errs[2]:.1e} dv {errs[3]:.1e} {'ok' if ok else 'FAIL'}")
            if not ok:
                sys.exit(1)
        results[name] = True
    for dim in (64, 128):
        rows(kern, B, H, T, dim, dt, args.fwd_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
