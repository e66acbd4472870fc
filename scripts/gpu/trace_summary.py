#!/usr/bin/env python3
"""trace_summary.py: a PyTorch profiler trace (chrome://tracing JSON, as Kineto saves it:
aoh_prefill_profile, torch.profiler's export_chrome_trace) as a table: the traced span, the
time the GPU was busy (union of its kernels, copies and fills) and idle within it, the
kernels by total time, and the host operators by count.

Usage: scripts/gpu/trace_summary.py TRACE.json [TOP]     (TOP rows per table, default 25)
"""
import collections
import json
import sys


def union_us(intervals):
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 2
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    with open(sys.argv[1]) as f:
        events = [e for e in json.load(f).get("traceEvents", []) if e.get("ph") == "X" and "dur" in e]
    if not events:
        print(f"{sys.argv[1]}: no complete events")
        return 1
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    busy = union_us((e["ts"], e["ts"] + e["dur"]) for e in gpu)
    span = end - start
    print(f"{sys.argv[1]}: traced span {span / 1e3:.1f} ms; GPU busy {busy / 1e3:.1f} ms, "
          f"idle {(span - busy) / 1e3:.1f} ms ({100 * (span - busy) / span:.0f} %)")

    def table(rows, title, unit_total):
        print(f"\n{title}")
        for name, (n, total) in rows[:top]:
            print(f"  {total / 1e3:9.2f} ms {100 * total / unit_total:5.1f} %  x{n:<6d} {name[:110]}")

    kernels = collections.defaultdict(lambda: [0, 0.0])
    for e in gpu:
        k = kernels[e["name"]]
        k[0] += 1
        k[1] += e["dur"]
    table(sorted(kernels.items(), key=lambda kv: -kv[1][1]), "GPU kernels, copies and fills by total time "
          "(share of busy time)", busy)
    ops = collections.defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.get("cat") == "cpu_op":
            o = ops[e["name"]]
            o[0] += 1
            o[1] += e["dur"]
    table(sorted(ops.items(), key=lambda kv: -kv[1][0]), "host operators by count (total host time, "
          "nested operators counted in each; share of the span)", span)
    return 0


if __name__ == "__main__":
    sys.exit(main())
