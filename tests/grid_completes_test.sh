#!/usr/bin/env bash
# System test: a 6-run grid completes on 2 real workers with exactly one
# result per run; `headlab wait`, `runs --json`, `results` and `status` work on it.
source "$(dirname "$0")/lib.sh"

GRID=$HEADLAB_SOURCE_DIR/tests/data/six_runs.jsonc

start_cluster 2

say "submit $GRID"
EXP=$(submit "$GRID") || exit 1
ok "experiment $EXP submitted"
expect_eq "runs stored for the grid" 6 "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP")"

say "headlab wait $EXP"
timeout 300 "$HEADLAB_BIN" wait "$EXP" --url "$HL_URL" --data-dir "$HL_DATA" >"$HL_TMP/wait.out" 2>&1
rc=$?
(( rc == 124 )) && fail "headlab wait $EXP did not return within 300s"
wait_grid "$EXP" 30
expect_eq "headlab wait exit code (grid succeeded)" 0 "$rc"

RUNS=$(runs_json "$EXP") || exit 1
expect_eq "runs --json entries" 6 "$(jq length <<<"$RUNS")"
expect_eq "runs --json statuses" "succeeded" "$(jq -r '[.[].status] | unique | join(",")' <<<"$RUNS")"
expect_eq "runs --json attempts" "1" "$(jq -r '[.[].attempts] | unique | map(tostring) | join(",")' <<<"$RUNS")"
expect_eq "distinct run ids" 6 "$(jq '[.[].id] | unique | length' <<<"$RUNS")"

check_one_success_per_run "$EXP" 6
expect_eq "runs with an eval.ppl summary" 6 "$(db "
  SELECT count(*) FROM summaries s JOIN runs r ON r.id = s.run_id
  WHERE r.experiment_id = $EXP AND s.key = 'eval.ppl' AND s.value > 1")"
expect_eq "both workers ran something" 2 "$(db "
  SELECT count(DISTINCT a.worker_id) FROM attempts a JOIN runs r ON r.id = a.run_id
  WHERE r.experiment_id = $EXP")"
expect_eq "attempts with provenance (git commit, binary and dataset hashes)" 6 "$(db "
  SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id
  JOIN provenance p ON p.run_id = a.run_id AND p.attempt = a.attempt
  WHERE r.experiment_id = $EXP AND a.status = 'succeeded' AND p.git_commit != ''
    AND length(p.binary_sha256) = 64 AND length(p.dataset_sha256) = 64")"

say "headlab results $EXP"
OUT=$(hl results "$EXP") || fail "headlab results $EXP exited $?"
echo "$OUT"
grep -q "ordinary" <<<"$OUT" || fail "results do not show the arm 'ordinary'"
grep -q "wide" <<<"$OUT" || fail "results do not show the arm 'wide'"
grep -q "wide vs ordinary" <<<"$OUT" || fail "results do not show the comparison 'wide vs ordinary'"
ok "results table shows both arms and the comparison"

RES=$(hl results "$EXP" --json) || fail "headlab results $EXP --json exited $?"
expect_eq "results --json arms" "ordinary:3,wide:3" \
  "$(jq -r '[.arms[] | "\(.arm):\(.succeeded)"] | sort | join(",")' <<<"$RES")"
expect_eq "results --json comparison pairs" 3 \
  "$(jq -r '.comparisons[] | select(.name == "wide vs ordinary") | .n' <<<"$RES")"
jq -e '.comparisons[0].mean | type == "number"' <<<"$RES" >/dev/null ||
  fail "comparison has no numeric mean: $RES"
ok "comparison mean is a number"

STATUS=$(hl status --json) || fail "headlab status --json exited $?"
expect_eq "status: succeeded runs" 6 "$(jq '.runs_by_status.succeeded' <<<"$STATUS")"

say "resubmitting the same grid reuses the finished runs (no new attempts)"
EXP2=$(submit "$GRID") || exit 1
wait_grid "$EXP2" 30
expect_eq "runs of the resubmitted experiment $EXP2 succeeded" 6 "$(db "
  SELECT count(*) FROM runs WHERE experiment_id = $EXP2 AND status = 'succeeded'")"
expect_eq "attempts in the database after the resubmit" 6 "$(db "SELECT count(*) FROM attempts")"
