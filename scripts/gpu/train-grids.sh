#!/usr/bin/env bash
# train-grids.sh: the `kind: train` grids of the SAF and AAH-v3 speed claims, run as a
# researcher runs them — submitted to a real coordinator with one worker (tests/lib.sh
# harness, loopback) on the device — with each experiment's `headlab results` (text and
# --json) and a per-run table (tokens/s, the after-event rate, the method's own cost, GPU
# peak memory, the layers' attention plans after each event) written to $OUT (or
# /tmp/headlab-train-out). Run folders are deleted after each grid (a 124M checkpoint is
# 1.4 GB; the device's disk is 64 GB).
#
#   scripts/gpu/train-grids.sh [--set KEY=VALUE]... PROTOCOL...
#     saf-midpoint  experiments/measure/saf_midpoint_parent_gpu.jsonc, then
#                   saf_midpoint_gpu.jsonc from its checkpoint (ABBA, 3 reps)
#     aah-1b        experiments/measure/aah_train_1b_gpu.jsonc (ABBA, 3 reps, 4K and 8K)
#     aah-diag      experiments/measure/aah_train_1b_diag_gpu.jsonc (1b at 4K taken apart:
#                   full attention, the controller alone, Full adaptive; one rep)
#     saf-1b        experiments/measure/saf_1b_8k_gpu.jsonc (calibration, fits and 20
#                   updates of the 1b preset at 8K on one GPU)
#     --set         passed to every `headlab submit` of the protocol's measured grid
#
# Needs a built tree (scripts/gpu/build-all.sh; HEADLAB_BIN, default build-gpu/headlab)
# and the default corpus in build-gpu/data (carried: scripts/fetch-data.sh build, then
# copy build/data/english-gpt2 to build-gpu/data/english-gpt2). On the device:
#   run(command="scripts/gpu/build-all.sh --no-test && scripts/gpu/train-grids.sh saf-midpoint",
#       carry=[".debs", "build-gpu/data/english-gpt2"], timeout_s=600)
# Exit 0 iff every run of every grid succeeded.
set -uo pipefail
protocols=() sets=()
while (( $# )); do
  arg=$1
  shift
  case "$arg" in
    --set) [[ $# -ge 1 ]] || { echo "train-grids.sh: --set needs KEY=VALUE" >&2; exit 2; }
           sets+=(--set "$1"); shift ;;
    saf-midpoint|aah-1b|aah-diag|saf-1b) protocols+=("$arg") ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "train-grids.sh: unknown argument: $arg (see --help)" >&2; exit 2 ;;
  esac
done
(( ${#protocols[@]} )) || { echo "train-grids.sh: name a protocol (see --help)" >&2; exit 2; }
source "$(dirname "$0")/harness-env.sh"
RESULTS=${JOB_OUT:-${OUT:-/tmp/headlab-train-out}}
mkdir -p "$RESULTS"
source "$ROOT/tests/lib.sh"

# runs_table NAME EXP: a line per run (arm, rep, status, the throughput, the method's own
# cost — SAF's event or AAH's controller — AAH's training ACR and the GPU peak)
# and the attention plans the runs' layers took after each event, into $RESULTS/NAME-runs.txt.
runs_table() {
  local name=$1 exp=$2
  db "SELECT r.id, r.arm, json_extract(r.config_json, '$.pair.rep'), r.status,
             printf('%.0f', (SELECT value FROM summaries WHERE run_id = r.id AND key = 'train.tokens_per_s')),
             printf('%.0f', (SELECT value FROM summaries WHERE run_id = r.id AND key = 'train.tokens_per_s_after_event')),
             printf('%.2f', COALESCE((SELECT value FROM summaries WHERE run_id = r.id AND key = 'saf.cost.total_s'),
                                     (SELECT value FROM summaries WHERE run_id = r.id AND key = 'aah.controller_s'), 0)),
             (SELECT printf('%.3f', value) FROM summaries WHERE run_id = r.id AND key = 'aah.acr_train'),
             printf('%.2f', (SELECT value FROM summaries WHERE run_id = r.id AND key = 'mem.gpu_peak_bytes') / 1073741824.0)
      FROM runs r WHERE r.experiment_id = $exp ORDER BY r.id" |
    awk -F'|' 'BEGIN { printf "%-5s %-16s %-4s %-10s %12s %16s %14s %6s %10s\n", "run", "arm", "rep", "status",
                       "tokens/s", "after event", "method cost s", "ACR", "GPU GiB" }
               { printf "%-5s %-16s %-4s %-10s %12s %16s %14s %6s %10s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9 }' \
    > "$RESULTS/$name-runs.txt"
  db "SELECT r.id || ' ' || r.arm || ': ' || COALESCE(json_extract(p.fields_json, '$.attention_plans'),
                                                      json_extract(p.fields_json, '$.attention_paths'))
      FROM runs r JOIN provenance p ON p.run_id = r.id WHERE r.experiment_id = $exp ORDER BY r.id" \
    >> "$RESULTS/$name-runs.txt"
  cat "$RESULTS/$name-runs.txt"
}

# clean_runs: deletes the workers' run folders (<worker data>/worker-<name>/runs/<run>-<attempt>,
# checkpoints included) of finished grids.
clean_runs() { rm -rf "$HL_TMP"/workers/*/*/runs; df -h "$HL_TMP" | tail -1; }

# prune_finished EXP: in the background while grid EXP runs, deletes each of its runs'
# folders once the run has ended (a 1b checkpoint is 11 GiB: six of them fill the device's
# disk); the results are in the coordinator's database by then. Only for grids no
# continuation reads checkpoints from. Ends with the harness's folder, or by kill.
prune_finished() {
  while sleep 10 && [[ -d $HL_TMP ]]; do
    for id in $(db "SELECT id FROM runs WHERE experiment_id = $1 AND
                    status IN ('succeeded', 'failed', 'cancelled')" 2>/dev/null); do
      rm -rf "$HL_TMP"/workers/*/*/runs/"$id"-*
    done
  done
}

# collect_pruned NAME EXP TIMEOUT: collect_grid with prune_finished running.
collect_pruned() {
  prune_finished "$2" &
  local pruner=$!
  collect_grid "$@"
  kill "$pruner" 2>/dev/null
}

start_cluster 1
status=0
for protocol in "${protocols[@]}"; do
  case "$protocol" in
    saf-midpoint)
      P=$(submit "$ROOT/experiments/measure/saf_midpoint_parent_gpu.jsonc") || exit 1
      collect_grid saf_midpoint_parent "$P" 900
      E=$(submit "$ROOT/experiments/measure/saf_midpoint_gpu.jsonc" --set "parent.experiment=$P" "${sets[@]}") || exit 1
      collect_grid saf_midpoint "$E" 1800
      runs_table saf_midpoint "$E" ;;
    aah-1b)
      E=$(submit "$ROOT/experiments/measure/aah_train_1b_gpu.jsonc" "${sets[@]}") || exit 1
      collect_pruned aah_train_1b "$E" 1800
      runs_table aah_train_1b "$E" ;;
    aah-diag)
      E=$(submit "$ROOT/experiments/measure/aah_train_1b_diag_gpu.jsonc" "${sets[@]}") || exit 1
      collect_pruned aah_train_1b_diag "$E" 1200
      runs_table aah_train_1b_diag "$E" ;;
    saf-1b)
      E=$(submit "$ROOT/experiments/measure/saf_1b_8k_gpu.jsonc" "${sets[@]}") || exit 1
      collect_pruned saf_1b_8k "$E" 1800
      runs_table saf_1b_8k "$E" ;;
  esac
  clean_runs
done
exit $status
