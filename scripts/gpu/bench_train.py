#!/usr/bin/env python3
"""bench_train.py: training throughput of headlab's 124M preset against PyTorch, one GPU.

headlab side: `headlab exec` (what a worker runs for every attempt) on a manifest of run kind
"train": GPT-2 124M shape (12 layers, 12 heads, width 768, vocab 50304, learned positions,
LayerNorm, GELU MLP, tied head), bf16 (train.precision), AdamW, clipping at 1.0, 65,536
tokens per update (context 4096: 8 x 2 micro-batches; context 1024: 32 x 2), the builtin
corpus. Its steady-state train.tokens_per_s excludes the first update and evaluation.

PyTorch side, in this process: the same model written as a researcher would (nanoGPT form:
fused QKV linear, F.scaled_dot_product_attention(is_causal=True) with SDPA's default
backend, tied head), bf16 autocast with fp32 master weights, AdamW(fused=True), clipping at
1.0, set_to_none gradient reset; eager, and the same under torch.compile. Tokens are random
and already on the GPU (no data loading: the reference's best case).

Order per context, so that GPU clock and thermal drift cannot favour either side: headlab
(train.attention auto), headlab (fused, at --fused-contexts), PyTorch eager, torch.compile,
headlab (auto) again; headlab auto's ratios use the mean of its two runs.

Writes $OUT/bench_train.json and prints a markdown table with each headlab row's ratio to
the references measured in the same call.

  scripts/gpu/bench_train.py [--headlab build-gpu/headlab] [--contexts 4096,1024]
                             [--updates 12] [--fused-contexts 4096] [--no-compile]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENS_PER_UPDATE = 65536
PEAK_BF16 = 989.4e12  # H100/H200 SXM dense bf16 (payload/exec/throughput.cc)


def shape(context):
    return {"layers": 12, "heads": 12, "width": 768, "vocab": 50304, "context": context}


def flops_per_token(context):
    """6 N + 6 L T C (payload/exec/throughput.h)."""
    s = shape(context)
    c, l = s["width"], s["layers"]
    n = l * (4 * c * c + 2 * c * 4 * c) + s["vocab"] * c
    return 6 * n + 6 * l * context * c


def batch_of(context):
    micro = 8 if context >= 4096 else TOKENS_PER_UPDATE // (2 * context)
    return micro, TOKENS_PER_UPDATE // (micro * context)


def run_headlab(binary, context, updates, mode, out_dir):
    micro, accum = batch_of(context)
    config = {
        "kind": "train", "seed": 1337,
        "model": {"preset": "124m", "context": context, "pos": "learned"},
        "train": {"steps": updates, "batch_size": micro, "grad_accum": accum, "lr": 6e-4,
                  "warmup_steps": 2, "eval_every": 0, "eval_batches": 1, "log_every": updates,
                  "checkpoint_every": 0, "device": "cuda", "precision": "bf16",
                  "attention": mode, "grad_clip": 1.0},
    }
    run_dir = os.path.join(out_dir, f"headlab-{context}-{mode}")
    os.makedirs(run_dir, exist_ok=True)
    manifest = os.path.join(run_dir, "manifest.json")
    with open(manifest, "w") as f:
        json.dump({"run": f"bench-{context}-{mode}", "attempt": 1, "config": config,
                   "out_dir": run_dir}, f)
    env = dict(os.environ)
    deps = os.path.join(os.environ.get("HEADLAB_DEPS", "/tmp/headlab-deps"), "usr/lib/x86_64-linux-gnu")
    if os.path.isdir(deps):  # build-all.sh's prefix of Debian libraries (libzmq & co.)
        env["LD_LIBRARY_PATH"] = deps + ":" + env.get("LD_LIBRARY_PATH", "")
    t0 = time.time()
    proc = subprocess.run([binary, "exec", manifest], capture_output=True, text=True, env=env)
    wall = time.time() - t0
    summary, prov = {}, {}
    for line in proc.stdout.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("ev") == "summary":
            summary = ev["values"]
        elif ev.get("ev") == "provenance":
            prov.update(ev["fields"])
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        raise RuntimeError(f"headlab exec failed for context {context} ({mode}): exit {proc.returncode}")
    return {"system": f"headlab ({mode})", "context": context, "micro_batch": micro, "accum": accum,
            "tokens_per_s": summary.get("train.tokens_per_s"), "step_s": summary.get("train.step_s"),
            "mfu": summary.get("train.mfu"), "peak_mem_gb": summary.get("mem.gpu_peak_bytes", 0) / 1e9,
            "attention_paths": prov.get("attention_paths"), "precision": prov.get("precision"),
            "process_wall_s": round(wall, 1)}


def run_pytorch(context, updates, compiled):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    s = shape(context)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            c = s["width"]
            self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
            self.qkv = nn.Linear(c, 3 * c, bias=False)
            self.o = nn.Linear(c, c, bias=False)
            self.fc = nn.Linear(c, 4 * c, bias=False)
            self.proj = nn.Linear(4 * c, c, bias=False)

        def forward(self, x):
            b, t, c = x.shape
            h = s["heads"]
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(y.transpose(1, 2).reshape(b, t, c))
            return x + self.proj(F.gelu(self.fc(self.ln2(x))))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(s["vocab"], s["width"])
            self.wpe = nn.Embedding(context, s["width"])
            self.blocks = nn.ModuleList(Block() for _ in range(s["layers"]))
            self.ln_f = nn.LayerNorm(s["width"])
            for p in self.parameters():
                if p.dim() >= 2:
                    nn.init.normal_(p, 0.0, 0.02)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
            for b in self.blocks:
                x = b(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)
            return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))

    torch.manual_seed(1337)
    dev = torch.device("cuda")
    model = Gpt().to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = torch.compile(model) if compiled else model
    micro, accum = batch_of(context)
    data = torch.randint(0, s["vocab"], (updates + 2, accum, micro, context + 1), device=dev)

    def update(u):
        opt.zero_grad(set_to_none=True)
        for a in range(accum):
            batch = data[u, a]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = step_model(batch[:, :-1], batch[:, 1:]) / accum
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    t_compile = time.time()
    for u in range(2):  # warm-up (and compilation)
        update(u)
    torch.cuda.synchronize()
    t_compile = time.time() - t_compile
    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    for u in range(2, updates + 2):
        update(u)
    torch.cuda.synchronize()
    secs = (time.time() - t0) / updates
    tps = TOKENS_PER_UPDATE / secs
    name = "PyTorch %s bf16 (SDPA default, fused AdamW)" % ("torch.compile" if compiled else "eager")
    result = {"system": name, "context": context, "micro_batch": micro, "accum": accum,
              "tokens_per_s": tps, "step_s": secs, "mfu": flops_per_token(context) * tps / PEAK_BF16,
              "peak_mem_gb": torch.cuda.max_memory_allocated() / 1e9, "warmup_s": round(t_compile, 1),
              "torch": torch.__version__}
    del model, opt, data, step_model
    torch.cuda.empty_cache()
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--headlab", default=os.path.join(ROOT, "build-gpu", "headlab"))
    ap.add_argument("--contexts", default="4096,1024")
    ap.add_argument("--updates", type=int, default=12)
    ap.add_argument("--fused-contexts", default="4096")
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    out = os.environ.get("OUT") or tempfile.mkdtemp(prefix="bench-train-")
    runs = tempfile.mkdtemp(prefix="bench-train-runs-")  # checkpoints: not for $OUT
    fused_contexts = {int(c) for c in args.fused_contexts.split(",") if c}
    rows = []

    def emit(row):
        rows.append(row)
        print(json.dumps(row), flush=True)
        return row

    for context in [int(c) for c in args.contexts.split(",")]:
        first = emit(run_headlab(args.headlab, context, args.updates, "auto", runs))
        ours = [first]
        if context in fused_contexts:
            ours.append(emit(run_headlab(args.headlab, context, args.updates, "fused", runs)))
        refs = [emit(run_pytorch(context, args.updates, False))]
        if not args.no_compile:
            refs.append(emit(run_pytorch(context, args.updates, True)))
        again = emit(run_headlab(args.headlab, context, args.updates, "auto", runs))
        first["tokens_per_s_runs"] = [first["tokens_per_s"], again["tokens_per_s"]]
        first["tokens_per_s"] = (first["tokens_per_s"] + again["tokens_per_s"]) / 2
        first["step_s"] = TOKENS_PER_UPDATE / first["tokens_per_s"]
        first["mfu"] = flops_per_token(context) * first["tokens_per_s"] / PEAK_BF16
        again["repeat_of"] = first["system"]
        for r in ours:
            r["vs"] = {ref["system"]: r["tokens_per_s"] / ref["tokens_per_s"] for ref in refs}
    with open(os.path.join(out, "bench_train.json"), "w") as f:
        json.dump(rows, f, indent=2)
    print("\n| context | system | tokens/s | step s | MFU | peak GB | vs eager | vs compile |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "repeat_of" in r:
            continue  # folded into the first run's mean
        vs = r.get("vs", {})
        eager = next((v for k, v in vs.items() if "eager" in k), None)
        comp = next((v for k, v in vs.items() if "compile" in k), None)
        fmt = lambda v: "-" if v is None else "%.3fx" % v
        print("| %d | %s | %.0f | %.4f | %.3f | %.1f | %s | %s |" % (
            r["context"], r["system"], r["tokens_per_s"] or 0, r["step_s"] or math.nan, r["mfu"] or 0,
            r["peak_mem_gb"], fmt(eager), fmt(comp)))


if __name__ == "__main__":
    main()
