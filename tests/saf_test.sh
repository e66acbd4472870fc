#!/usr/bin/env bash
# System test (docs/REPRODUCTIONS.md, "SAF"): a tiny SAF rate sweep (2 rates + the pruning control +
# ordinary attention, 2 seeds) in the shared-parent form of experiments/saf/ through a real
# coordinator and 2 workers: two ordinary parents, then every arm continues from its seed's
# parent (parent.experiment) and SAF replaces at the continuation's first update. Checks
# that `headlab results --json` reports per arm saf.heads_fixed = round(r L H), fit KLs <=
# 0.2 nats, positive intervention costs (Table 13's split) and dPPL% comparisons with n = 2;
# that the saf_head_map artifacts hold the fit KLs; that their rows reached the head_maps
# table; and that per seed the 25% heads are among the 50% heads (nested rates, SAF App.
# C.1) and the pruning control removed exactly the 25% heads.
source "$(dirname "$0")/lib.sh"

PARENT=$HL_TMP/saf_tiny_parent.jsonc
# max_attempts 2: an attempt lost to a stall of the loaded machine (both daemons silent
# for the 3 s liveness window) is retried from its checkpoint; a real failure fails both.
cat >"$PARENT" <<'EOF2'
{
  "name": "saf-tiny-parent",
  "base": {
    "kind": "train",
    "model": {"layers": 2, "heads": 4, "width": 32, "context": 32},
    "train": {"steps": 8, "batch_size": 4, "warmup_steps": 1, "eval_every": 0,
              "eval_batches": 2, "log_every": 2, "checkpoint_every": 4, "device": "cpu",
              "threads": 1}
  },
  "axes": {"seed": [1, 2]},
  "max_attempts": 2
}
EOF2
GRID=$HL_TMP/saf_tiny.jsonc
cat >"$GRID" <<'EOF'
// 2 layers x 4 heads (L H = 8): r = 0.25 -> k = 2, r = 0.5 -> k = 4; SAF at step 4 of 8,
// the parents' checkpoint.
{
  "name": "saf-tiny",
  "base": {
    "kind": "train",
    "model": {"layers": 2, "heads": 4, "width": 32, "context": 32},
    "train": {"steps": 8, "batch_size": 4, "warmup_steps": 1, "eval_every": 0,
              "eval_batches": 2, "log_every": 2, "checkpoint_every": 0, "device": "cpu",
              "threads": 1},
    "parent": {"step": 4},
    "saf.calib_sequences": 4, "saf.calib_batch": 2, "saf.fit_steps": 150, "saf.tau": 0.5
  },
  "axes": {"seed": [1, 2]},
  "arms": {
    "ordinary": {},
    "saf_r25": {"saf.method": "replace", "saf.rate": 0.25},
    "saf_r50": {"saf.method": "replace", "saf.rate": 0.5},
    "prune_r25": {"saf.method": "prune", "saf.rate": 0.25}
  },
  "comparisons": [
    {"name": "saf_r25 vs ordinary", "baseline": "ordinary", "treatment": "saf_r25",
     "metric": "eval.ppl", "stat": "delta_pct"},
    {"name": "saf_r50 vs ordinary", "baseline": "ordinary", "treatment": "saf_r50",
     "metric": "eval.ppl", "stat": "delta_pct"},
    {"name": "prune_r25 vs saf_r25", "baseline": "saf_r25", "treatment": "prune_r25",
     "metric": "eval.ppl", "stat": "delta_pct"}
  ],
  "max_attempts": 2
}
EOF

start_cluster 2
PEXP=$(submit "$PARENT") || exit 1
EXP=$(submit "$GRID" --set "parent.experiment=$PEXP") || exit 1
ok "experiments $PEXP (parents) and $EXP submitted"
wait_grid "$PEXP" 120
wait_grid "$EXP" 150
check_one_success_per_run "$EXP" 8

RES=$(hl results "$EXP" --json) || fail "headlab results $EXP --json exited $?"
arm_metric() {  # arm_metric ARM KEY FIELD
  jq -r --arg a "$1" --arg k "$2" --arg f "$3" \
    '.arms[] | select(.arm == $a) | .metrics[$k][$f] // "absent"' <<<"$RES"
}
expect_eq "saf_r25: saf.heads_fixed = round(0.25 * 8)" 2 "$(arm_metric saf_r25 saf.heads_fixed mean)"
expect_eq "saf_r50: saf.heads_fixed = round(0.5 * 8)" 4 "$(arm_metric saf_r50 saf.heads_fixed mean)"
expect_eq "saf_r25: seeds aggregated" 2 "$(arm_metric saf_r25 saf.heads_fixed n)"
expect_eq "prune_r25: saf.heads_pruned" 2 "$(arm_metric prune_r25 saf.heads_pruned mean)"
expect_eq "prune_r25: saf.heads_fixed" 0 "$(arm_metric prune_r25 saf.heads_fixed mean)"
expect_eq "ordinary: no SAF metrics" absent "$(arm_metric ordinary saf.heads_fixed mean)"
for arm in saf_r25 saf_r50; do
  jq -e --arg a "$arm" '.arms[] | select(.arm == $a) | .metrics["saf.fit_kl_max"].mean <= 0.2' \
    <<<"$RES" >/dev/null || fail "$arm: saf.fit_kl_max above 0.2: $(arm_metric $arm saf.fit_kl_max mean)"
  for k in calibration_s ranking_s fitting_s installation_s total_s; do
    jq -e --arg a "$arm" --arg k "saf.cost.$k" '.arms[] | select(.arm == $a) | .metrics[$k].mean > 0' \
      <<<"$RES" >/dev/null || fail "$arm: saf.cost.$k is not > 0: $(arm_metric $arm saf.cost.$k mean)"
  done
  ok "$arm: fit KL <= 0.2 and every cost field > 0"
done
for c in "saf_r25 vs ordinary" "saf_r50 vs ordinary" "prune_r25 vs saf_r25"; do
  expect_eq "comparison '$c' pairs" 2 "$(jq -r --arg c "$c" '.comparisons[] | select(.name == $c) | .n' <<<"$RES")"
  jq -e --arg c "$c" '.comparisons[] | select(.name == $c) | (.mean | type == "number") and (.se | type == "number")' \
    <<<"$RES" >/dev/null || fail "comparison '$c' has no numeric mean and se: $RES"
done
ok "dPPL% comparisons carry mean and SE over 2 seeds"

OUT=$(hl results "$EXP") || fail "headlab results $EXP exited $?"
echo "$OUT"
grep -q "saf.heads_fixed" <<<"$OUT" || fail "the results table does not show saf.heads_fixed"
grep -q "saf_r50 vs ordinary" <<<"$OUT" || fail "the results table does not show the comparison"

say "saf_head_map artifacts and the head_maps table"
ARMS_K="saf_r25:fixed:2 saf_r50:fixed:4 prune_r25:pruned:2"
for spec in $ARMS_K; do
  IFS=: read -r arm role k <<<"$spec"
  expect_eq "$arm: runs with one saf_head_map artifact" 2 "$(db "
    SELECT count(*) FROM runs r WHERE r.experiment_id = $EXP AND r.arm = '$arm' AND
      (SELECT count(*) FROM artifacts a WHERE a.run_id = r.id AND a.kind = 'saf_head_map') = 1")"
  expect_eq "$arm: head_maps rows per run (every head)" "8,8" "$(db "
    SELECT group_concat(n) FROM (SELECT count(h.head) AS n FROM runs r
      LEFT JOIN head_maps h ON h.run_id = r.id WHERE r.experiment_id = $EXP AND r.arm = '$arm'
      GROUP BY r.id)")"
  expect_eq "$arm: $role heads per run in head_maps" "$k,$k" "$(db "
    SELECT group_concat(n) FROM (SELECT count(h.head) AS n FROM runs r
      LEFT JOIN head_maps h ON h.run_id = r.id AND h.role = '$role'
      WHERE r.experiment_id = $EXP AND r.arm = '$arm' GROUP BY r.id)")"
done
# The artifact files (on this host the coordinator and workers share a disk) keep each
# installed head's fit KL and the cost split.
for path in $(db "SELECT a.path FROM artifacts a JOIN runs r ON r.id = a.run_id
                  WHERE r.experiment_id = $EXP AND r.arm LIKE 'saf_%' AND a.kind = 'saf_head_map'"); do
  jq -e '[.head_map[] | select(.role == "fixed") | .fit_kl] | length > 0 and all(. != null and . <= 0.2)' \
    "$path" >/dev/null || fail "$path: fixed heads without a fit KL <= 0.2"
  jq -e '.cost_s.total > 0 and .step == 4' "$path" >/dev/null || fail "$path: no cost or wrong step"
done
ok "saf_head_map files: fixed heads' fit KLs <= 0.2, costs > 0, event at step 4"

say "nested head sets across rates, and the pruning control's heads, per seed"
heads_of() {  # heads_of ARM ROLE SEED -> "L.H ..." sorted
  db "SELECT group_concat(h, ' ') FROM (SELECT h.layer || '.' || h.head AS h FROM head_maps h
        JOIN runs r ON r.id = h.run_id WHERE r.experiment_id = $EXP AND r.arm = '$1'
        AND h.role = '$2' AND r.seed = $3 ORDER BY h.layer, h.head)"
}
for seed in 1 2; do
  R25=$(heads_of saf_r25 fixed $seed) R50=$(heads_of saf_r50 fixed $seed)
  for h in $R25; do
    grep -qw -- "$h" <<<"$R50" || fail "seed $seed: 25% head $h is not among the 50% heads ($R50)"
  done
  expect_eq "seed $seed: the pruning control's heads are the 25% heads" "$R25" "$(heads_of prune_r25 pruned $seed)"
  ok "seed $seed: 25% heads {$R25} within 50% heads {$R50}"
done
expect_eq "continuations whose provenance names their seed's parent" 8 "$(db "
  SELECT count(*) FROM runs c JOIN provenance pv ON pv.run_id = c.id
  JOIN runs p ON p.id = pv.parent_run AND p.experiment_id = $PEXP AND p.seed = c.seed
  WHERE c.experiment_id = $EXP")"
