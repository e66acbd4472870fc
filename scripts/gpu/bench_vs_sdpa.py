#!/usr/bin/env python3
"""bench_vs_sdpa.py: times the headlab hybrid-head kernels against LibTorch SDPA in ONE
process on the device machine (the kernels' speed baseline, docs/BENCHMARKS.md "Kernels":
SDPA with the flash backend).

The kernels come in through libheadlab_kernels_capi.so (kernels/dev/c_api.cu) and ctypes;
tensors are torch CUDA tensors, timed with torch.cuda.Event: warm-ups discarded, median over
launches, and legs alternating per round (ABBA); ratios are reported as median [min, max].

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

    def _common(self, q, k, states):
        B, T, H, d = q.shape
        dims = self._arr(ctypes.c_int32, [B, T, H, k.shape[2], d, DTYPE_CODE[q.dtype]])
        flat = [x for s in states for x in s]
        return dims, self._arr(ctypes.c_int32, flat), self._arr(ctypes.c_uint64, [0] * (3 * H))

    def forward(self, q, k, v, o, lse, states, path=0):
        dims, st, fx = self._common(q, k, states)
        views = self._arr(ctypes.c_uint64, sum((self._view(t) for t in (q, k, v, o)), []))
        rc = self.lib.headlab_attention_forward(
            dims, ctypes.c_float(q.shape[3] ** -0.5), st, fx, views, ctypes.c_uint64(lse.data_ptr()),
            ctypes.c_int32(path), ctypes.c_uint64(torch.cuda.current_stream().cuda_stream),
            self.err, 256)
        if rc:
            raise RuntimeError(self.err.value.decode())

    def backward(self, q, k, v, o, do, dq, dk, dv, lse, ws, states, path=0):
        dims, st, fx = self._common(q, k, states)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="path to libheadlab_kernels_capi.so")
    ap.add_argument("--quick", action="store_true", help="T=1024 instead of 4096")
    args = ap.parse_args()
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

    # path 0: the dispatched kernels (wgmma on sm_90 at d = 64); 2: the mma.sync
    # kernels (kernels/dev/NOTES.md runs 2-12), timed against flash in the same process.
    def ours(path, bwd):
        def run():
            kern.forward(q, k, v, o, lse, states, path)
            if bwd:
                kern.backward(q, k, v, o, do, dq, dk, dv, lse, ws, states, path)
        return run

    results = {}
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
        flops = 4.0 * B * H * d * T * (T + 1) / 2
        for path, label in paths:
            sa, oa, r, lo, hi = compare(sdpa_fwd, ours(path, False))
            print(f"fwd      sdpa-{name} {sa:8.3f} ms {flops / sa * 1e-9:6.1f} TFLOP/s | {label} {oa:8.3f} ms "
                  f"{flops / oa * 1e-9:6.1f} TFLOP/s | throughput {label}/sdpa {1 / r:.3f} [{1 / hi:.3f}, {1 / lo:.3f}]")
            sa, oa, r, lo, hi = compare(sdpa_fwd_bwd, ours(path, True))
            print(f"fwd+bwd  sdpa-{name} {sa:8.3f} ms {3.5 * flops / sa * 1e-9:6.1f} TFLOP/s | {label} {oa:8.3f} ms "
                  f"{3.5 * flops / oa * 1e-9:6.1f} TFLOP/s | throughput {label}/sdpa {1 / r:.3f} [{1 / hi:.3f}, {1 / lo:.3f}]")
        results[name] = r
    return 0


if __name__ == "__main__":
    sys.exit(main())
