#!/usr/bin/env bash
# dist-check.sh: the data-parallel device check on a machine with >= 2 GPUs, after
# scripts/gpu/build-all.sh: a 2-rank data-parallel run (NCCL, one GPU per rank) of a small
# model against the 1-GPU run of the same global batch — loss curves step by step, the
# all-reduce time per update and the slowest rank's update time. Logs go to $OUT.
#
#   scripts/gpu/dist-check.sh [STEPS]      (default 60)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:-/tmp/headlab-gpu-out}"
bin="${HEADLAB_BIN:-$root/build-gpu/headlab}"
steps="${1:-60}"
deps="${HEADLAB_DEPS:-/tmp/headlab-deps}"
export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$out/dist"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$gpus" -lt 2 ]; then echo "dist-check: needs 2 GPUs, found $gpus"; exit 77; fi

manifest() {  # manifest NAME RANKS BATCH
  mkdir -p "$out/dist/$1"
  jq -n --arg out "$out/dist/$1/run" --argjson ranks "$2" --argjson batch "$3" --argjson steps "$steps" '{
    run: 1, attempt: 1, experiment: 1, out_dir: $out,
    config: {seed: 7, model: {layers: 6, heads: 8, width: 512, context: 512},
             train: {steps: $steps, batch_size: $batch, ranks: $ranks, device: "cuda",
                     log_every: 1, eval_every: 0, eval_batches: 2, checkpoint_every: 0,
                     warmup_steps: 10}}}' > "$out/dist/$1/manifest.json"
}
manifest one 1 16
manifest two 2 8
status=0
for n in one two; do
  CUDA_VISIBLE_DEVICES=0,1 "$bin" exec "$out/dist/$n/manifest.json" > "$out/dist/$n/events" \
    2> "$out/dist/$n/stderr" || { echo "dist-check: $n exited $?"; tail -5 "$out/dist/$n/stderr"; status=1; }
done
losses() { jq -r 'select(.ev == "metric" and .key == "train.loss") | "\(.step) \(.value)"' "$1"; }
paste <(losses "$out/dist/one/events") <(losses "$out/dist/two/events") > "$out/dist/pairs"
awk '{ d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > m) m = d; n++ }
     END { printf "steps compared: %d, largest relative train.loss difference: %.2e\n", n, m }' \
  "$out/dist/pairs" | tee "$out/dist/summary.txt"
for n in one two; do
  jq -c --arg n "$n" 'select(.ev == "summary") | {run: $n, loss: .values["train.loss"],
      eval_loss: .values["eval.loss"], tokens_per_s: .values["train.tokens_per_s"],
      allreduce_s: .values["dist.allreduce_s"], slowest_update_s: .values["dist.update_s_slowest"],
      elapsed_s: .values["time.elapsed_s"]}' "$out/dist/$n/events" | tee -a "$out/dist/summary.txt"
done
grep -h "joined" "$out/dist/two/stderr" | tee -a "$out/dist/summary.txt"
awk '{ d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > m) m = d } END { exit !(NR > 0 && m < 2e-2) }' \
  "$out/dist/pairs" || { echo "dist-check: loss curves differ by more than 2% or are missing"; status=1; }
echo "dist-check: exit $status"
exit $status
