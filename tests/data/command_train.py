#!/usr/bin/env python3
"""A training script run as a headlab `command` run (tests/command_test.sh, schema/command.md).

Fits y = 3x - 1 + noise by SGD, with the learning rate train.lr, train.steps updates and
the data order from `seed`. Every params.checkpoint_every steps it writes a checkpoint and
reports it; a retried attempt resumes from the last one. Data are drawn per step from the
seed, so a resumed run ends exactly where an uninterrupted one does. params.fail_at_step
makes the first attempt exit 3 at that step (a crash the coordinator retries);
params.sleep_s slows each step down (for a cancel test).
"""

import json
import math
import random
import sys
import time

import headlab_run as hl

cfg = hl.config()
p = hl.params()
seed = cfg["seed"]
lr = cfg["train"]["lr"]
steps = cfg["train"]["steps"]
every = int(p.get("checkpoint_every", 0))
fail_at = int(p.get("fail_at_step", -1))
sleep_s = float(p.get("sleep_s", 0))


def batch(step, n=16):
    rng = random.Random(seed * 1000003 + step)
    xs = [rng.uniform(-1, 1) for _ in range(n)]
    return xs, [3 * x - 1 + rng.gauss(0, 0.1) for x in xs]


def mse(w, b, xs, ys):
    return sum((w * x + b - y) ** 2 for x, y in zip(xs, ys)) / len(xs)


w, b, start = 0.0, 0.0, 0
r = hl.resume()
if r is not None:
    with open(r["path"]) as f:
        ck = json.load(f)
    w, b, start = ck["w"], ck["b"], ck["step"]
    hl.log("resumed from step %d (%s)" % (start, r["kind"]))
print("training from step %d, lr %g, attempt %d" % (start, lr, hl.attempt()), flush=True)
hl.provenance({"script_model": "linear regression, y = 3x - 1"})

for step in range(start + 1, steps + 1):
    xs, ys = batch(step)
    gw = sum(2 * (w * x + b - y) * x for x, y in zip(xs, ys)) / len(xs)
    gb = sum(2 * (w * x + b - y) for x, y in zip(xs, ys)) / len(xs)
    w, b = w - lr * gw, b - lr * gb
    hl.metrics(step, {"train.loss": mse(w, b, xs, ys)})
    if every and step % every == 0:
        name = "ckpt-%d.json" % step
        with open(name, "w") as f:
            json.dump({"step": step, "w": w, "b": b}, f)
        hl.artifact(name, kind="checkpoint", step=step)
    if step == fail_at and hl.attempt() == 1:
        print("simulated crash at step %d" % step, file=sys.stderr, flush=True)
        sys.exit(3)
    if sleep_s:
        time.sleep(sleep_s)

ex, ey = batch(10**9, n=256)
eval_loss = mse(w, b, ex, ey)
hl.metrics(steps, {"eval.loss": eval_loss})
hl.summary({"eval.loss": eval_loss, "model.w": w, "model.b": b})
