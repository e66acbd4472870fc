#!/usr/bin/env python3
"""prefill_breakdown.py: where a chunked prefill's time goes, at the shape of
experiments/measure/aoh_decode_gpu.jsonc (124M: 12 layers, 12 heads, d 64, width 768, MLP 4x;
chunks of 512; bf16), measured piece by piece with CUDA events in one process on the device:

  attention, full model      every head over every earlier key (flash, lower-right causal)
  attention, 50% streaming   6 heads as above; 6 streaming heads (sink 128, recent 256) through
                             the flash kernel's causal window over the recent run plus a sink
                             call merged by log-sum-exp in one lerp (the decoder's FlashChunk), or, for
                             comparison, the memory-efficient kernel with a boolean mask over
                             sink + recent + chunk (the decoder's path before FlashChunk)
  the rest of a layer        norms, the q/k/v, output and MLP projections, GELU, residuals

Each piece's sum over the chunks of one sequence and the layers, to set beside the service's
bench.prefill_ms. Usage (device): scripts/gpu/prefill_breakdown.py [LENGTH [BATCH]]
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_vs_sdpa import time_ms  # noqa: E402  (median of CUDA-event timings after warm-ups)

length = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 16
layers, heads, d, width, chunk, sink, recent = 12, 12, 64, 768, 512, 128, 256
dev, dt = "cuda", torch.bfloat16
scale = d ** -0.5
torch.manual_seed(0)


def flash(q, k, v, causal, window_left=None):
    """PyTorch's flash kernel on [B, T, H, d] tensors: (output, log-sum-exp [B, H, T])."""
    o, lse, *_ = torch.ops.aten._flash_attention_forward(
        q, k, v, None, None, q.shape[1], k.shape[1], 0.0, causal, False, scale=scale,
        window_size_left=window_left, window_size_right=None)
    return o, lse


kv = torch.randn(batch, length, heads, 2 * d, device=dev, dtype=dt)  # one layer's cache, reused
q_all = torch.randn(batch, chunk, heads, d, device=dev, dtype=dt)
starts = list(range(0, length, chunk))


def full_heads(h):
    def run():
        for p in starts:
            L = p + chunk
            flash(q_all[:, :, :h], kv[:, :L, :h, :d], kv[:, :L, :h, d:], True)
    return run


def streaming_window():
    def run():
        for p in starts:
            L = p + chunk
            q = q_all[:, :, 6:]
            if p < sink + recent - 1:  # windows reach the sink: masked (the decoder's first chunk)
                qp = torch.arange(p, L, device=dev)[:, None]
                kp = torch.arange(L, device=dev)[None]
                m = (kp <= qp) & ((kp < sink) | (qp - kp < recent))
                F.scaled_dot_product_attention(q.transpose(1, 2), kv[:, :L, 6:, :d].transpose(1, 2),
                                               kv[:, :L, 6:, d:].transpose(1, 2), attn_mask=m, scale=scale)
                continue
            w0 = L - chunk - (recent - 1)
            ow, lw = flash(q, kv[:, w0:L, 6:, :d], kv[:, w0:L, 6:, d:], True, recent - 1)
            os_, ls = flash(q, kv[:, :sink, 6:, :d], kv[:, :sink, 6:, d:], False)
            w = torch.sigmoid(lw - ls).transpose(1, 2).unsqueeze(-1)
            torch.lerp(os_, ow, w.to(dt))  # the decoder's merge (FlashChunk)
    return run


def streaming_masked():
    def run():
        for p in starts:
            L = p + chunk
            lo = max(sink, L - chunk - (recent - 1))  # sink + recent run + chunk, as the cache holds them
            kpos = torch.cat([torch.arange(min(sink, lo), device=dev), torch.arange(lo, L, device=dev)])
            qp = torch.arange(p, L, device=dev)[:, None]
            m = (kpos[None] <= qp) & ((kpos[None] < sink) | (qp - kpos[None] < recent))
            k = torch.cat([kv[:, :min(sink, lo), 6:, :d], kv[:, lo:L, 6:, :d]], 1)
            v = torch.cat([kv[:, :min(sink, lo), 6:, d:], kv[:, lo:L, 6:, d:]], 1)
            F.scaled_dot_product_attention(q_all[:, :, 6:].transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           attn_mask=m, scale=scale)
    return run


lin = {n: torch.nn.Linear(i, o, device=dev, dtype=dt) for n, i, o in
       [("qkv", width, 3 * width), ("o", width, width), ("fc", width, 4 * width), ("proj", 4 * width, width)]}
ln1 = torch.nn.LayerNorm(width, device=dev, dtype=dt)
ln2 = torch.nn.LayerNorm(width, device=dev, dtype=dt)
x0 = torch.randn(batch, chunk, width, device=dev, dtype=dt)


def rest_of_layer():
    def run():
        for _ in starts:
            x = x0
            qkv = lin["qkv"](ln1(x))
            x = x + lin["o"](qkv[..., :width])
            x = x + lin["proj"](F.gelu(lin["fc"](ln2(x))))
    return run


with torch.no_grad():
    rows = [("attention, full model (12 heads)", full_heads(12)),
            ("attention, 6 ordinary heads", full_heads(6)),
            ("attention, 6 streaming heads, flash window + sink", streaming_window()),
            ("attention, 6 streaming heads, masked memory-efficient", streaming_masked()),
            ("rest of a layer (norms, projections, MLP)", rest_of_layer())]
    print(f"chunked prefill pieces, B = {batch}, T = {length}, chunks of {chunk}, bf16, "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}; ms per layer and x {layers} layers")
    for name, fn in rows:
        ms = time_ms(fn, reps=3, warm=1)
        print(f"  {name:55s} {ms:9.2f} ms/layer  {ms * layers:9.1f} ms")
