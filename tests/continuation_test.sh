#!/usr/bin/env bash
# System test (schema/grid.md): shared-parent continuation through the service.
# Two tiny parents train 20 steps; a grid continuing an ordinary and a pruned arm from each
# parent's step-20 checkpoint is submitted while the parents still run (its runs must wait
# in the queue), then finishes with per-token log-prob artifacts for both arms, parent
# provenance on every attempt, steps counted on from the parent's, and `headlab results`
# printing the paired ΔPPL% comparison. Children of a missing parent or of a checkpoint
# step the parent never saved fail with a clear error.
source "$(dirname "$0")/lib.sh"

DIR=$HEADLAB_SOURCE_DIR/experiments/continuation

start_cluster 2

say "submit the parents"
PEXP=$(submit "$DIR/small_parent.jsonc") || exit 1
PARENTS=$(db "SELECT group_concat(id, ',') FROM (SELECT id FROM runs WHERE experiment_id = $PEXP ORDER BY id)")
expect_eq "parent runs" 2 "$(tr ',' '\n' <<<"$PARENTS" | wc -l)"

say "submit the continuation grid (parents $PARENTS) before the parents finish"
EXP=$(submit "$DIR/small_tokens.jsonc" --set "parent.run=$PARENTS") || exit 1
expect_eq "continuation runs" 4 "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP")"

wait_grid "$PEXP" 120
expect_eq "parents succeeded" 2 "$(db "SELECT count(*) FROM runs WHERE experiment_id = $PEXP AND status = 'succeeded'")"
# No child attempt may have started before its parent finished.
expect_eq "child attempts started before their parent finished" 0 "$(db "
  SELECT count(*) FROM attempts a JOIN runs c ON c.id = a.run_id
  JOIN runs p ON p.id = json_extract(c.config_json, '$.parent.run')
  WHERE c.experiment_id = $EXP AND a.assigned_at < p.updated_at")"

wait_grid "$EXP" 180
check_one_success_per_run "$EXP" 4

expect_eq "attempts whose provenance names the parent run and its step-20 checkpoint" 4 "$(db "
  SELECT count(*) FROM runs c
  JOIN attempts a ON a.run_id = c.id AND a.status = 'succeeded'
  JOIN provenance pv ON pv.run_id = a.run_id AND pv.attempt = a.attempt
  JOIN artifacts k ON k.run_id = json_extract(c.config_json, '$.parent.run')
       AND k.kind = 'checkpoint' AND k.step = 20
  WHERE c.experiment_id = $EXP AND pv.parent_run = json_extract(c.config_json, '$.parent.run')
    AND pv.parent_checkpoint_sha256 = k.sha256")"
expect_eq "children whose first logged step follows the parent's step 20" 4 "$(db "
  SELECT count(*) FROM (SELECT m.run_id, min(m.step) AS first FROM metrics m
    JOIN runs c ON c.id = m.run_id WHERE c.experiment_id = $EXP AND m.key = 'train.loss'
    GROUP BY m.run_id) WHERE first > 20")"
expect_eq "children with a final checkpoint at step 40" 4 "$(db "
  SELECT count(DISTINCT k.run_id) FROM artifacts k JOIN runs c ON c.id = k.run_id
  WHERE c.experiment_id = $EXP AND k.kind = 'checkpoint' AND k.step = 40")"

say "per-token log-prob artifacts of both arms"
for arm in ordinary pruned; do
  n=0
  while IFS='|' read -r path sha; do
    [[ -f "$path" ]] || fail "logprobs artifact $path of arm $arm is missing"
    expect_eq "sha256 of $path" "$sha" "$(sha256sum "$path" | cut -d' ' -f1)"
    [[ -s "$path" ]] || fail "logprobs artifact $path is empty"
    n=$((n + 1))
  done < <(db "SELECT k.path, k.sha256 FROM artifacts k JOIN runs c ON c.id = k.run_id
               WHERE c.experiment_id = $EXP AND c.arm = '$arm' AND k.kind = 'logprobs'")
  expect_eq "logprobs artifacts of arm $arm" 2 "$n"
done
# The arms share the parent's weights up to step 20 but not after: their log-probs differ.
A=$(db "SELECT k.sha256 FROM artifacts k JOIN runs c ON c.id = k.run_id WHERE c.experiment_id = $EXP
        AND c.arm = 'ordinary' AND k.kind = 'logprobs' ORDER BY c.id LIMIT 1")
B=$(db "SELECT k.sha256 FROM artifacts k JOIN runs c ON c.id = k.run_id WHERE c.experiment_id = $EXP
        AND c.arm = 'pruned' AND k.kind = 'logprobs' ORDER BY c.id LIMIT 1")
[[ "$A" != "$B" ]] || fail "ordinary and pruned arms wrote identical log-probs"
ok "arms' log-probs differ"

say "headlab results $EXP"
OUT=$(hl results "$EXP") || fail "headlab results $EXP exited $?"
echo "$OUT"
grep -q "pruned vs ordinary" <<<"$OUT" || fail "results do not show the comparison"
grep -q "delta_pct" <<<"$OUT" || fail "results do not show the delta_pct statistic"
RES=$(hl results "$EXP" --json) || fail "headlab results $EXP --json exited $?"
expect_eq "comparison pairs (one per parent)" 2 \
  "$(jq -r '.comparisons[] | select(.name == "pruned vs ordinary") | .n' <<<"$RES")"
jq -e '.comparisons[] | select(.name == "pruned vs ordinary") | .mean | type == "number"' \
  <<<"$RES" >/dev/null || fail "comparison has no numeric mean: $RES"
ok "paired ΔPPL% comparison printed"

say "children of a missing parent or an unsaved parent step fail with a clear error"
BAD=$(submit "$DIR/small_tokens.jsonc" --set "parent.run=999999") || exit 1
wait_grid "$BAD" 60
expect_eq "children of a missing parent failed" 2 "$(db "
  SELECT count(*) FROM runs WHERE experiment_id = $BAD AND status = 'failed'
  AND error LIKE '%parent run 999999 does not exist%'")"
FIRST=${PARENTS%%,*}
BAD2=$(submit "$DIR/small_tokens.jsonc" --set "parent.run=$FIRST" --set "parent.step=7") || exit 1
wait_grid "$BAD2" 60
expect_eq "children of an unsaved parent step failed" 2 "$(db "
  SELECT count(*) FROM runs WHERE experiment_id = $BAD2 AND status = 'failed'
  AND error LIKE '%has no checkpoint of step 7%'")"
expect_eq "no attempt was started for them" 0 "$(db "
  SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id
  WHERE r.experiment_id IN ($BAD, $BAD2)")"
