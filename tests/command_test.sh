#!/usr/bin/env bash
# System test (schema/command.md): the `command` run kind through a real coordinator and worker.
# A Python training script (tests/data/command_train.py, reporting through
# python/headlab_run.py) runs as a grid of 3 arms x 2 seeds paired by seed. Checks: the
# crashing arm's first attempts fail (exit 3); retried, they resume from their checkpoint
# and end exactly where the uninterrupted arm does; `results` computes the
# comparisons from the runs' own summaries; provenance carries the script's SHA-256; a
# checkpoint downloaded through the API has the recorded hash; a cancelled run's program
# is gone.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "python3 is needed"; exit 77; }

SCRIPT=$HEADLAB_SOURCE_DIR/tests/data/command_train.py
GRID=$HL_TMP/command_grid.json
cat >"$GRID" <<JSON
{
  "name": "command_demo",
  "base": {"kind": "command",
           "command": {"program": "$SCRIPT", "interpreter": "python3"},
           "train": {"steps": 60, "lr": 0.05},
           "params": {"checkpoint_every": 20}},
  "axes": {"seed": [1, 2]},
  "arms": {"small": {"train.lr": 0.01}, "big": {}, "crash": {"params.fail_at_step": 30}},
  "pair_by": ["seed"],
  "comparisons": [
    {"name": "big vs small", "baseline": "small", "treatment": "big", "metric": "eval.loss", "stat": "delta_pct"},
    {"name": "crash vs big", "baseline": "big", "treatment": "crash", "metric": "eval.loss", "stat": "diff"}
  ],
  "max_attempts": 2
}
JSON

start_cluster 1

say "a command grid: 3 arms x 2 seeds"
EXP=$(submit "$GRID") || exit 1
wait_grid "$EXP" 300
expect_eq "failed runs (the crash arm's first attempts)" "crash crash" \
  "$(db "SELECT group_concat(arm, ' ') FROM runs WHERE experiment_id = $EXP AND status = 'failed'")"
say "retry the crashed runs: they resume from their last checkpoint"
for run in $(db "SELECT id FROM runs WHERE experiment_id = $EXP AND status = 'failed'"); do
  hl retry "$run" >/dev/null || fail "headlab retry $run failed"
done
wait_grid "$EXP" 300
check_one_success_per_run "$EXP" 6

say "the crashing arm failed once and resumed from its step-20 checkpoint"
expect_eq "crash runs with 2 attempts" 2 \
  "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP AND arm = 'crash' AND attempts = 2")"
expect_eq "first attempts of crash runs that failed with exit 3" 2 "$(db "
  SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id
  WHERE r.experiment_id = $EXP AND r.arm = 'crash' AND a.attempt = 1 AND a.status = 'failed' AND a.exit_code = 3")"
CRASH=$(db "SELECT min(id) FROM runs WHERE experiment_id = $EXP AND arm = 'crash'")
expect_eq "resume step of run $CRASH's second attempt" 20 \
  "$(db "SELECT json_extract(resume_json, '$.step') FROM attempts WHERE run_id = $CRASH AND attempt = 2")"
expect_eq "first step the second attempt reported" 21 \
  "$(db "SELECT min(step) FROM metrics WHERE run_id = $CRASH AND attempt = 2 AND key = 'train.loss'")"
expect_eq "train.loss points of the second attempt (steps 21..60)" 40 \
  "$(db "SELECT count(*) FROM metrics WHERE run_id = $CRASH AND attempt = 2 AND key = 'train.loss'")"
hl show "$CRASH" >"$HL_TMP/show.txt" || fail "headlab show $CRASH failed"
hl logs "$CRASH" >"$HL_TMP/logs.txt" || fail "headlab logs $CRASH failed"
grep -q "simulated crash at step 30" "$HL_TMP/logs.txt" || fail "logs do not show the crash: $(cat "$HL_TMP/logs.txt")"
ok "logs of run $CRASH show the first attempt's stderr (simulated crash at step 30)"

say "results: computed from the runs' summaries"
RES=$(hl results "$EXP" --json) || fail "headlab results --json failed"
# Independently: per seed 100 * (big / small - 1) from the summaries table, then the mean.
WANT=$(db "SELECT printf('%.9f', avg(100.0 * (b.value / s.value - 1))) FROM
  summaries b JOIN runs rb ON rb.id = b.run_id AND rb.arm = 'big' AND rb.experiment_id = $EXP
  JOIN runs rs ON rs.experiment_id = $EXP AND rs.arm = 'small' AND rs.seed = rb.seed
  JOIN summaries s ON s.run_id = rs.id AND s.key = 'eval.loss' WHERE b.key = 'eval.loss'")
GOT=$(jq -r '.comparisons[] | select(.name == "big vs small") | "\(.n) \(.mean)"' <<<"$RES")
read -r N MEAN <<<"$GOT"
expect_eq "pairs of big vs small" 2 "$N"
expect_eq "mean delta_pct of big vs small (from the summaries)" "$WANT" "$(printf '%.9f' "$MEAN")"
# A resumed run ends exactly where the uninterrupted one ends.
expect_eq "crash - big eval.loss per pair (resume reproduces the run)" "0 0" \
  "$(jq -r '[.comparisons[] | select(.name == "crash vs big") | .per_pair[].value] | map(tostring) | join(" ")' <<<"$RES")"
hl results "$EXP" >"$HL_TMP/results.txt" || fail "headlab results failed"
grep -q "95% CI" "$HL_TMP/results.txt" || fail "results print no 95% CI: $(cat "$HL_TMP/results.txt")"
ok "results: big vs small mean $MEAN % over 2 pairs"

say "provenance and artifacts"
expect_eq "command_sha256 in run $CRASH's provenance" "$(sha256sum "$SCRIPT" | cut -d' ' -f1)" \
  "$(db "SELECT json_extract(fields_json, '$.command_sha256') FROM provenance WHERE run_id = $CRASH AND attempt = 2")"
read -r ATT SEQ SHA APATH <<<"$(db "SELECT attempt, seq, sha256, path FROM artifacts
  WHERE run_id = $CRASH AND kind = 'checkpoint' ORDER BY attempt DESC, step DESC LIMIT 1" | tr '|' ' ')"
expect_eq "checkpoint file's sha256 on disk" "$SHA" "$(sha256sum "$APATH" | cut -d' ' -f1)"
(cd "$HL_TMP" && hl artifacts "$CRASH" --get "$ATT/$SEQ" -o downloaded.json) >/dev/null ||
  fail "headlab artifacts $CRASH --get $ATT/$SEQ failed"
expect_eq "downloaded checkpoint's sha256" "$SHA" "$(sha256sum "$HL_TMP/downloaded.json" | cut -d' ' -f1)"
expect_eq "the run's output.log artifact" 1 \
  "$(db "SELECT count(*) FROM artifacts WHERE run_id = $CRASH AND attempt = 2 AND kind = 'log'")"

say "per-step history as JSON lines (export --history)"
hl export "$EXP" --history -o "$HL_TMP/curves.jsonl" 2>/dev/null || fail "headlab export --history failed"
expect_eq "history lines (the current attempts' metric points)" \
  "$(db "SELECT count(*) FROM metrics m JOIN runs r ON r.id = m.run_id AND m.attempt = r.attempts
         WHERE r.experiment_id = $EXP")" "$(wc -l <"$HL_TMP/curves.jsonl")"
expect_eq "run $CRASH's last train.loss in the history" \
  "$(db "SELECT printf('%.12g', value) FROM metrics WHERE run_id = $CRASH AND attempt = 2 AND key = 'train.loss' AND step = 60")" \
  "$(jq -r --argjson r "$CRASH" 'select(.run == $r and .key == "train.loss" and .step == 60) |
        "\(.attempt) \(.arm) \(.params.seed) \(.value)"' "$HL_TMP/curves.jsonl" |
     awk '$1 == 2 && $2 == "crash" {printf "%.12g", $4}')"
python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert {r['arm'] for r in rows} == {'small', 'big', 'crash'}, {r['arm'] for r in rows}
assert all(set(r) >= {'experiment', 'run', 'arm', 'attempt', 'step', 'key', 'value', 'time_s', 'params'} for r in rows)
" "$HL_TMP/curves.jsonl" || fail "history lines lack fields or arms"
ok "every line has experiment, run, arm, attempt, step, key, value, time_s, params"

say "cancel a running command run: its program stops"
SLOW=$HL_TMP/slow_grid.json
jq '.name = "command_slow" | .arms = {"slow": {"params.sleep_s": 0.2, "train.steps": 100000}} |
    .axes = {"seed": [7]} | .comparisons = []' "$GRID" >"$SLOW"
EXP2=$(submit "$SLOW") || exit 1
RUN2=$(db "SELECT id FROM runs WHERE experiment_id = $EXP2")
has_points() { [[ "$(db "SELECT count(*) FROM metrics WHERE run_id = $RUN2")" -gt 2 ]]; }
wait_until 60 "run $RUN2 to report" has_points
pgrep -f "command_train.py" >/dev/null || fail "no command_train.py process while run $RUN2 runs"
hl cancel run "$RUN2" >/dev/null || fail "headlab cancel run $RUN2 failed"
is_cancelled() { [[ "$(db "SELECT status FROM runs WHERE id = $RUN2")" == cancelled ]]; }
wait_until 30 "run $RUN2 to be cancelled" is_cancelled
no_program() { ! pgrep -f "$SCRIPT" >/dev/null; }
wait_until 15 "the cancelled program to exit" no_program
ok "run $RUN2 cancelled and its program is gone"
