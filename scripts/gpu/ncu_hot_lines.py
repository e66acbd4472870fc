#!/usr/bin/env python3
"""ncu_hot_lines.py: the hottest SASS instructions of one Nsight Compute source page.

  ncu -i REPORT.ncu-rep --page source --csv --print-source sass > source.csv
  python3 scripts/gpu/ncu_hot_lines.py source.csv [N]

Prints the N instructions (default 40) with the most warp-stall samples, as a share of all
samples, with the executed count and every column that names a stall reason, shared-memory
bank conflicts or excessive wavefronts/sectors where the row has a nonzero value; then the
samples summed per opcode (the instruction's first word without predicates and modifiers).
Column names are matched by substring, so a newer ncu with renamed or extra columns still
works; a CSV without a sampling column is an error naming the columns it has.
"""
import csv
import re
import sys
from collections import defaultdict


def number(cell):
    cell = (cell or "").replace(",", "").strip()
    try:
        return float(cell)
    except ValueError:
        return 0.0


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    path = argv[1]
    top = int(argv[2]) if len(argv) > 2 else 40
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head_at = next((i for i, r in enumerate(rows) if any(c.strip() == "Source" for c in r)), None)
    if head_at is None:
        print(f"{path}: no header row with a 'Source' column", file=sys.stderr)
        return 1
    header = [c.strip() for c in rows[head_at]]
    body = [r for r in rows[head_at + 1:] if len(r) == len(header)]
    col = {name: i for i, name in enumerate(header)}
    sampling = [n for n in header if "Warp Stall Sampling (All" in n] or [n for n in header if "Sampling" in n]
    if not sampling:
        print(f"{path}: no warp-stall sampling column; columns: {header}", file=sys.stderr)
        return 1
    samples = col[sampling[0]]
    executed = next((col[n] for n in header if n.startswith("Instructions Executed")), None)
    extra = [n for n in header if re.search(r"stall|Bank Conflict|Excessive|Shared", n, re.I) and n != sampling[0]]
    total = sum(number(r[samples]) for r in body) or 1.0
    print(f"{path}: {len(body)} instructions, {int(total)} warp-stall samples ({sampling[0]})")
    ranked = sorted(body, key=lambda r: -number(r[samples]))[:top]
    for r in ranked:
        share = 100.0 * number(r[samples]) / total
        addr = r[col["Address"]] if "Address" in col else ""
        line = f"{share:5.1f}%  {addr:>8}  {r[col['Source']].strip()[:70]:<70}"
        if executed is not None:
            line += f"  exec {int(number(r[executed]))}"
        notes = [f"{n}={r[col[n]].strip()}" for n in extra if number(r[col[n]]) > 0]
        print(line + ("  | " + "; ".join(notes) if notes else ""))
    per_op = defaultdict(float)
    for r in body:
        words = [w for w in r[col["Source"]].split() if not w.startswith("@")]
        if words:
            per_op[words[0].split(".")[0]] += number(r[samples])
    print("samples per opcode:")
    for op, n in sorted(per_op.items(), key=lambda kv: -kv[1])[:20]:
        print(f"  {100.0 * n / total:5.1f}%  {op}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
