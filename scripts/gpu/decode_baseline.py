#!/usr/bin/env python3
"""decode_baseline.py: the decode baseline a researcher already has, one GPU, PyTorch only.

The Llama-3.1-8B shape (32 layers, width 4096, 32 query / 8 KV heads of 128, SwiGLU 14336,
RMSNorm, RoPE theta 500000, vocab 128256, untied head; common/model_presets.cc's
llama3.1-8b) with random bf16 weights, decoded one token per sequence at a time with a
static KV cache allocated once for the whole length (as transformers' StaticCache), PyTorch's
scaled_dot_product_attention over it with a mask of the filled positions (each KV head's
group of 4 query heads as the query rows, so K and V are read once per KV head), the whole
step captured as one CUDA graph (what torch.compile's "reduce-overhead" mode does; with
--compile the step is compiled in that mode instead). The cache is filled with random
values up to the context length (a decode step's time does not depend on them), then
--steps steps are replayed and timed with CUDA events.

Beside each time it prints the memory bound of a step: the bytes one step must read
(every weight once; the filled K and V of every layer and sequence) over the device's
measured read bandwidth (a sum over a 4 GiB tensor), and the ratio to it.

Writes $OUT/decode_baseline.json (or --json PATH) and prints a table.

  scripts/gpu/decode_baseline.py [--lengths 32768,65536,131072] [--batches 1,8]
                                 [--steps 64] [--compile] [--json PATH]
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

SHAPE = {"layers": 32, "width": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
         "ffn": 14336, "vocab": 128256, "rope_theta": 500000.0, "eps": 1e-5}


def read_bandwidth(device):
    """Bytes per second of a plain read: the best of 5 sums over a 4 GiB bf16 tensor."""
    x = torch.ones(2 << 30, dtype=torch.bfloat16, device=device)
    x.sum()
    best = math.inf
    for _ in range(5):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        x.sum()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop) / 1e3)
    n = x.numel() * x.element_size()
    del x
    torch.cuda.empty_cache()
    return n / best


class Model:
    """Random bf16 weights of SHAPE, held as plain tensors."""

    def __init__(self, device):
        s, g = SHAPE, torch.Generator(device=device).manual_seed(0)
        c, d = s["width"], s["head_dim"]

        def w(rows, cols):
            return (torch.randn(rows, cols, generator=g, device=device, dtype=torch.bfloat16)
                    * (1.0 / math.sqrt(cols)))

        self.embed = w(s["vocab"], c)
        self.head = w(s["vocab"], c)
        self.norm = torch.ones(c, device=device, dtype=torch.bfloat16)
        self.layers = []
        for _ in range(s["layers"]):
            self.layers.append({
                "attn_norm": torch.ones(c, device=device, dtype=torch.bfloat16),
                "wqkv": w((s["heads"] + 2 * s["kv_heads"]) * d, c),
                "wo": w(c, s["heads"] * d),
                "mlp_norm": torch.ones(c, device=device, dtype=torch.bfloat16),
                "w_gate_up": w(2 * s["ffn"], c),
                "w_down": w(c, s["ffn"]),
            })

    def weight_bytes(self):
        n = self.embed.shape[1] * self.embed.element_size()  # one embedding row per token
        n += self.head.numel() * self.head.element_size() + self.norm.numel() * 2
        for layer in self.layers:
            n += sum(t.numel() * t.element_size() for t in layer.values())
        return n


def rms_norm(x, weight):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + SHAPE["eps"])).to(x.dtype) * weight


class Decoder:
    """One decode step over a static cache [layers, B, KV, max_len, d] for K and for V."""

    def __init__(self, model, batch, max_len, device):
        s = SHAPE
        self.model, self.batch, self.max_len = model, batch, max_len
        kv, d = s["kv_heads"], s["head_dim"]
        self.k = torch.randn(s["layers"], batch, kv, max_len, d, device=device, dtype=torch.bfloat16)
        self.v = torch.randn(s["layers"], batch, kv, max_len, d, device=device, dtype=torch.bfloat16)
        half = d // 2
        inv = 1.0 / (s["rope_theta"] ** (torch.arange(half, device=device, dtype=torch.float32) / half))
        angles = torch.arange(max_len, device=device, dtype=torch.float32)[:, None] * inv[None, :]
        self.cos, self.sin = angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)
        self.keys = torch.arange(max_len, device=device)
        self.pos = torch.zeros((), dtype=torch.long, device=device)  # the step's position
        self.token = torch.zeros(batch, dtype=torch.long, device=device)

    def rotate(self, x):  # x [B, n, 1, d] at self.pos
        half = x.shape[-1] // 2
        cos, sin = self.cos[self.pos], self.sin[self.pos]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)

    def step(self):
        s, m = SHAPE, self.model
        B, H, KV, d = self.batch, s["heads"], s["kv_heads"], s["head_dim"]
        group = H // KV
        x = m.embed[self.token]  # [B, C]
        visible = (self.keys <= self.pos).view(1, 1, 1, -1)
        for i, layer in enumerate(m.layers):
            h = rms_norm(x, layer["attn_norm"])
            qkv = F.linear(h, layer["wqkv"]).view(B, H + 2 * KV, 1, d)
            q = self.rotate(qkv[:, :H])
            k = self.rotate(qkv[:, H:H + KV])
            v = qkv[:, H + KV:]
            self.k[i].index_copy_(2, self.pos.view(1), k)
            self.v[i].index_copy_(2, self.pos.view(1), v)
            # The 4 query heads of each KV head as its query rows: K and V read once.
            o = F.scaled_dot_product_attention(q.reshape(B, KV, group, d), self.k[i], self.v[i],
                                               attn_mask=visible)
            x = x + F.linear(o.reshape(B, H * d), layer["wo"])
            gate, up = F.linear(rms_norm(x, layer["mlp_norm"]), layer["w_gate_up"]).chunk(2, -1)
            x = x + F.linear(F.silu(gate) * up, layer["w_down"])
        logits = F.linear(rms_norm(x, m.norm), m.head)
        self.token.copy_(logits.argmax(-1))
        self.pos.add_(1)
        return logits


def time_decode(model, batch, length, steps, compile_step, device):
    dec = Decoder(model, batch, length + steps + 8, device)
    step = torch.compile(dec.step, mode="reduce-overhead") if compile_step else dec.step
    dec.pos.fill_(length)
    with torch.no_grad():
        if compile_step:
            for _ in range(3):  # compilation and the graph's recording
                step()
            run = step
        else:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):
                    step()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step()
            run = graph.replay
        dec.pos.fill_(length)
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(steps):
            run()
        stop.record()
        stop.synchronize()
    ms = start.elapsed_time(stop) / steps
    s = SHAPE
    # K and V of every layer and sequence, filled up to the steps' mean position.
    kv_bytes = 2 * s["layers"] * batch * s["kv_heads"] * s["head_dim"] * (length + steps / 2) * 2
    del dec
    torch.cuda.empty_cache()
    return ms, kv_bytes


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lengths", default="32768,65536,131072")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--compile", action="store_true", help='torch.compile(mode="reduce-overhead")')
    p.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "decode_baseline.json"))
    a = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("decode_baseline.py: no CUDA device")
    device = torch.device("cuda")
    bandwidth = read_bandwidth(device)
    model = Model(device)
    weight_bytes = model.weight_bytes()
    name = torch.cuda.get_device_name(device)
    print(f"{name}: read bandwidth {bandwidth / 1e12:.2f} TB/s; weights read per step "
          f"{weight_bytes / 1e9:.2f} GB")
    rows = []
    print("| length | batch | ms/token | bound ms | ratio to bound |")
    print("| --- | --- | --- | --- | --- |")
    for length in [int(x) for x in a.lengths.split(",")]:
        for batch in [int(x) for x in a.batches.split(",")]:
            row = {"length": length, "batch": batch, "device": name,
                   "mode": "compile reduce-overhead" if a.compile else "cuda graph"}
            try:
                ms, kv_bytes = time_decode(model, batch, length, a.steps, a.compile, device)
                bound_ms = (weight_bytes + kv_bytes) / bandwidth * 1e3
                row.update({"decode_ms_per_token": ms, "bound_ms": bound_ms, "kv_bytes_read": kv_bytes,
                            "weight_bytes_read": weight_bytes, "read_bandwidth_bytes_per_s": bandwidth})
                print(f"| {length} | {batch} | {ms:.3f} | {bound_ms:.3f} | {ms / bound_ms:.2f}x |")
            except torch.cuda.OutOfMemoryError as e:
                row["error"] = "CUDA out of memory"
                print(f"| {length} | {batch} | out of memory | - | - |")
                del e
                torch.cuda.empty_cache()
            rows.append(row)
            sys.stdout.flush()
    with open(a.json, "w") as f:
        json.dump({"shape": SHAPE, "steps": a.steps, "rows": rows}, f, indent=1)
    print(f"-> {a.json}")


if __name__ == "__main__":
    main()
