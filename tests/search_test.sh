#!/usr/bin/env bash
# System test (schema/grid.md, "Search"): a random search with the median stopping rule.
# 4 samples of params.q ~ U(1, 2) x arms a, b; each run logs train.loss = q for 10 steps.
# With 2 slots, samples 0 and 1 of arm a complete first; then sample k (2, 3) stops at
# step 3 iff q_k > (q_0 + q_1) / 2 (the median of 2 running averages), and its arm-b
# counterpart is cancelled with it: a pair stops together, shown as cancelled with the
# reason. The grid's seed is the first whose draws stop exactly one of samples 2 and 3.
source "$(dirname "$0")/lib.sh"

cat >"$HL_TMP/steps.sh" <<'SH'
q=$(sed -n 's/.*"q": *\([0-9.e+-]*\).*/\1/p' "$HEADLAB_CONFIG" | head -1)
for s in 1 2 3 4 5 6 7 8 9 10; do
  echo "{\"ev\":\"metrics\",\"step\":$s,\"values\":{\"train.loss\":$q}}" >&"$HEADLAB_FD"
  sleep 0.25
done
echo "{\"ev\":\"summary\",\"values\":{\"train.loss\":$q}}" >&"$HEADLAB_FD"
SH
grid() {  # grid with search seed $1
  cat <<JSON
{"name": "rs", "base": {"kind": "command", "command": {"program": "$HL_TMP/steps.sh", "interpreter": "sh"}},
 "arms": {"a": {}, "b": {"params.b": 1}}, "max_attempts": 1,
 "search": {"samples": 4, "seed": $1, "space": {"params.q": {"uniform": [1.0, 2.0]}},
            "early_stop": {"rule": "median", "metric": "train.loss", "min_step": 3, "min_completed": 2}}}
JSON
}

say "pick a seed whose draws stop exactly one of samples 2 and 3"
SEED= STOP=
for seed in $(seq 0 40); do
  grid "$seed" >"$HL_TMP/rs.json"
  mapfile -t Q < <("$HEADLAB_BIN" submit "$HL_TMP/rs.json" --dry-run --json | jq -r '.configs[0:4][] | .config.params.q')
  (( ${#Q[@]} == 4 )) || fail "dry run gave ${#Q[@]} configs of arm a"
  s2=$(awk -v a="${Q[0]}" -v b="${Q[1]}" -v q="${Q[2]}" 'BEGIN { print (q > (a + b) / 2) }')
  s3=$(awk -v a="${Q[0]}" -v b="${Q[1]}" -v q="${Q[3]}" 'BEGIN { print (q > (a + b) / 2) }')
  if (( s2 + s3 == 1 )); then SEED=$seed; STOP=$(( s2 ? 2 : 3 )); KEEP=$(( s2 ? 3 : 2 )); break; fi
done
[[ -n "$SEED" ]] || fail "no seed in 0..40 stops exactly one sample"
ok "seed $SEED: q = ${Q[*]}; sample $STOP should stop, sample $KEEP not"

start_coordinator
start_worker w1 --slots 2
wait_workers 1
EXP=$(submit "$HL_TMP/rs.json") || exit 1
wait_grid "$EXP" 120 || fail "the search did not finish"

say "the stopped sample and its pair are cancelled with the reason; the rest succeeded"
status_of() { db "SELECT status FROM runs WHERE experiment_id = $EXP AND idx = $1"; }
error_of() { db "SELECT error FROM runs WHERE experiment_id = $EXP AND idx = $1"; }
for idx in 0 1 4 5 "$KEEP" $(( KEEP + 4 )); do
  expect_eq "status of run idx $idx" succeeded "$(status_of "$idx")"
done
expect_eq "status of run idx $STOP (arm a)" cancelled "$(status_of "$STOP")"
expect_eq "status of run idx $(( STOP + 4 )) (arm b)" cancelled "$(status_of $(( STOP + 4 )))"
[[ "$(error_of "$STOP")" == "early stop (median rule): train.loss best "* ]] ||
  fail "the stopped run's error: $(error_of "$STOP")"
[[ "$(error_of $(( STOP + 4 )))" == *"(stopped with its pair: run "* ]] ||
  fail "its pair's error: $(error_of $(( STOP + 4 )))"
expect_eq "cancel events with the median rule" 2 \
  "$(db "SELECT count(*) FROM events WHERE experiment_id = $EXP AND kind = 'cancel' AND detail_json LIKE '%median rule%'")"
ok "sample $STOP stopped in both arms: $(error_of "$STOP")"
