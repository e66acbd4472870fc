#!/usr/bin/env bash
# decode-round.sh: the decode and prefill figures (docs/BENCHMARKS.md) in one call, on a fresh
# machine (~400 s): the whole repository built (build-all.sh --no-test), the GPU tests of what
# the decode step and prefill chunks run (decoder, decode kernel, RoPE+append, add+norm,
# decode_linear), the decode kernel bench (with a plain read of its bytes) and full vs 50 %
# streaming heads through the service at LENGTH x BATCH
# (attention-benches.sh with PATHS=graph KERNELS=0), the 16-row linear layer against cuBLAS
# (decode_linear_bench), then one profiled prefill and 32 profiled decode steps per arm
# (aoh_prefill_profile) summarised by trace_summary.py. Everything lands in a few files of
# $OUT (the device tool returns a limited number): round.log (the summary lines below),
# build.log, ctest.log, bench.log (with the kernel bench), aoh_decode_gpu.json,
# decode_linear_bench.log, profile.log.
#
#   scripts/gpu/decode-round.sh [LENGTH [BATCH]]          (defaults 16384 16)
#   TESTS=all scripts/gpu/decode-round.sh                  (every gpu-labelled test: ~150 s more)
# Run from the repository root through the device tool with the Debian packages carried:
#   here:    scripts/gpu/fetch-debs.sh
#   device:  run(command="scripts/gpu/decode-round.sh", carry=[".debs"], timeout_s=600)
# Exit 0 iff every step succeeded.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,19p' "$0"; exit 0; }
length=${1:-16384}
batch=${2:-16}
[[ $length =~ ^[1-9][0-9]*$ ]] || { echo "decode-round.sh: LENGTH: expected a positive integer, got '$length'" >&2; exit 2; }
[[ $batch =~ ^[1-9][0-9]*$ ]] || { echo "decode-round.sh: BATCH: expected a positive integer, got '$batch'" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/headlab-decode-round}
mkdir -p "$out"
cd "$root" || exit 1
status=0
t0=$(date +%s)
say() { echo "$* ($(( $(date +%s) - t0 )) s)" | tee -a "$out/round.log"; }
scratch=$(mktemp -d)

# step NAME LOG CMD...: runs CMD with its output to LOG, notes its exit status in round.log
# and in $status.
step() {
  local name=$1 log=$2 rc
  shift 2
  "$@" > "$log" 2>&1
  rc=$?
  [[ $rc == 0 ]] || status=1
  say "$name: exit $rc"
}

step build "$out/build.log" env OUT="$scratch/build" scripts/gpu/build-all.sh --no-test
if [[ ${TESTS:-} == all ]]; then
  step "gpu tests (all)" "$out/ctest.log" env OUT="$scratch/test" scripts/gpu/build-all.sh
else
  step "gpu tests (aoh|decode|rope|add_norm)" "$out/ctest.log" env OUT="$scratch/test" scripts/gpu/build-all.sh \
    -R 'aoh|decode|rope|add_norm'
fi
cat "$scratch/test/ctest-gpu.log" >> "$out/ctest.log" 2>/dev/null
grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1 | tee -a "$out/round.log"

step "service bench at $length x $batch" "$out/bench.log" env OUT="$scratch/bench" PATHS=graph KERNELS=0 \
  scripts/gpu/attention-benches.sh "$length" "$batch"
cp "$scratch/bench/graph-b$batch/aoh_decode_gpu.json" "$out/" 2>/dev/null
grep -E "B=$batch L= *$length " "$out/bench.log" | head -3 | tee -a "$out/round.log"
# the kernel against a plain read of its bytes (decode_attention_bench's last rows)
grep -E -A10 'against a plain read' "$out/bench.log" | tee -a "$out/round.log"
grep -E -A3 '^(decode|prefill) speedup' "$out/bench.log" | grep -E 'speedup:|median|control' | tee -a "$out/round.log"
grep -E 'decode_ms_per_token |prefill_ms ' "$scratch/bench/graph-b$batch/aoh_decode_gpu.txt" 2>/dev/null |
  tee -a "$out/round.log"

step decode_linear_bench "$out/decode_linear_bench.log" build-gpu/kernels/decode_linear_bench
grep -E 'ours/cuBLAS' "$out/decode_linear_bench.log" | tee -a "$out/round.log"

mkdir -p "$scratch/profile"
step profiles "$out/profile.log" build-gpu/tests/aoh_prefill_profile "$scratch/profile" "$length" "$batch"
for trace in "$scratch"/profile/*.json; do
  [[ -e $trace ]] && python3 scripts/gpu/trace_summary.py "$trace" 30 >> "$out/profile.log" 2>&1
done
grep -E 'ms a step|under the profiler ->|traced span' "$out/profile.log" | tee -a "$out/round.log"
rm -rf "$scratch"
say "done, exit $status"
exit $status
