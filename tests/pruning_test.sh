#!/usr/bin/env bash
# System test (pruning controls and tasks; docs/REPRODUCTIONS.md): a shared-parent continuation
# with an ordinary arm, an SAF arm and two physically pruned arms (SAF's own heads,
# prune.method saf; the gate-Taylor selection of SAF eq. 19) at matched tokens, calibrated
# on the held-out calibration split, runs through coordinator + workers. `headlab results`
# shows the paired ΔPPL% comparisons; the pruned arms report fewer parameters
# (prune.params < prune.params_before), their removed heads land in the head_maps table,
# and per parent the same_heads arm removed exactly the head the SAF arm fixed.
# The MQAR and passkey run kinds run too and report accuracy per arm.
source "$(dirname "$0")/lib.sh"

DIR=$HEADLAB_SOURCE_DIR/experiments

start_cluster 2

say "submit the parents, the pruning continuation grid and the task grid"
PEXP=$(submit "$DIR/continuation/small_parent.jsonc") || exit 1
PARENTS=$(db "SELECT group_concat(id, ',') FROM (SELECT id FROM runs WHERE experiment_id = $PEXP ORDER BY id)")
EXP=$(submit "$DIR/continuation/pruning_tokens.jsonc" --set "parent.run=$PARENTS") || exit 1
expect_eq "continuation runs" 8 "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP")"
TEXP=$(submit "$DIR/tasks/small_tasks.jsonc") || exit 1

wait_grid "$PEXP" 120
wait_grid "$EXP" 120
check_one_success_per_run "$EXP" 8

say "headlab results $EXP"
OUT=$(hl results "$EXP") || fail "headlab results $EXP exited $?"
echo "$OUT"
for name in "saf vs ordinary" "same heads vs ordinary" "gate-Taylor vs ordinary" "same heads vs saf"; do
  grep -q "$name" <<<"$OUT" || fail "results do not show \"$name\""
done
grep -q "prune.params" <<<"$OUT" || fail "results do not show prune.params"
RES=$(hl results "$EXP" --json) || fail "headlab results $EXP --json exited $?"
for name in "saf vs ordinary" "same heads vs ordinary" "gate-Taylor vs ordinary"; do
  expect_eq "pairs of \"$name\" (one per parent)" 2 \
    "$(jq -r --arg n "$name" '.comparisons[] | select(.name == $n) | .n' <<<"$RES")"
  jq -e --arg n "$name" '.comparisons[] | select(.name == $n) | .mean | type == "number"' \
    <<<"$RES" >/dev/null || fail "comparison \"$name\" has no numeric ΔPPL%: $RES"
done
ok "paired ΔPPL% comparisons"
for arm in same_heads gate_taylor; do
  A=$(jq -c --arg a "$arm" '.arms[] | select(.arm == $a) | .metrics' <<<"$RES")
  expect_eq "$arm: heads removed" 1 "$(jq -r '.["prune.heads_removed"].mean' <<<"$A")"
  jq -e '.["prune.params"].mean < .["prune.params_before"].mean' <<<"$A" >/dev/null ||
    fail "$arm: prune.params is not below prune.params_before: $A"
  # One head of a 1 x 4, width-32 model: Q, K, V rows and O columns of 8 x 32 each.
  expect_eq "$arm: parameters removed" 1024 \
    "$(jq -r '(.["prune.params_before"].mean - .["prune.params"].mean)' <<<"$A")"
done
for arm in ordinary saf; do
  jq -e --arg a "$arm" '.arms[] | select(.arm == $a) | .metrics | has("prune.params") | not' \
    <<<"$RES" >/dev/null || fail "the $arm arm reports pruning figures"
done
ok "pruned arms are smaller"

say "head maps of the pruned arms"
expect_eq "pruned head_maps rows (2 arms x 2 parents x 1 head)" 4 "$(db "
  SELECT count(*) FROM head_maps h JOIN runs r ON r.id = h.run_id
  WHERE r.experiment_id = $EXP AND h.role = 'pruned'")"
expect_eq "parents whose same_heads arm removed the head their saf arm fixed" 2 "$(db "
  SELECT count(*) FROM head_maps hp JOIN runs rp ON rp.id = hp.run_id
  JOIN runs rs ON rs.experiment_id = rp.experiment_id AND rs.arm = 'saf'
   AND json_extract(rs.config_json, '\$.parent.run') = json_extract(rp.config_json, '\$.parent.run')
  JOIN head_maps hs ON hs.run_id = rs.id AND hs.role = 'fixed' AND hs.layer = hp.layer AND hs.head = hp.head
  WHERE rp.experiment_id = $EXP AND rp.arm = 'same_heads' AND hp.role = 'pruned'")"
expect_eq "continuations with a held-out calibration split" 8 "$(db "
  SELECT count(*) FROM provenance pv JOIN runs r ON r.id = pv.run_id
  WHERE r.experiment_id = $EXP AND json_extract(pv.fields_json, '\$.dataset_calib_tokens') > 0")"
expect_eq "gate_taylor rows carry their importance" 2 "$(db "
  SELECT count(*) FROM head_maps h JOIN runs r ON r.id = h.run_id
  WHERE r.experiment_id = $EXP AND r.arm = 'gate_taylor' AND h.score > 0")"

say "task run kinds: MQAR and passkey accuracy per arm"
wait_grid "$TEXP" 120
check_one_success_per_run "$TEXP" 4
TRES=$(hl results "$TEXP" --json) || fail "headlab results $TEXP --json exited $?"
jq -e '.arms[] | select(.arm == "mqar") | .metrics["mqar.accuracy"].mean | (. >= 0 and . <= 1)' \
  <<<"$TRES" >/dev/null || fail "mqar arm has no accuracy in [0, 1]: $TRES"
jq -e '.arms[] | select(.arm == "passkey") | .metrics["passkey.accuracy"].mean | (. >= 0 and . <= 1)' \
  <<<"$TRES" >/dev/null || fail "passkey arm has no accuracy in [0, 1]: $TRES"
expect_eq "passkey cells of each passkey run (2 lengths x 2 depths)" 2 "$(db "
  SELECT count(*) FROM (SELECT s.run_id FROM metrics s JOIN runs r ON r.id = s.run_id
    WHERE r.experiment_id = $TEXP AND r.arm = 'passkey' AND s.key LIKE 'passkey.acc.L%'
    GROUP BY s.run_id HAVING count(DISTINCT s.key) = 4)")"
TOUT=$(hl results "$TEXP") || fail "headlab results $TEXP exited $?"
echo "$TOUT"
grep -q "mqar.accuracy" <<<"$TOUT" || fail "results do not show mqar.accuracy"
ok "task kinds report accuracy"
