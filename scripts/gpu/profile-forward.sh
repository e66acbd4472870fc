#!/usr/bin/env bash
# profile-forward.sh: Nsight Compute's full section set (warp states, stall sampling with the
# top stall locations by source line, memory, occupancy) for the forward kernels at the dev
# bench size (bf16, B=8, H=12, T=4096, d=64): the all-ordinary forward and an all-local
# (W = 512) forward, from `hybrid_attention_bench --profile` (kernels/dev). What the
# warp-specialised forward's time per work tile is spent on (kernels/dev/NOTES.md runs 23-24)
# is the question it was written for.
#
#   scripts/gpu/profile-forward.sh [BUILD_DIR]     # default: build-gpu/kernels, else /tmp/kb
#
# On the device machine after scripts/gpu/build-all.sh (or a kernels-only build,
# `cmake -S kernels -B /tmp/kb -G Ninja && cmake --build /tmp/kb`). Clocks are left alone
# (--clock-control none), as in the earlier profiles. Text reports go to $OUT (or
# /tmp/headlab-profile): ncu-ordinary.txt, ncu-local.txt. Exit 0 iff both profiles ran.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,14p' "$0"; exit 0; }
out=${OUT:-/tmp/headlab-profile}
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
dir=${1:-}
if [[ -z $dir ]]; then
  for d in build-gpu/kernels /tmp/kb; do [[ -x $d/hybrid_attention_bench ]] && { dir=$d; break; }; done
fi
bench=${dir:-build-gpu/kernels}/hybrid_attention_bench
[[ -x $bench ]] || { echo "profile-forward.sh: no hybrid_attention_bench in '${dir:-build-gpu/kernels}'" >&2; exit 2; }
command -v ncu > /dev/null || { echo "profile-forward.sh: ncu not on PATH" >&2; exit 2; }
status=0
# --profile launches: 2 all-ordinary forwards, a forward + backward, then the local forward,
# so the warp-specialised kernel's 1st launch is all-ordinary and its 4th all-local.
for what in "ordinary 0" "local 3"; do
  set -- $what
  ncu --clock-control none --set full --import-source yes -k regex:WsForward --launch-skip "$2" \
    --launch-count 1 "$bench" --profile > "$out/ncu-$1.txt" 2>&1 || status=1
  echo "== $1 forward"
  grep -E "Duration|Compute \(SM\) Throughput|Issued Ipc|Warp Cycles Per Issued|Stall|stall|Eligible|L2 Hit|DRAM Throughput" \
    "$out/ncu-$1.txt" | head -40
done
exit $status
