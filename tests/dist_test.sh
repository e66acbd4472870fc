#!/usr/bin/env bash
# System test (data-parallel runs, on the CPU with Gloo; the same code uses
# NCCL on GPUs): (1) a 2-rank run, its gradients all-reduced in buckets during backward,
# follows the 1-rank run of the same global batch step for step and (1b) resumes bitwise
# from rank 0's checkpoint; (1c) gradient accumulation and a bf16 all-reduce; (1d) each
# method (SAF, gate-Taylor pruning, AAH, AoH) at 2 ranks equals 1 rank, every rank making
# the same choices; (2) a rank that dies fails the attempt promptly, with no rank left
# behind; (3) a 2-rank run goes through a real coordinator and worker and reports its
# all-reduce time; (4) a 2-rank bench-update leg.
source "$(dirname "$0")/lib.sh"

manifest() {  # manifest DIR RANKS BATCH STEPS [EXTRA_CONFIG_JSON]
  local extra=${5:-'{}'}
  jq -n --arg out "$1/out" --argjson ranks "$2" --argjson batch "$3" --argjson steps "$4" \
        --argjson extra "$extra" '{
    run: 1, attempt: 1, experiment: 1, out_dir: $out,
    config: ({seed: 5, model: {layers: 1, heads: 2, width: 32, context: 32},
              train: {steps: $steps, batch_size: $batch, ranks: $ranks, device: "cpu",
                      threads: 1, log_every: 1, eval_every: 0, eval_batches: 1,
                      checkpoint_every: 0, warmup_steps: 2}} * $extra)}' >"$1/manifest.json"
}
losses() { jq -r 'select(.ev == "metric" and .key == "train.loss") | "\(.step) \(.value)"' "$1"; }
# same_losses NAME EVENTS_A EVENTS_B STEPS TOLERANCE: train.loss agrees at every step.
same_losses() {
  paste <(losses "$2") <(losses "$3") >"$HL_TMP/pairs.$1"
  expect_eq "$1: logged steps in both runs" "$4" "$(awk 'NF == 4 && $1 == $3' "$HL_TMP/pairs.$1" | wc -l)"
  local worst
  worst=$(awk '{ d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > m) m = d } END { printf "%.2e", m }' "$HL_TMP/pairs.$1")
  awk -v w="$worst" -v t="$5" 'BEGIN { exit !(w < t) }' || fail "$1: losses differ by $worst (relative; allowed $5)"
  ok "$1: losses agree within $worst (relative) over $4 steps"
}
run_exec() {  # run_exec DIR: runs DIR/manifest.json, events to DIR/events
  timeout 180 "$HEADLAB_BIN" exec "$1/manifest.json" >"$1/events" 2>"$1/stderr" ||
    fail "$1 exited $?: $(tail -5 "$1/stderr")"
}
summary_of() { jq -c 'select(.ev == "summary") | .values' "$1/events"; }

say "1. ranks = 2 x batch 2 against ranks = 1 x batch 4 (the same global batches)"
mkdir -p "$HL_TMP/one" "$HL_TMP/two"
manifest "$HL_TMP/one" 1 4 6
manifest "$HL_TMP/two" 2 2 6
"$HEADLAB_BIN" exec "$HL_TMP/one/manifest.json" >"$HL_TMP/one/events" 2>"$HL_TMP/one/stderr" ||
  fail "1-rank run exited $?: $(tail -3 "$HL_TMP/one/stderr")"
timeout 120 "$HEADLAB_BIN" exec "$HL_TMP/two/manifest.json" >"$HL_TMP/two/events" 2>"$HL_TMP/two/stderr" ||
  fail "2-rank run exited $?: $(tail -5 "$HL_TMP/two/stderr")"
grep -q "rank 1 of 2 joined (gloo" "$HL_TMP/two/stderr" || fail "rank 1 did not join: $(tail -5 "$HL_TMP/two/stderr")"
paste <(losses "$HL_TMP/one/events") <(losses "$HL_TMP/two/events") >"$HL_TMP/pairs"
expect_eq "logged steps in both runs" 6 "$(awk 'NF == 4' "$HL_TMP/pairs" | wc -l)"
worst=$(awk '{ d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > m) m = d } END { printf "%.2e", m }' "$HL_TMP/pairs")
say "   largest relative train.loss difference over 6 steps: $worst"
awk -v w="$worst" 'BEGIN { exit !(w < 1e-4) }' || fail "2-rank losses differ from 1-rank losses by $worst"
ok "2-rank losses equal the 1-rank losses within $worst (relative)"
summary=$(jq -c 'select(.ev == "summary") | .values' "$HL_TMP/two/events")
e1=$(jq -r 'select(.ev == "summary") | .values."eval.loss"' "$HL_TMP/one/events")
e2=$(jq -r '."eval.loss"' <<<"$summary")
awk -v a="$e1" -v b="$e2" 'BEGIN { d = (a - b) / a; if (d < 0) d = -d; exit !(d < 1e-4) }' ||
  fail "held-out loss of the 2-rank run ($e2) differs from the 1-rank run's ($e1)"
ok "held-out loss $e2 (2 ranks) = $e1 (1 rank): evaluated on the same global-batch rows"
expect_eq "summary dist.ranks" 2 "$(jq '."dist.ranks"' <<<"$summary")"
jq -e '."dist.allreduce_s" > 0 and ."dist.update_s_slowest" > 0' <<<"$summary" >/dev/null ||
  fail "summary lacks the all-reduce / slowest-rank times: $summary"
ok "all-reduce $(jq '."dist.allreduce_s"' <<<"$summary") s and slowest rank $(jq '."dist.update_s_slowest"' <<<"$summary") s per update"
expect_eq "events written by rank 1 (none: only rank 0 reports)" 1 \
  "$(jq -r 'select(.ev == "provenance" and .fields.ranks != null) | .fields.ranks' "$HL_TMP/two/events" | wc -l)"

say "1b. a 2-rank run resumed from its step-3 checkpoint continues bitwise"
mkdir -p "$HL_TMP/res"
manifest "$HL_TMP/res" 2 2 6
jq '.config.train.checkpoint_every = 3' "$HL_TMP/res/manifest.json" >"$HL_TMP/res/full.json"
"$HEADLAB_BIN" exec "$HL_TMP/res/full.json" >"$HL_TMP/res/full.events" 2>"$HL_TMP/res/full.stderr" ||
  fail "2-rank run with checkpoints exited $?"
ckpt=$(jq -c 'select(.ev == "artifact" and .kind == "checkpoint" and .step == 3) | {path, sha256, step}' \
  "$HL_TMP/res/full.events")
[[ -n "$ckpt" ]] || fail "no step-3 checkpoint from rank 0"
jq --argjson r "$ckpt" '.resume = $r | .out_dir += "-resumed"' "$HL_TMP/res/full.json" >"$HL_TMP/res/cont.json"
"$HEADLAB_BIN" exec "$HL_TMP/res/cont.json" >"$HL_TMP/res/cont.events" 2>"$HL_TMP/res/cont.stderr" ||
  fail "resumed 2-rank run exited $?: $(tail -3 "$HL_TMP/res/cont.stderr")"
expect_eq "train.loss at steps 4-6, resumed vs uninterrupted" \
  "$(losses "$HL_TMP/res/full.events" | awk '$1 > 3')" "$(losses "$HL_TMP/res/cont.events")"

say "1c. gradient accumulation (2 micro-batches) and a bf16 all-reduce"
mkdir -p "$HL_TMP/acc1" "$HL_TMP/acc2" "$HL_TMP/bf16"
manifest "$HL_TMP/acc1" 1 2 5 '{"train": {"grad_accum": 2}}'
manifest "$HL_TMP/acc2" 2 1 5 '{"train": {"grad_accum": 2}}'
manifest "$HL_TMP/bf16" 2 2 6 '{"train": {"allreduce_dtype": "bf16"}}'
for d in acc1 acc2 bf16; do run_exec "$HL_TMP/$d"; done
same_losses "accumulation, 2 ranks x 1 row vs 1 rank x 2 rows" "$HL_TMP/acc1/events" "$HL_TMP/acc2/events" 5 1e-4
# bf16 rounds each update's mean gradient (relative 2^-9): the curve stays close.
same_losses "bf16 all-reduce vs fp32 on 1 rank" "$HL_TMP/one/events" "$HL_TMP/bf16/events" 6 2e-2
# ... and the rounding is real: the same 2-rank run with fp32 all-reduce logs other losses.
[[ "$(losses "$HL_TMP/two/events" | awk '$1 > 1')" != "$(losses "$HL_TMP/bf16/events" | awk '$1 > 1')" ]] ||
  fail "bf16 all-reduce: steps 2-6 equal the fp32 2-rank run's (were the gradients rounded?)"
ok "bf16 all-reduce: steps 2-6 differ from the fp32 2-rank run's (gradients rounded to bf16)"
expect_eq "bf16 run's provenance allreduce_dtype" bf16 \
  "$(jq -r 'select(.ev == "provenance" and .fields.allreduce_dtype != null) | .fields.allreduce_dtype' "$HL_TMP/bf16/events")"
buckets=$(jq -r 'select(.ev == "provenance" and .fields.allreduce_buckets != null) | .fields.allreduce_buckets' "$HL_TMP/bf16/events")
(( buckets >= 1 )) || fail "no allreduce_buckets in the provenance: $buckets"
ok "gradients travelled in $buckets bucket(s)"

say "1d. methods at 2 ranks x batch 2 equal 1 rank x batch 4, every rank choosing alike"
METHOD_MODEL='"model": {"layers": 2, "heads": 4, "width": 32, "context": 32}'
declare -A METHOD=(
  [saf]='{'"$METHOD_MODEL"', "saf": {"method": "replace", "rate": 0.25, "tau": 0.5,
          "calib_sequences": 4, "calib_batch": 2, "fit_steps": 60}}'
  [prune]='{'"$METHOD_MODEL"', "prune": {"method": "gate_taylor", "rate": 0.25, "step": 2,
            "calib_sequences": 4, "calib_batch": 2}}'
  [aah]='{'"$METHOD_MODEL"', "aah": {"regime": "full_adaptive", "hierarchy": "2,2,2,2",
          "control_every": 2, "observe_rows": 2}}'
  [aoh]='{'"$METHOD_MODEL"', "aoh": {"method": "aoh", "apply_step": 3, "sparsity": 0.5,
          "sink": 2, "recent": 8, "prefill_chunk": 16}}'
)
for m in saf prune aah aoh; do
  mkdir -p "$HL_TMP/$m-1" "$HL_TMP/$m-2"
  manifest "$HL_TMP/$m-1" 1 4 6 "${METHOD[$m]}"
  manifest "$HL_TMP/$m-2" 2 2 6 "${METHOD[$m]}"
  run_exec "$HL_TMP/$m-1"
  run_exec "$HL_TMP/$m-2"
  same_losses "$m" "$HL_TMP/$m-1/events" "$HL_TMP/$m-2/events" 6 1e-4
done
# SAF: the same heads fixed (the head maps' roles), and rank 1 installed them too (its own
# artifacts, unreported, in out/rank-1; the run would have failed had they differed).
roles() { jq -c '[.head_map[] | [.layer, .head, .role]]' "$1"; }
expect_eq "saf: head map at 2 ranks = at 1 rank" "$(roles "$HL_TMP/saf-1/out/saf_event_0.json")" \
  "$(roles "$HL_TMP/saf-2/out/saf_event_0.json")"
expect_eq "saf: rank 1's head map = rank 0's" "$(roles "$HL_TMP/saf-2/out/saf_event_0.json")" \
  "$(roles "$HL_TMP/saf-2/out/rank-1/saf_event_0.json")"
expect_eq "saf: heads fixed at 2 ranks" 2 "$(summary_of "$HL_TMP/saf-2" | jq '."saf.heads_fixed"')"
pruned() { jq -c '[.head_maps[] | [.layer, .head]]' "$1"; }
expect_eq "prune: the heads removed at step 2, 2 ranks vs 1" \
  "$(pruned "$HL_TMP/prune-1/out/prune_head_map-00000002.json")" \
  "$(pruned "$HL_TMP/prune-2/out/prune_head_map-00000002.json")"
expect_eq "prune: parameters after removal, 2 ranks vs 1" \
  "$(summary_of "$HL_TMP/prune-1" | jq '."prune.params"')" "$(summary_of "$HL_TMP/prune-2" | jq '."prune.params"')"
# AAH: the controller picked the same windows (some below the context: ACR < 1).
aah_windows() { summary_of "$1" | jq -c 'with_entries(select(.key | startswith("aah.bucket.") or . == "aah.acr_train"))'; }
expect_eq "aah: window buckets and training ACR, 2 ranks vs 1" "$(aah_windows "$HL_TMP/aah-1")" "$(aah_windows "$HL_TMP/aah-2")"
summary_of "$HL_TMP/aah-2" | jq -e '."aah.acr_train" < 1' >/dev/null ||
  fail "aah: no window below the context was chosen: $(aah_windows "$HL_TMP/aah-2")"
expect_eq "aoh: converted at step, 2 ranks vs 1" 3 "$(summary_of "$HL_TMP/aoh-2" | jq '."aoh.converted_at"')"

say "2. killing rank 1 mid-run fails the attempt promptly"
mkdir -p "$HL_TMP/kill"
manifest "$HL_TMP/kill" 2 2 100000
"$HEADLAB_BIN" exec "$HL_TMP/kill/manifest.json" >"$HL_TMP/kill/events" 2>"$HL_TMP/kill/stderr" &
lead=$!
HL_EXTRA_PIDS+=("$lead")
wait_until 60 "rank 1 training" grep -q "step 3/" "$HL_TMP/kill/stderr"
peer=$(pgrep -f "exec --rank 1 $HL_TMP/kill/manifest.json") || fail "rank 1 process not found"
t0=$(date +%s)
kill -9 "$peer"
wait "$lead"
rc=$?
expect_eq "rank 0 exit status after rank 1 was killed" 1 "$rc"
(( $(date +%s) - t0 <= 10 )) || fail "rank 0 took $(( $(date +%s) - t0 )) s to stop"
grep -q "rank 1 was killed by signal 9" "$HL_TMP/kill/stderr" || fail "no clear error: $(tail -3 "$HL_TMP/kill/stderr")"
pgrep -f "$HL_TMP/kill/manifest.json" >/dev/null && fail "a rank of the killed attempt still runs"
ok "rank 0 stopped in $(( $(date +%s) - t0 )) s with \"$(grep -o 'rank 1 was killed by signal 9[^"]*' "$HL_TMP/kill/stderr" | head -1)\""

say "3. a 2-rank run through the service"
start_cluster 1
cat >"$HL_TMP/grid.jsonc" <<'GRID'
{ "name": "dist_small",
  "base": {"seed": 5, "model": {"layers": 1, "heads": 2, "width": 32, "context": 32},
           "train": {"steps": 4, "batch_size": 2, "device": "cpu", "threads": 1,
                     "eval_every": 0, "eval_batches": 1, "warmup_steps": 2}},
  "arms": {"one_rank": {"train.batch_size": 4}, "two_ranks": {"train.ranks": 2}} }
GRID
EXP=$(submit "$HL_TMP/grid.jsonc") || exit 1
wait_grid "$EXP" 180
check_one_success_per_run "$EXP" 2
expect_eq "two_ranks summary dist.ranks" 2 "$(db "SELECT CAST(s.value AS INT) FROM summaries s JOIN runs r ON r.id = s.run_id
  WHERE r.experiment_id = $EXP AND r.arm = 'two_ranks' AND s.key = 'dist.ranks'")"
ok "the 2-rank run succeeded through coordinator and worker"

say "4. a 2-rank bench-update leg: every update includes the all-reduce, timed at the slowest rank"
mkdir -p "$HL_TMP/bench"
manifest "$HL_TMP/bench" 2 2 0 '{"kind": "bench-update", "bench": {"warmup": 1, "repeats": 3}}'
run_exec "$HL_TMP/bench"
grep -q "rank 1 of 2 joined (gloo" "$HL_TMP/bench/stderr" || fail "bench rank 1 did not join: $(tail -5 "$HL_TMP/bench/stderr")"
bench=$(summary_of "$HL_TMP/bench")
expect_eq "bench-update summary dist.ranks" 2 "$(jq '."dist.ranks"' <<<"$bench")"
jq -e '."bench.update_ms" > 0 and ."dist.allreduce_s" >= 0 and
       ."dist.allreduce_s" * 1000 < ."bench.update_ms"' <<<"$bench" >/dev/null ||
  fail "bench-update summary: $bench"
expect_eq "timed updates reported" 3 "$(jq -r 'select(.ev == "metric" and .key == "bench.update_ms") | .step' "$HL_TMP/bench/events" | wc -l)"
ok "bench-update at 2 ranks: $(jq '."bench.update_ms"' <<<"$bench") ms per update, $(jq '."dist.allreduce_s" * 1000' <<<"$bench") ms exposed all-reduce"
