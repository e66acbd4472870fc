#!/usr/bin/env bash
# reproduce.sh: runs the papers' headline comparisons (docs/REPRODUCTIONS.md, "Part B: the
# papers' headline comparisons on the GPU") through a real coordinator and workers (tests/lib.sh
# harness, loopback): the grids of experiments/repro/, each with three seeds:
#   parent_gpu         ordinary-attention parents (3 runs)
#   saf_controls_gpu   SAF 25%: variance vs random heads vs pruning, from the parents' midpoint
#   aoh_heads_gpu      AoH vs Reverse vs Random at 50% streaming, on the parents' final weights
#   aoh_retrieval_parent_gpu, aoh_retrieval_gpu   parents trained with synthetic retrieval
#                      rows (2048 ctx), then AoH vs Random x3 vs Reverse vs full at 50/75%
#                      streaming with a 1.6% sink + recent budget, per-chunk eviction
#   aah_regimes_gpu    AAH-v3 Full adaptive / Shallow freeze vs Grouping off vs Full attention
#   aah/phase1_small_gpu  AAH Phase 1 controls (fixed T/4, fixed random grouping, shuffle)
#                      at the small scale (24 runs)
#   aah_flops_gpu      CUPTI-measured FLOPs vs ACR (submitted after the others: profiling
#                      runs alone on the GPU)
# and writes each experiment's `headlab results` (text and --json), its runs (--json) and
# the coordinator's database to the results folder.
#
#   scripts/gpu/reproduce.sh [--workers N] [--only LIST] [--smoke]
#     --workers N  workers sharing the machine's GPU(s) (default 4; small runs leave an H200
#                  mostly idle, so four at a time finish sooner; timings inside these runs
#                  are contended and are not speed claims)
#     --only LIST  comma-separated subset of saf,aoh,retrieval,aah,phase1,flops (default: all)
#     --smoke      a CPU rehearsal of the same pipeline with a tiny model (a few minutes on
#                  two cores): checks the chain of grids, not the papers
#
# Results go to $REPRO_OUT, else $JOB_OUT (scripts/gpu/background.sh), else $OUT, else
# /tmp/headlab-repro-out; progress to stdout.
# On the device, after scripts/gpu/build-all.sh (HEADLAB_BIN defaults to build-gpu/headlab)
# with the corpus carried (scripts/fetch-data.sh build, then copy build/data/english-gpt2 to
# build-gpu/data/english-gpt2):
#   run(command="scripts/gpu/build-all.sh --no-test --target headlab &&
#       scripts/gpu/background.sh start repro scripts/gpu/reproduce.sh &&
#       scripts/gpu/background.sh wait repro 380",
#       carry=[".debs", "build-gpu/data/english-gpt2"], timeout_s=600)
# and, while the machine is still warm, run(command="scripts/gpu/background.sh wait repro 590").
# Exit 0 iff every run of every grid succeeded.
set -uo pipefail
workers=4 only="saf,aoh,retrieval,aah,phase1,flops" smoke=0
while (( $# )); do
  case "$1" in
    --workers) shift; workers=${1:-}; [[ $workers =~ ^[1-9][0-9]?$ ]] ||
                 { echo "reproduce.sh: --workers: expected 1-99, got '${1:-}'" >&2; exit 2; } ;;
    --only) shift; only=${1:-} ;;
    --smoke) smoke=1 ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "reproduce.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for part in ${only//,/ }; do
  [[ $part =~ ^(saf|aoh|retrieval|aah|phase1|flops)$ ]] ||
    { echo "reproduce.sh: --only: unknown part '$part' (saf, aoh, retrieval, aah, phase1, flops)" >&2; exit 2; }
done
want() { [[ ",$only," == *",$1,"* ]]; }

source "$(dirname "$0")/harness-env.sh"
RESULTS=${REPRO_OUT:-${JOB_OUT:-${OUT:-/tmp/headlab-repro-out}}}
mkdir -p "$RESULTS"
GRIDS=$ROOT/experiments/repro
source "$ROOT/tests/lib.sh"

# Every grid takes the same sets; the smoke rehearsal shrinks the model and the schedule
# (SAF's midpoint moves with it) and runs on the CPU.
sets=() saf_sets=() retrieval_sets=() retrieval_arm_sets=()
if (( smoke )); then
  sets=(--set model.layers=2 --set model.heads=2 --set model.width=32
        --set train.steps=20 --set train.batch_size=2 --set train.warmup_steps=2
        --set train.eval_every=10 --set train.eval_batches=2 --set train.checkpoint_every=10
        --set train.device=cpu --set train.threads=1
        --set flops.warmup=5 --set flops.repeats=1)
  saf_sets=(--set parent.step=10 --set saf.calib_sequences=4 --set saf.calib_batch=2)
  # The retrieval grids at context 128 (a GPT-2 passkey row needs about 45 tokens).
  retrieval_sets=(--set model.context=128)
  retrieval_arm_sets=(--set 'aoh.passkey_lengths="64"' --set aoh.passkey_samples=2 --set aoh.sink=2
                      --set aoh.recent=4 --set aoh.prefill_chunk=8)
fi

start_cluster "$workers"
status=0
declare -A exp_of=()
# collect NAME EXP: collect_grid (harness-env.sh) and the experiment's runs as JSON.
collect() {
  collect_grid "$1" "$2" "${HEADLAB_GRID_TIMEOUT_S:-3600}"
  hl runs "$2" --json > "$RESULTS/$1.runs.json"
}

if want saf || want aoh; then
  exp_of[parent_gpu]=$(submit "$GRIDS/parent_gpu.jsonc" "${sets[@]}") || exit 1
fi
if want retrieval; then
  exp_of[aoh_retrieval_parent_gpu]=$(submit "$GRIDS/aoh_retrieval_parent_gpu.jsonc" "${sets[@]}" "${retrieval_sets[@]}") || exit 1
fi
if want aah; then
  exp_of[aah_regimes_gpu]=$(submit "$GRIDS/aah_regimes_gpu.jsonc" "${sets[@]}") || exit 1
fi
if want phase1; then
  exp_of[aah_phase1_small_gpu]=$(submit "$ROOT/experiments/aah/phase1_small_gpu.jsonc" "${sets[@]}") || exit 1
fi
if want saf; then
  exp_of[saf_controls_gpu]=$(submit "$GRIDS/saf_controls_gpu.jsonc" \
      --set "parent.experiment=${exp_of[parent_gpu]}" "${sets[@]}" "${saf_sets[@]}") || exit 1
fi
if want aoh; then
  parents=$(db "SELECT group_concat(id) FROM (SELECT id FROM runs WHERE experiment_id = \
${exp_of[parent_gpu]} ORDER BY id)")
  exp_of[aoh_heads_gpu]=$(submit "$GRIDS/aoh_heads_gpu.jsonc" --set "parent.run=$parents" \
      "${sets[@]}") || exit 1
fi
if want retrieval; then
  collect aoh_retrieval_parent_gpu "${exp_of[aoh_retrieval_parent_gpu]}"
  parents=$(db "SELECT group_concat(id) FROM (SELECT id FROM runs WHERE experiment_id = \
${exp_of[aoh_retrieval_parent_gpu]} ORDER BY id)")
  exp_of[aoh_retrieval_gpu]=$(submit "$GRIDS/aoh_retrieval_gpu.jsonc" --set "parent.run=$parents" \
      "${sets[@]}" "${retrieval_sets[@]}" "${retrieval_arm_sets[@]}") || exit 1
fi
for name in parent_gpu aah_regimes_gpu aah_phase1_small_gpu saf_controls_gpu aoh_heads_gpu aoh_retrieval_gpu; do
  [[ -n ${exp_of[$name]:-} ]] && collect "$name" "${exp_of[$name]}"
done
if want flops; then
  # Counter profiling (kernel replay) must have the GPU to itself: one worker is left.
  for name in "${!HL_WORKER_PIDS[@]}"; do
    [[ $name == w1 ]] && continue
    hl_stop_pid "${HL_WORKER_PIDS[$name]}"
    unset "HL_WORKER_PIDS[$name]"
  done
  flops_exp=$(submit "$GRIDS/aah_flops_gpu.jsonc" "${sets[@]}") || exit 1
  collect aah_flops_gpu "$flops_exp"
fi
cp "$HL_DB" "$RESULTS/repro.db" 2>/dev/null
say "device time: $(( $(date +%s) - HL_START )) s for the grids (without the build)"
exit $status
