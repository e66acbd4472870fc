#!/usr/bin/env bash
# profile-kernels.sh: Nsight Compute's full section set (warp states, stall sampling with the
# top stall locations by source line, memory, occupancy) for the warp-specialised kernels at
# the dev bench size (bf16, B=8, H=12, T=4096, d=64): the all-ordinary forward, an all-local
# (W = 512) forward and the all-ordinary backward, from `hybrid_attention_bench --profile`
# (kernels/dev). What the forward's time per work tile is spent on and what bounds the
# backward at ~20 % of the tensor cores' peak are the questions it was written for.
#
#   scripts/gpu/profile-kernels.sh [BUILD_DIR]     # default: build-gpu/kernels, else /tmp/kb/kernels
#
# On the device machine after scripts/gpu/build-all.sh (or a kernels-only build,
# `cmake -S . -B /tmp/kb -G Ninja -DHEADLAB_ONLY=kernels && cmake --build /tmp/kb`). Clocks are left alone
# (--clock-control none), as in the earlier profiles. Text reports go to $OUT (or
# /tmp/headlab-profile): ncu-ordinary.txt, ncu-local.txt, ncu-backward.txt (the details
# page), and ncu-*-hot.txt: the 40 SASS instructions with the most warp-stall samples, their
# top stall reasons and shared-memory bank conflicts (scripts/gpu/ncu_hot_lines.py, from the
# source page). Exit 0 iff all three profiles ran.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,16p' "$0"; exit 0; }
out=${OUT:-/tmp/headlab-profile}
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
dir=${1:-}
if [[ -z $dir ]]; then
  for d in build-gpu/kernels /tmp/kb/kernels; do [[ -x $d/hybrid_attention_bench ]] && { dir=$d; break; }; done
fi
bench=${dir:-build-gpu/kernels}/hybrid_attention_bench
[[ -x $bench ]] || { echo "profile-kernels.sh: no hybrid_attention_bench in '${dir:-build-gpu/kernels}'" >&2; exit 2; }
command -v ncu > /dev/null || { echo "profile-kernels.sh: ncu not on PATH" >&2; exit 2; }
status=0
# --profile launches: 2 all-ordinary forwards, a forward + backward, then the local forward,
# so the warp-specialised forward's 1st launch is all-ordinary and its 4th all-local, and the
# backward's only launch all-ordinary.
reps=${TMPDIR:-/tmp}/headlab-profile-reps
mkdir -p "$reps"
for what in "ordinary WsForward 0" "local WsForward 3" "backward WsBackward 0"; do
  set -- $what
  ncu --clock-control none --set full --import-source yes -k "regex:$2" --launch-skip "$3" \
    --launch-count 1 -f -o "$reps/$1" "$bench" --profile > "$reps/$1.log" 2>&1 || { status=1; tail -20 "$reps/$1.log"; }
  ncu -i "$reps/$1.ncu-rep" --page details > "$out/ncu-$1.txt" 2>&1 || status=1
  echo "== $1 ($2)"
  grep -E "Duration|Compute \(SM\) Throughput|Issued Ipc|Warp Cycles Per Issued|Stall|stall|Eligible|L2 Hit|DRAM Throughput|bank" \
    "$out/ncu-$1.txt" | head -40
  # The source view, one row per SASS instruction, and from it the 40 instructions with the
  # most warp-stall samples (where the kernel's time goes, by instruction and stall reason).
  if ncu -i "$reps/$1.ncu-rep" --page source --csv --print-source sass > "$reps/$1-source.csv" 2> "$reps/$1-source.err"; then
    python3 "$(dirname "$0")/ncu_hot_lines.py" "$reps/$1-source.csv" 40 > "$out/ncu-$1-hot.txt" 2>&1 || status=1
  else
    { echo "ncu --page source failed:"; cat "$reps/$1-source.err"; } > "$out/ncu-$1-hot.txt"; status=1
  fi
done
exit $status
