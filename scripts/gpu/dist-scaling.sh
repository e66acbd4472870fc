#!/usr/bin/env bash
# dist-scaling.sh: the data-parallel scaling benchmark (docs/BENCHMARKS.md), after
# scripts/gpu/build-all.sh, on a machine with several GPUs of one host. The 124M preset
# (12 layers x 12 heads x 768, RoPE) at context 4096 in bf16 trains STEPS updates with
# `headlab exec` (run kind train, builtin data) on 1, 2 and 4 GPUs (train.ranks = GPUs, NCCL),
# each GPU keeping its own batch (B sequences x A accumulation steps per update: weak
# scaling, the global batch grows with the GPUs). Per GPU count and all-reduce dtype
# (train.allreduce_dtype fp32 and bf16; one GPU has no all-reduce) it reports tokens/s over
# the steady-state updates (the first excluded), the speedup over one GPU, seconds per
# update, the all-reduce time exposed per update (dist.allreduce_s: what the update waited
# for after its last backward; payload/exec/grad_reducer.h) and the slowest rank's update.
# Targets: >= 1.9x at 2 GPUs and >= 3.7x at 4 GPUs.
#
#   scripts/gpu/dist-scaling.sh [--steps N] [--batch B] [--accum A] [--gpus "1 2 4"]
#                               [--dtypes "fp32 bf16"]
#     defaults: 30 steps, B 8, A 1 (32,768 tokens per GPU per update), GPUs 1 2 4, both dtypes
#
# Through the device tool (about 4 minutes of runs after the build):
#   run(command="scripts/gpu/build-all.sh --no-test && scripts/gpu/dist-scaling.sh",
#       carry=[".debs"], kind="nvidia-h200-x4", timeout_s=600)
# GPU counts above the visible GPUs are skipped (said in the table). Writes to $OUT (or
# /tmp/headlab-gpu-out)/dist-scaling/: table.md (the Markdown table for
# docs/BENCHMARKS.md), results.jsonl (one line per run) and each run's manifest, events
# and stderr. Exit 0 iff every run succeeded, 77 when fewer than 2 GPUs are visible, 2 bad
# usage.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:-/tmp/headlab-gpu-out}/dist-scaling"
bin="${HEADLAB_BIN:-$root/build-gpu/headlab}"
deps="${HEADLAB_DEPS:-/tmp/headlab-deps}"
export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -x "$deps/usr/bin/jq" ]; then export PATH="$deps/usr/bin:$PATH"; fi

steps=30 batch=8 accum=1 counts="1 2 4" dtypes="fp32 bf16"
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) shift; steps="${1:-}" ;;
    --batch) shift; batch="${1:-}" ;;
    --accum) shift; accum="${1:-}" ;;
    --gpus) shift; counts="${1:-}" ;;
    --dtypes) shift; dtypes="${1:-}" ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "dist-scaling: unknown argument $1" >&2; sed -n '15,17p' "$0" >&2; exit 2 ;;
  esac
  shift
done
for n in "$steps" "$batch" "$accum" $counts; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "dist-scaling: not a positive integer: $n" >&2; exit 2; }
done
visible=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$visible" -lt 2 ]; then echo "dist-scaling: needs at least 2 GPUs, found $visible"; exit 77; fi
command -v jq >/dev/null || { echo "dist-scaling: jq not found (scripts/gpu/build-all.sh unpacks it)"; exit 2; }
mkdir -p "$out"
: > "$out/results.jsonl"

run_one() {  # run_one GPUS DTYPE
  local gpus=$1 dtype=$2 name="gpus$1-$2" dir="$out/gpus$1-$2"
  mkdir -p "$dir"
  jq -n --arg out "$dir/run" --argjson ranks "$gpus" --argjson batch "$batch" \
        --argjson accum "$accum" --argjson steps "$steps" --arg dtype "$dtype" '{
    run: 1, attempt: 1, experiment: 1, out_dir: $out,
    config: {seed: 1337, model: {preset: "124m", pos: "rope"},
             train: {steps: $steps, batch_size: $batch, grad_accum: $accum, ranks: $ranks,
                     allreduce_dtype: $dtype, device: "cuda", precision: "bf16",
                     warmup_steps: 5, log_every: 5, eval_every: 0, eval_batches: 1,
                     checkpoint_every: 0}}}' > "$dir/manifest.json"
  local devices
  devices=$(seq -s, 0 $((gpus - 1)))
  echo "dist-scaling: $name (CUDA_VISIBLE_DEVICES=$devices)"
  if ! CUDA_VISIBLE_DEVICES=$devices "$bin" exec "$dir/manifest.json" > "$dir/events" 2> "$dir/stderr"; then
    echo "dist-scaling: $name failed:"; tail -5 "$dir/stderr"
    return 1
  fi
  jq -c --argjson gpus "$gpus" --arg dtype "$dtype" 'select(.ev == "summary") | .values | {
      gpus: $gpus, allreduce_dtype: (if $gpus == 1 then "-" else $dtype end),
      tokens_per_s: .["train.tokens_per_s"], step_s: .["train.step_s"],
      allreduce_ms: ((.["dist.allreduce_s"] // 0) * 1000),
      slowest_update_s: .["dist.update_s_slowest"], loss: .["train.loss"]}' \
    "$dir/events" >> "$out/results.jsonl"
}

status=0
skipped=""
for g in $counts; do
  if [ "$g" -gt "$visible" ]; then skipped="$skipped $g"; continue; fi
  if [ "$g" -eq 1 ]; then run_one 1 fp32 || status=1; continue; fi
  for d in $dtypes; do run_one "$g" "$d" || status=1; done
done

{
  echo "124M (12 x 12 x 768, RoPE), context 4096, bf16, $batch x $accum sequences per GPU per update, $steps updates (the first excluded); $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  echo
  echo "| GPUs | all-reduce dtype | tokens/s | speedup over 1 GPU | s per update | exposed all-reduce per update | slowest rank's update |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  jq -rs '(map(select(.gpus == 1)) | first | .tokens_per_s) as $one | .[] |
    "| \(.gpus) | \(.allreduce_dtype) | \(.tokens_per_s | round) | \(if $one then (.tokens_per_s / $one * 1000 | round / 1000 | tostring) + "x" else "-" end) | \(.step_s * 1000 | round / 1000) | \(.allreduce_ms * 10 | round / 10) ms | \(if .slowest_update_s then (.slowest_update_s * 1000 | round / 1000 | tostring) + " s" else "-" end) |"' \
    "$out/results.jsonl"
  [ -n "$skipped" ] && echo && echo "Skipped (only $visible GPUs visible):$skipped"
} | tee "$out/table.md"
echo "dist-scaling: exit $status"
exit $status
