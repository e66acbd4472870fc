#!/usr/bin/env bash
# System test (docs/DESIGN.md, "Measurement"): paired timing through the service. The small SAF update grid
# (experiments/measure/saf_update_small.jsonc: ordinary, 25% and 50% fixed heads and a
# zero-replacement control; here 2 reps = 8 bench-update legs, each a LibTorch process)
# runs on a real coordinator with two workers. Checks: every leg ran on ONE worker, one at
# a time, in ABBA order over the reps, each in its own exec process; `headlab results
# --json` shows each paired speedup and the zero-replacement control equal to the values
# computed here from the legs' own bench.update_ms summaries (t_ordinary / t_method per
# rep, median over reps), the contention flag equal to |control - 1| > the grid's 4%
# tolerance, n, the estimator (median for single-device legs), the device, the spread, and
# FLOPs ratios "unmeasured" with a reason on CPU;
# paired_stats holds the same; the text output names estimator, device and contention.
source "$(dirname "$0")/lib.sh"

DIR=$HEADLAB_SOURCE_DIR/experiments/measure

start_cluster 2

say "submit the paired timing grid"
EXP=$(submit "$DIR/saf_update_small.jsonc" --set pair.rep=0,1) || exit 1
wait_grid "$EXP" 240
check_one_success_per_run "$EXP" 8

expect_eq "workers that ran the legs" 1 "$(db "
  SELECT count(DISTINCT a.worker_id) FROM attempts a JOIN runs r ON r.id = a.run_id
  WHERE r.experiment_id = $EXP")"
expect_eq "legs started before the previous leg finished" 0 "$(db "
  SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id
  JOIN attempts b ON b.rowid = (SELECT max(b2.rowid) FROM attempts b2 JOIN runs r2 ON r2.id = b2.run_id
                                WHERE r2.experiment_id = $EXP AND b2.rowid < a.rowid)
  WHERE r.experiment_id = $EXP AND a.assigned_at < b.finished_at")"
ORDER=$(db "SELECT group_concat(leg, ' ') FROM (SELECT substr(r.arm, 1, 1) ||
              json_extract(r.config_json, '$.pair.rep') AS leg
            FROM attempts a JOIN runs r ON r.id = a.run_id
            WHERE r.experiment_id = $EXP ORDER BY a.rowid)")
expect_eq "leg order (ABBA over reps)" \
  "a0 b0 c0 z0 z1 c1 b1 a1" "$ORDER"
expect_eq "distinct exec processes (provenance pid per leg)" 8 "$(db "
  SELECT count(DISTINCT json_extract(p.fields_json, '$.pid')) FROM provenance p
  JOIN runs r ON r.id = p.run_id WHERE r.experiment_id = $EXP")"

say "headlab results $EXP --json"
RES=$(hl results "$EXP" --json) || fail "headlab results $EXP --json exited $?"
# Each leg's own bench.update_ms summary, paired per rep and reduced here, independently of
# the coordinator's estimator: t(a_ordinary) / t(ARM) per rep, median over the 2 reps (= their
# mean).
expected_speedup() {
  db "SELECT avg(ratio) FROM (SELECT sa.value / st.value AS ratio FROM runs ra
        JOIN summaries sa ON sa.run_id = ra.id AND sa.key = 'bench.update_ms'
        JOIN runs rt ON rt.experiment_id = ra.experiment_id AND rt.arm = '$1'
         AND json_extract(rt.config_json, '\$.pair.rep') = json_extract(ra.config_json, '\$.pair.rep')
        JOIN summaries st ON st.run_id = rt.id AND st.key = 'bench.update_ms'
        WHERE ra.experiment_id = $EXP AND ra.arm = 'a_ordinary')"
}
same_number() {  # same_number WHAT EXPECTED GOT: equal to 1e-9 relative
  awk -v e="$2" -v g="$3" 'BEGIN { d = e - g; if (d < 0) d = -d; exit !(e > 0 && d <= 1e-9 * e) }' ||
    fail "$1: expected $2 (from the legs' summaries), got $3"
}
CONTROL=$(expected_speedup z_control)
for arm_name in "b_saf25:update speedup 25%" "c_saf50:update speedup 50%"; do
  arm=${arm_name%%:*} name=${arm_name#*:}
  C=$(jq -c --arg n "$name" '.comparisons[] | select(.name == $n)' <<<"$RES")
  [[ -n "$C" ]] || fail "no comparison '$name' in $RES"
  same_number "$name: speedup" "$(expected_speedup "$arm")" "$(jq -r .value <<<"$C")"
  same_number "$name: zero-replacement control" "$CONTROL" "$(jq -r .control.value <<<"$C")"
  expect_eq "$name: control tolerance (the grid's, 4%)" 0.04 "$(jq -r .control.tolerance <<<"$C")"
  expect_eq "$name: contended = |control - 1| > tolerance" \
    "$(awk -v c="$CONTROL" 'BEGIN { d = c - 1; if (d < 0) d = -d; print (d > 0.04) ? "true" : "false" }')" \
    "$(jq -r .contended <<<"$C")"
  expect_eq "$name: n" 2 "$(jq -r .n <<<"$C")"
  expect_eq "$name: estimator" median_paired "$(jq -r .estimator <<<"$C")"
  jq -e '.device | test("^cpu")' <<<"$C" >/dev/null || fail "$name: device is not cpu: $C"
  jq -e '(.value | type == "number") and .spread.kind == "range" and
         .spread.lo <= .value and .value <= .spread.hi' <<<"$C" >/dev/null ||
    fail "$name: value and spread inconsistent: $C"
  jq -e '.per_pair | length == 2 and all(.[]; .value == .baseline / .treatment)' <<<"$C" \
    >/dev/null || fail "$name: per-pair values are not t_ordinary / t_method: $C"
  jq -e '.control.arm == "z_control" and .control.n == 2 and (.contended | type == "boolean") and
         .contended == ((.control.value - 1 | fabs) > .control.tolerance + 1e-12)' <<<"$C" \
    >/dev/null || fail "$name: control / contention flag inconsistent: $C"
  expect_eq "$name: measured total FLOPs ratio" unmeasured "$(jq -r '.flops["flops.total_ratio"]' <<<"$C")"
  expect_eq "$name: measured attention FLOPs ratio" unmeasured \
    "$(jq -r '.flops["flops.attention_ratio"]' <<<"$C")"
  jq -e '.flops.reason | length > 0' <<<"$C" >/dev/null || fail "$name: unmeasured without a reason"
  ok "$name: $(jq -r '"\(.value) [\(.spread.lo), \(.spread.hi)] n=\(.n) \(.estimator) on \(.device), control \(.control.value) contended=\(.contended)"' <<<"$C")"
done

expect_eq "paired_stats rows with estimator, device and details" 2 "$(db "
  SELECT count(*) FROM paired_stats WHERE experiment_id = $EXP AND estimator = 'median_paired'
  AND device LIKE 'cpu%' AND value IS NOT NULL
  AND json_type(details_json, '$.contended') IN ('true', 'false')")"

say "headlab results $EXP"
OUT=$(hl results "$EXP") || fail "headlab results $EXP exited $?"
echo "$OUT"
grep -q "median_paired" <<<"$OUT" || fail "results text does not name the estimator"
grep -q "cpu" <<<"$OUT" || fail "results text does not name the device"
grep -qiE "contended|within" <<<"$OUT" || fail "results text does not show the control"
grep -q "unmeasured" <<<"$OUT" || fail "results text does not say FLOPs are unmeasured"
