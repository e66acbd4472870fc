#!/usr/bin/env bash
# attention-benches.sh: the attention figures of docs/BENCHMARKS.md ("Kernels", "Decode")
# from a build that scripts/gpu/build-all.sh left in build-gpu/, in order of what they
# answer first:
#   1. the split-K decode kernel alone (kernels/dev/decode_attention_bench.cu): a decode
#      step's attention time and GB/s of the K/V it reads, 4K-32K
#   2. decoding through the service at one length and batch size
#      (experiments/measure/aoh_decode_gpu.jsonc, one ABBA rep, `bench.lengths` LENGTH
#      (default 16384), `bench.batch_sizes` BATCH (default 1)): full vs 50% streaming heads,
#      decode ms per step, prefill ms, KV bytes; once per decode path (aoh.decode_path graph:
#      each step replayed from a CUDA graph; fused: every operation launched from the host),
#      into graph-bBATCH/ and fused-bBATCH/ (PATHS="graph" for one of them)
#   3. the kernels' dev bench, scripts/gpu/bench_vs_sdpa.py (ours vs SDPA flash, SDPA cuDNN
#      and FlexAttention at d = 64 and 128) and the whole-layer bench of the measured
#      backend choice (build-all.sh --bench --no-test), --quick unless FULL=1; skipped
#      with KERNELS=0
# Logs to $JOB_OUT (scripts/gpu/background.sh), else $OUT, else /tmp/headlab-attn-bench.
#
#   scripts/gpu/attention-benches.sh [LENGTH [BATCH]]
# On the device, after scripts/gpu/build-all.sh, through background.sh (see its header).
# Exit 0 iff every step succeeded.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,21p' "$0"; exit 0; }
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${JOB_OUT:-${OUT:-/tmp/headlab-attn-bench}}
length=${1:-16384}
batch=${2:-1}
[[ $length =~ ^[1-9][0-9]*$ ]] || { echo "attention-benches.sh: LENGTH: expected a positive integer, got '$length'" >&2; exit 2; }
[[ $batch =~ ^[1-9][0-9]*$ ]] || { echo "attention-benches.sh: BATCH: expected a positive integer, got '$batch'" >&2; exit 2; }
mkdir -p "$out"
status=0
step() { echo "== $* ($(date -u +%H:%M:%S))"; }

step "decode kernel bench"
bench="$root/build-gpu/kernels/decode_attention_bench"
if [[ -x $bench ]]; then
  "$bench" > "$out/decode_kernel_bench.log" 2>&1 || status=1
  cat "$out/decode_kernel_bench.log"
else
  echo "not built: $bench"; status=1
fi

for path in ${PATHS:-graph fused}; do
  dir=$out/$path-b$batch
  step "aoh_decode_gpu at $length, batch $batch, decode path $path, through the service"
  mkdir -p "$dir"
  OUT=$dir JOB_OUT=$dir "$root/scripts/gpu/measure-grids.sh" --quick --set "bench.lengths=\"$length\"" \
    --set "bench.batch_sizes=\"$batch\"" --set "aoh.decode_path=\"$path\"" aoh_decode_gpu \
    > "$dir/decode_grid.log" 2>&1 || status=1
  grep -E -A4 '^(decode|prefill) speedup|^KV bytes' "$dir/aoh_decode_gpu.txt" 2>/dev/null ||
    tail -20 "$dir/decode_grid.log"
done

if [[ ${KERNELS:-1} == 0 ]]; then
  step "done (kernel benches skipped: KERNELS=0), status $status"
  exit $status
fi
step "kernel benches vs SDPA and FlexAttention"
quick=(--quick)
[[ ${FULL:-0} == 1 ]] && quick=()
OUT=$out "$root/scripts/gpu/build-all.sh" --no-test --bench "${quick[@]}" > "$out/bench_all.log" 2>&1 || status=1
tail -5 "$out/bench_all.log"
step "done, status $status"
exit $status
