#!/usr/bin/env bash
# System test: the five AAH-v3 regimes (AAH §7.1) on a tiny model through a real
# coordinator and 2 workers, control updates every 2 steps. Checks the results JSON: Full
# attention has ACR 1; the adaptive regimes have ACR <= 1 equal to mean(W)/T of their
# head_maps windows; training and inference ACR, exact coverage, levels used, the execution
# backend label and the window-bucket distribution (summing to 1) are reported per regime.
source "$(dirname "$0")/lib.sh"

T=32
GRID=$HL_TMP/aah_regimes.jsonc
# max_attempts 2: an attempt lost to a stall of the loaded machine (both daemons silent
# for the 3 s liveness window) is retried from its checkpoint; a real failure fails both.
cat >"$GRID" <<EOF
// Five AAH-v3 regimes, 2 layers x 4 heads, context $T (windows 4, 8, 16, 32), 8 steps.
{
  "name": "aah-regimes-systest",
  "base": {
    "kind": "train", "seed": 0,
    "model": {"layers": 2, "heads": 4, "width": 32, "context": $T},
    "train": {"steps": 8, "batch_size": 4, "warmup_steps": 2, "eval_every": 4,
              "eval_batches": 2, "log_every": 2, "checkpoint_every": 4,
              "device": "cpu", "threads": 1},
    "aah.control_every": 2,
    "aah.observe_rows": 2
  },
  "arms": {
    "full": {"aah.regime": "full"},
    "grouping_off": {"aah.regime": "grouping_off"},
    "full_adaptive": {"aah.regime": "full_adaptive", "aah.hierarchy": "2,2,2,2"},
    "shallow_freeze": {"aah.regime": "shallow_freeze", "aah.hierarchy": "2"},
    "deep_reuse": {"aah.regime": "deep_reuse", "aah.hierarchy": "2,2,2,2"}
  },
  "comparisons": [
    {"name": "shallow freeze vs full", "baseline": "full", "treatment": "shallow_freeze",
     "metric": "eval.loss", "stat": "diff"}
  ],
  "max_attempts": 2
}
EOF

start_cluster 2

say "submit the five regimes"
EXP=$(submit "$GRID") || exit 1
wait_grid "$EXP" 80
check_one_success_per_run "$EXP" 5

RES=$(hl results "$EXP" --json) || fail "headlab results $EXP --json exited $?"
# metric ARM KEY: the arm's mean of summary KEY ("null" when absent).
metric() { jq -r --arg a "$1" --arg k "$2" '.arms[] | select(.arm == $a) | .metrics[$k].mean' <<<"$RES"; }

expect_eq "full: training ACR (aah.acr_train)" 1 "$(metric full aah.acr_train)"
expect_eq "full: inference ACR (aah.acr_inference)" 1 "$(metric full aah.acr_inference)"
expect_eq "full: exact coverage" 1 "$(metric full aah.exact_coverage)"

# Per arm, in one jq pass: the summary keys that are missing, the number of window buckets
# and their sum, and the backend label.
KEYS='["eval.loss", "train.tokens_per_s", "mem.peak_bytes", "aah.acr_train", "aah.acr_inference",
       "aah.exact_coverage", "aah.levels_used", "aah.control_updates", "aah.backend.dense_masked"]'
CHECKS=$(jq -r --argjson keys "$KEYS" '.arms[] | .metrics as $m
  | [.arm, ([$keys[] | select(($m[.].mean | type) != "number")] | join(",") | if . == "" then "-" else . end),
     ([$m | keys[] | select(startswith("aah.bucket."))] | length),
     ([$m | to_entries[] | select(.key | startswith("aah.bucket.")) | .value.mean] | add),
     $m["aah.backend.dense_masked"].mean] | map(tostring) | join(" ")' <<<"$RES")
PROV=$(db "SELECT r.arm || ' ' || json_extract(p.fields_json, '\$.aah_backend') || ':' ||
                  json_extract(p.fields_json, '\$.aah_regime')
           FROM provenance p JOIN runs r ON r.id = p.run_id WHERE r.experiment_id = $EXP")
for arm in full grouping_off full_adaptive shallow_freeze deep_reuse; do
  read -r _ missing nb sum backend < <(grep "^$arm " <<<"$CHECKS")
  expect_eq "$arm: missing summary values" "-" "$missing"
  expect_eq "$arm: backend label aah.backend.dense_masked" 1 "$backend"
  expect_eq "$arm: window buckets" 4 "$nb"
  awk -v s="$sum" 'BEGIN { exit !(s > 0.999999 && s < 1.000001) }' ||
    fail "$arm: bucket fractions sum to $sum, not 1"
  ok "$arm: bucket fractions sum to 1"
  expect_eq "$arm: provenance backend and regime" "$arm dense_masked:$arm" "$(grep "^$arm " <<<"$PROV")"
done

for arm in grouping_off full_adaptive shallow_freeze deep_reuse; do
  acr=$(metric "$arm" aah.acr_inference)
  train_acr=$(metric "$arm" aah.acr_train)
  maps=$(db "SELECT count(*) || ' ' || avg(h.window) FROM head_maps h JOIN runs r ON r.id = h.run_id
             WHERE r.experiment_id = $EXP AND r.arm = '$arm'")
  read -r rows mean_w <<<"$maps"
  expect_eq "$arm: head_maps rows (layers x heads)" 8 "$rows"
  awk -v a="$acr" -v t="$train_acr" -v w="$mean_w" -v T=$T 'BEGIN {
        d = a - w / T; if (d < 0) d = -d; e = a - t; if (e < 0) e = -e
        exit !(a <= 1 && d < 1e-9 && e < 1e-9) }' ||
    fail "$arm: ACR $acr (training $train_acr) is not <= 1 and equal to mean(W)/T = $mean_w/$T"
  ok "$arm: ACR $acr <= 1 = mean(W)/T of its head_maps ($mean_w/$T) = training ACR"
done

# Training rows carry the ACR too (AAH §5.10 attn_ratio on every logged row).
expect_eq "training rows with aah.acr_train (5 runs x 4 logged steps)" 20 "$(db "
  SELECT count(*) FROM metrics m JOIN runs r ON r.id = m.run_id
  WHERE r.experiment_id = $EXP AND m.key = 'aah.acr_train'")"

OUT=$(hl results "$EXP") || fail "headlab results $EXP exited $?"
echo "$OUT"
grep -q "^AAH-v3" <<<"$OUT" || fail "results show no AAH-v3 table"
grep -q "aah.acr_inference" <<<"$OUT" || fail "results show no aah.acr_inference column"
ok "headlab results shows the AAH-v3 table"
