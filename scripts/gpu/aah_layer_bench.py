#!/usr/bin/env python3
"""aah_layer_bench.py: one AAH-v3 layer's attention at the 1b preset's shape (B=1, H=16, d=96,
bf16, causal, T = 4096 and 8192), forward + backward, every head local with window W (AAH
§5.8: keys q - W < k <= q), timed on the device in ONE process against the full-attention
arm's SDPA (cuDNN and flash):

  ours d=96      the headlab kernels at the preset's head size (mma.sync on sm_90)
  ours d=128     the same heads at d = 128 (the warp-specialised wgmma kernels), padding
                 copies not included; "as 128 padded" legs pad the d = 96 tensors on every
                 call as the torch op does on Hopper (kernels/hybrid_attention.h
                 ExecutedHeadDim)
  flash window   PyTorch's FlashAttention-2 with a left window (aten::_flash_attention_forward
                 with window_size_left = W - 1, window_size_right = 0), validated first
                 against SDPA with the band mask

and a layer of mixed windows as headlab's plan runs it (one call per distinct window on the
heads' slices, the full heads through SDPA's default backend, concatenated), one call after
another and each on its own CUDA stream, in one launch of the headlab kernels, and as two
calls (the full heads through SDPA, the windowed ones in one launch of the kernels); and what
the first call of each new head count costs SDPA's default backend (a backend that builds a plan per shape pays it when AAH's
windows change a layer's head counts).

Each leg alternates with the cuDNN baseline (ABBA rounds, CUDA events, warm-ups discarded);
a ratio is baseline ms / leg ms (above 1: the leg is faster), median [min, max] over rounds.
It tells which kernel a local head should run on for AAH's training to beat full attention.

Last, AAH's observation of one layer (payload/methods/aah/aah_model.cc ObserveLayer with
head_diagnostics.cc, the controller's device work at each control update) as the same torch
ops, stage by stage (projections, Q/K/V statistics, the two attention passes with
log-normalisers through the kernels as the op runs them, the entropy and norm), each timed
alone with CUDA events (bench_vs_sdpa.time_ms, median of 20), with the 1b preset's 32
layers' totals: in the training forward (the projections and the pass with values V come
from the forward's taps) and as the separate pass.

  python3 scripts/gpu/aah_layer_bench.py --lib BUILD/kernels/libheadlab_kernels_capi.so
"""
import argparse
import contextlib
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_vs_sdpa import LOCAL, ORDINARY, Kernels, compare, fmt, rel_l2, time_ms  # noqa: E402


def flash_window(q, k, v, window, scale):
    """FlashAttention-2 over [B, T, H, d] with keys q - window < k <= q; None if unsupported."""
    T = q.shape[1]
    out = torch.ops.aten._flash_attention_forward(
        q, k, v, None, None, T, T, 0.0, True, False, scale=scale,
        window_size_left=window - 1, window_size_right=0)
    return out[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="path to libheadlab_kernels_capi.so")
    ap.add_argument("--contexts", default="4096,8192")
    args = ap.parse_args()
    kern = Kernels(args.lib)
    dev, dt, B, H = "cuda", torch.bfloat16, 1, 16
    print(f"device {torch.cuda.get_device_name()} torch {torch.__version__}; bf16 B={B} H={H}, fwd+bwd")
    for T in (int(t) for t in args.contexts.split(",")):
        tensors = {}
        for d in (96, 128):
            torch.manual_seed(d)
            q, k, v, do = (torch.randn(B, T, H, d, device=dev, dtype=dt) for _ in range(4))
            o = torch.empty_like(q)
            lse = torch.empty(B, H, T, device=dev, dtype=torch.float32)
            grads = [torch.empty_like(q) for _ in range(3)]
            ws = torch.empty(kern.workspace_bytes(q, k), device=dev, dtype=torch.uint8)
            tensors[d] = (q, k, v, do, o, lse, grads, ws)
        q, k, v, do = tensors[96][:4]
        scale = 96 ** -0.5
        qt, kt, vt, dot = (x.transpose(1, 2) for x in (q, k, v, do))

        def sdpa(backend):
            qg, kg, vg = (x.detach().clone().requires_grad_(True) for x in (qt, kt, vt))

            def run():
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
                torch.autograd.grad(out, (qg, kg, vg), dot)
            return run

        def ours(d, states):
            q_, k_, v_, do_, o_, lse_, (dq, dk, dv), ws = tensors[d]

            def run():
                kern.forward(q_, k_, v_, o_, lse_, states, 0)
                kern.backward(q_, k_, v_, o_, do_, dq, dk, dv, lse_, ws, states, 0)
            return run

        def flash(window):
            qg, kg, vg = (x.detach().clone().requires_grad_(True) for x in (q, k, v))

            def run():
                out = flash_window(qg, kg, vg, window, scale)
                torch.autograd.grad(out, (qg, kg, vg), do)
            return run

        def default_sdpa(x, y, z):  # [B, T, n, d] -> [B, T, n, d], SDPA's own backend choice
            return F.scaled_dot_product_attention(x.transpose(1, 2), y.transpose(1, 2), z.transpose(1, 2),
                                                  is_causal=True, scale=scale).transpose(1, 2)

        side = [torch.cuda.Stream() for _ in range(4)]

        def mixed(groups, streams):
            """groups: (heads, window or None for full), in head order; headlab's segments."""
            qg, kg, vg = (x.detach().clone().requires_grad_(True) for x in (q, k, v))

            def run():
                cur, outs, off = torch.cuda.current_stream(), [], 0
                for i, (n, W) in enumerate(groups):
                    qs, ks, vs = (x[:, :, off:off + n] for x in (qg, kg, vg))
                    if streams:
                        side[i].wait_stream(cur)
                    with torch.cuda.stream(side[i]) if streams else contextlib.nullcontext():
                        outs.append(default_sdpa(qs, ks, vs) if W is None else flash_window(qs, ks, vs, W, scale))
                    off += n
                if streams:
                    for s in side[:len(groups)]:
                        cur.wait_stream(s)
                torch.autograd.grad(torch.cat(outs, 2), (qg, kg, vg), do[:, :, :off])
            return run

        def ours_padded(states):
            """d = 96 heads run at d = 128 as the torch op runs them on Hopper: q, k, v and dO
            padded with zero columns on every call (the copies are timed), outputs sliced."""
            q96, k96, v96, do96 = tensors[96][:4]
            _, _, _, _, o_, lse_, (dq, dk, dv), ws = tensors[128]

            def run():
                q_, k_, v_ = (F.pad(x, (0, 32)) for x in (q96, k96, v96))
                kern.forward(q_, k_, v_, o_, lse_, states, 0)
                kern.backward(q_, k_, v_, o_, F.pad(do96, (0, 32)), dq, dk, dv, lse_, ws, states, 0)
            return run

        def sdpa_and_ours(groups):
            """Two calls: the full heads through SDPA (its default backend), then the windowed
            heads in one launch of the kernels at d = 128 (padded, copies timed)."""
            states = [(LOCAL, W, 0, 0) for n, W in groups if W for _ in range(n)]
            m, full = len(states), sum(n for n, W in groups if W is None)
            q96, k96, v96, do96 = tensors[96][:4]
            qw, kw, vw, dow = (x[:, :, :m] for x in (q96, k96, v96, do96))
            qf, kf, vf = (x[:, :, m:m + full].detach().clone().requires_grad_(True) for x in (q96, k96, v96))
            o_ = torch.empty(B, T, m, 128, device=dev, dtype=dt)
            lse_ = torch.empty(B, m, T, device=dev, dtype=torch.float32)
            dq, dk, dv = (torch.empty_like(o_) for _ in range(3))
            ws = torch.empty(kern.workspace_bytes(o_, o_), device=dev, dtype=torch.uint8)

            def run():
                if full:
                    torch.autograd.grad(default_sdpa(qf, kf, vf), (qf, kf, vf), do96[:, :, m:m + full])
                q_, k_, v_ = (F.pad(x, (0, 32)) for x in (qw, kw, vw))
                kern.forward(q_, k_, v_, o_, lse_, states, 0)
                kern.backward(q_, k_, v_, o_, F.pad(dow, (0, 32)), dq, dk, dv, lse_, ws, states, 0)
            return run

        base = sdpa(SDPBackend.CUDNN_ATTENTION)
        print(f"\n== T={T} d=96: baseline sdpa-cudnn causal, all heads ordinary ==")
        try:
            choice = SDPBackend(torch._fused_sdp_choice(qt, kt, vt, None, 0.0, True, scale=scale)).name
        except Exception as e:  # noqa: BLE001 - a private query; its absence is reported
            choice = f"unknown ({type(e).__name__})"
        print(f"  SDPA's default backend here: {choice} (cuDNN {torch.backends.cudnn.version()})")

        def leg(label, fn):
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - a leg this PyTorch cannot run is reported, not fatal
                print(f"  {label:28s} unavailable ({type(e).__name__}: {str(e)[:160]})")
                return None
            ba, la, r, lo, hi = compare(base, fn)
            print(f"  {label:28s} {la:8.3f} ms | cudnn full {ba:8.3f} ms | speed vs full {fmt((1 / r, 1 / hi, 1 / lo))}")
            return 1 / r

        leg("sdpa-flash full", sdpa(SDPBackend.FLASH_ATTENTION))
        leg("sdpa default full", mixed([(H, None)], False))
        leg("ours d=96 full", ours(96, [(ORDINARY, 0, 0, 0)] * H))
        leg("ours d=128 full", ours(128, [(ORDINARY, 0, 0, 0)] * H))
        for W in (512, 1024, 2048):
            c = (W * T - W * (W - 1) / 2) / (T * (T + 1) / 2)
            print(f"  -- local W={W} (keys visited / causal keys c={c:.3f})")
            local = [(LOCAL, W, 0, 0)] * H
            leg(f"ours d=96 W={W}", ours(96, local))
            leg(f"ours d=128 W={W}", ours(128, local))
            try:  # validate the window convention before timing it
                with torch.no_grad():
                    got = flash_window(q, k, v, W, scale)
                    i = torch.arange(T, device=dev)
                    band = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < W)
                    want = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=band).transpose(1, 2)
                err = rel_l2(got, want)
                print(f"  validate flash window W={W} vs sdpa with the band mask: rel L2 {err:.1e} "
                      f"{'ok' if err < 2e-2 else 'FAIL'}")
                if err < 2e-2:
                    leg(f"flash window W={W}", flash(W))
            except Exception as e:  # noqa: BLE001
                print(f"  flash window W={W}: unavailable ({type(e).__name__}: {str(e)[:160]})")
        # AAH's bucket mix at ACR ~0.5 (about a quarter of the heads at each candidate).
        quarter = [(H // 4, 512), (H // 4, 1024), (H // 4, 2048), (H // 4, None)]
        print("  -- mixed layer: 4 heads each at 512, 1024, 2048 (flash window) and full (sdpa default)")
        leg("mixed, one call after another", mixed(quarter, False))
        leg("mixed, a stream per call", mixed(quarter, True))
        quarter_states = [(LOCAL, W, 0, 0) if W else (ORDINARY, 0, 0, 0) for n, W in quarter for _ in range(n)]
        leg("mixed, ours d=96 one launch", ours(96, quarter_states))
        one_launch = leg("mixed, ours d=96 as 128 padded", ours_padded(quarter_states))
        two_calls = leg("mixed, sdpa full + ours windowed", sdpa_and_ours(quarter))
        if one_launch and two_calls:  # attention_plan.h kMaxAttentionCalls: which form to keep
            better = "SDPA for the full heads + one launch (branch plan-sdpa-full-heads)" \
                if two_calls > one_launch else "every head in one launch (main)"
            print(f"  beyond two calls, faster here: {better} ({two_calls:.3f}x vs {one_launch:.3f}x)")
        leg("full, ours d=96 as 128 padded", ours_padded([(ORDINARY, 0, 0, 0)] * H))
        # Two calls (what AAH's hierarchy leaves most layers: at most two windows per layer).
        for pair in ([(H // 2, 512), (H // 2, None)], [(H // 2, 1024), (H // 2, None)],
                     [(H // 2, 512), (H // 2, 2048)]):
            name = " + ".join(f"{n}x{W or 'full'}" for n, W in pair)
            print(f"  -- two calls: {name}")
            states = [(LOCAL, W, 0, 0) if W else (ORDINARY, 0, 0, 0) for n, W in pair for _ in range(n)]
            leg("split, one call after another", mixed(pair, False))
            leg("ours d=96 as 128 padded", ours_padded(states))
            if any(W is None for n, W in pair):
                leg("sdpa full + ours windowed", sdpa_and_ours(pair))
        print("  -- SDPA default backend: first call of a new head count vs warm (fwd+bwd, host clock)")
        for n in (3, 5, 7, 9, 11):
            fn = mixed([(n, None)], False)
            times = []
            for _ in range(3):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                times.append((time.perf_counter() - t0) * 1e3)
            print(f"  sdpa default, {n:2d} heads: first {times[0]:8.2f} ms, then {times[1]:6.2f} / {times[2]:6.2f} ms")
        del tensors
        torch.cuda.empty_cache()
        observation(kern, T)
    return 0


def observation(kern, T, C=1536, H=16, d=96, layers=32):
    """Times AAH's observation of one layer at the 1b preset's shape, stage by stage."""
    dev = "cuda"
    torch.manual_seed(3)
    x = torch.randn(1, T, C, device=dev)  # the block's LayerNorm output: fp32 under autocast
    w = [torch.randn(C, C, device=dev) * C ** -0.5 for _ in range(3)]
    quarter = [(LOCAL, W, 0, 0) for W in (512, 1024, 2048) for _ in range(H // 4)] + \
        [(ORDINARY, 0, 0, 0)] * (H // 4)
    pad = 128 - d
    o = torch.empty(1, T, H, 128, device=dev, dtype=torch.bfloat16)
    lse = torch.empty(1, H, T, device=dev, dtype=torch.float32)
    dims = (0, 1, 3)
    rows = torch.tensor([r for h in range(H) for r in (h, H + h, 2 * H + h)], device=dev)

    def project():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return [F.linear(x, wi).view(1, T, H, d) for wi in w]

    def statistics(q, k, v):  # QkvStatistics
        f = torch.cat([q, k, v], 2).float()
        mean = f.mean(dims, keepdim=True)
        std = (f - mean).pow(2).mean(dims).sqrt()
        return torch.stack([f.abs().mean(dims), std], 1).index_select(0, rows).view(H, 6)

    def statistics_fused(q, k, v):  # one Welford pass and one |x| pass
        f = torch.cat([q, k, v], 2).float()
        var, _ = torch.var_mean(f, dims, unbiased=False)
        l1 = torch.linalg.vector_norm(f, 1, dims) / (T * d)
        return torch.stack([l1, var.sqrt()], 1).index_select(0, rows).view(H, 6)

    def attend(q, k, values):  # HybridAttentionWithLse as the op runs d = 96 on Hopper
        kern.forward(F.pad(q, (0, pad)), F.pad(k, (0, pad)), F.pad(values, (0, pad)), o, lse, quarter, 0)
        return o[..., :d], lse

    def diagnostics(q, out, out_k, lse_):  # LseDiagnostics after the two passes
        q_dot = (q.float() * out_k.float()).sum(-1)
        entropy = (lse_.transpose(1, 2) - d ** -0.5 * q_dot).sum((0, 1))
        norm = out.float().pow(2).sum(-1).sqrt().sum((0, 1))
        return torch.stack([entropy, norm], 1) / T

    q, k, v = project()
    out, lse_v = attend(q, k, v)
    out, lse_v = out.clone(), lse_v.clone()
    out_k = attend(q, k, k)[0].clone()
    # (label, fn, in the in-forward observation): there the layer's forward hands over the
    # projections and each head's output (ForwardTaps), so only the pass over keys as values
    # runs; the separate pass (data-parallel runs) computes every stage.
    stages = [("projections (3 GEMMs)", project, False),
              ("Q/K/V statistics, six reductions", lambda: statistics(q, k, v), None),
              ("Q/K/V statistics (QkvStatistics)", lambda: statistics_fused(q, k, v), True),
              ("attention pass, values V", lambda: attend(q, k, v), False),
              ("attention pass, values K", lambda: attend(q, k, k), True),
              ("entropy and norm", lambda: diagnostics(q, out, out_k, lse_v), True)]
    print(f"\n== AAH observation of one layer (T={T}, H={H}, d={d}, bf16; x {layers} layers) ==")
    in_forward = separate = 0.0
    for label, fn, counted in stages:
        ms = time_ms(fn, reps=20, warm=5)
        if counted is not None:
            separate += ms
            in_forward += ms if counted else 0.0
        print(f"  {label:34s} {ms:7.3f} ms per layer, {ms * layers:7.2f} ms per control update")
    for label, total in (("total, in the forward (taps)", in_forward),
                         ("total, separate pass", separate)):
        print(f"  {label:34s} {total:7.3f} ms per layer, {total * layers:7.2f} ms per control update")

if __name__ == "__main__":
    sys.exit(main())
