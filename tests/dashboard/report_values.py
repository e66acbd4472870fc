#!/usr/bin/env python3
"""The dashboard test's command run (tests/dashboard_test.sh): reports known values so the
browser check can read them back exactly as a researcher would.

- summary test.value 9110.08, test.big 12000.5 and mem.peak_bytes 240652000 (shown as
  "9110", "12001" and "229.5 MiB");
- tiny.lr 0.001, 0.002, 0.003 at steps 1..3 (axis ticks must stay distinct);
- once.value and 14 more metrics logged at one step only (one-point charts must show,
  and more than the 12 charts drawn at first, 19.6);
- with params.fail = 1 it prints a cause on stderr and exits 1 (19.4);
- with params.hold it sleeps (up to 5 minutes) until it is cancelled;
- with params.rep (the strata grid) only test.value = 100 + b * lrate * rep, so that arm b
  minus arm a is rep * lrate: 1.5 at params.lrate 1 and 3 at 2, 2.25 if pooled.
"""
import sys
import time

import headlab_run as hl

params = hl.params()
if params.get("hold"):
    time.sleep(300)
    sys.exit(1)
if "rep" in params:
    hl.summary({"test.value": 100.0 + params.get("b", 0) * params["lrate"] * params["rep"]})
    sys.exit(0)

if params.get("fail"):
    print("loading data", flush=True)
    print("train.bin: cannot open (No such file or directory)", file=sys.stderr, flush=True)
    sys.exit(1)

for step, lr in enumerate([0.001, 0.002, 0.003], start=1):
    hl.metrics(step, {"tiny.lr": lr})
hl.metrics(5, {"once.value": 42.5})
hl.metrics(5, {"m.k%02d" % i: float(i) for i in range(1, 15)})
hl.summary({"test.value": 9110.08, "test.big": 12000.5, "mem.peak_bytes": 240652000})
