#!/usr/bin/env bash
# System test (issue 10, data-parallel runs, on the CPU with Gloo; the same code uses NCCL on
# GPUs): (1) a 2-rank run follows the 1-rank run of the same global batch step for step and
# (1b) resumes bitwise from rank 0's checkpoint; (2) a rank that dies fails the attempt promptly, with no rank left behind; (3) a 2-rank
# run goes through a real coordinator and worker and reports its all-reduce time.
source "$(dirname "$0")/lib.sh"

manifest() {  # manifest DIR RANKS BATCH STEPS
  jq -n --arg out "$1/out" --argjson ranks "$2" --argjson batch "$3" --argjson steps "$4" '{
    run: 1, attempt: 1, experiment: 1, out_dir: $out,
    config: {seed: 5, model: {layers: 1, heads: 2, width: 32, context: 32},
             train: {steps: $steps, batch_size: $batch, ranks: $ranks, device: "cpu",
                     threads: 1, log_every: 1, eval_every: 0, eval_batches: 1,
                     checkpoint_every: 0, warmup_steps: 2}}}' >"$1/manifest.json"
}
losses() { jq -r 'select(.ev == "metric" and .key == "train.loss") | "\(.step) \(.value)"' "$1"; }

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
