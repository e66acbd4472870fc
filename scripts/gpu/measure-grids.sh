#!/usr/bin/env bash
# measure-grids.sh: runs measurement grids of experiments/measure/ through a real coordinator
# and one worker (tests/lib.sh harness, loopback) and writes each experiment's `headlab
# results` (text and --json) to $OUT (or /tmp/headlab-measure-out). Default: the small grids
# (*_small.jsonc: SAF update and prefill speedups at 25%/50%, AoH decode/prefill/KV, AAH
# FLOPs boundary); name others to run them instead (e.g. saf_update_gpu aoh_decode_gpu
# flops_aah_gpu). On the device the legs run on the GPU (train.device auto) and the flops
# runs count with CUPTI; on a CPU machine FLOPs say "unmeasured".
#
#   scripts/gpu/measure-grids.sh [--quick] [--set KEY=VALUE]... [GRID...]
#     --quick   one ABBA rep per grid (pair.rep=0) instead of the grids' own
#     --set     passed to every `headlab submit` (e.g. --set 'bench.lengths="16384"')
#
# Needs a built tree: HEADLAB_BIN (default build-gpu/headlab, as scripts/gpu/build-all.sh
# leaves it; libheadlab_exec.so beside it). On the device, after build-all.sh:
#   run(command="scripts/gpu/build-all.sh --no-test && scripts/gpu/measure-grids.sh",
#       carry=[".debs"], timeout_s=600)
# Exit 0 iff every run of every grid succeeded.
set -uo pipefail
quick=0
grids=() sets=()
while (( $# )); do
  arg=$1
  shift
  case "$arg" in
    --quick) quick=1 ;;
    --set) [[ $# -ge 1 ]] || { echo "measure-grids.sh: --set needs KEY=VALUE" >&2; exit 2; }
           sets+=(--set "$1"); shift ;;
    -h|--help|-*) sed -n '2,20p' "$0"; [[ $arg == -h || $arg == --help ]] && exit 0; exit 2 ;;
    *) [[ -f "$(dirname "$0")/../../experiments/measure/$arg.jsonc" ]] ||
         { echo "measure-grids.sh: no experiments/measure/$arg.jsonc" >&2; exit 2; }
       grids+=("$arg") ;;
  esac
done
(( ${#grids[@]} )) || grids=(saf_update_small saf_prefill_small aoh_decode_small flops_aah_small)
source "$(dirname "$0")/harness-env.sh"
RESULTS=${JOB_OUT:-${OUT:-/tmp/headlab-measure-out}}
mkdir -p "$RESULTS"
source "$ROOT/tests/lib.sh"

start_cluster 1
status=0
for grid in "${grids[@]}"; do
  args=("${sets[@]}")
  if (( quick )) && [[ $grid != flops_* ]]; then args+=(--set pair.rep=0); fi
  EXP=$(submit "$ROOT/experiments/measure/$grid.jsonc" "${args[@]}") || exit 1
  collect_grid "$grid" "$EXP" "${HEADLAB_GRID_TIMEOUT_S:-1800}"
done
exit $status
