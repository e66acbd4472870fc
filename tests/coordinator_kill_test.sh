#!/usr/bin/env bash
# System test (docs/DESIGN.md, "Wire protocol"): kill -9 the coordinator mid-grid and restart it on the same
# data dir and ports. The workers reconnect and the grid completes with exactly the
# expected rows: the same runs, one succeeded attempt and a summary per run.
source "$(dirname "$0")/lib.sh"

GRID=$HEADLAB_SOURCE_DIR/tests/data/six_runs.jsonc

start_cluster 2

# Longer runs than the plain 6-run test so that the kill lands mid-grid.
EXP=$(submit "$GRID" --set train.steps=150) || exit 1
ok "experiment $EXP submitted"
RUNS_BEFORE=$(db "SELECT count(*) FROM runs")
expect_eq "runs stored" 6 "$RUNS_BEFORE"

# Mid-grid: at least one run finished, at least one attempt running with metrics, and at
# least two runs not finished.
mid_grid() {
  [[ "$(db "SELECT (SELECT count(*) FROM runs WHERE status = 'succeeded') >= 1
        AND (SELECT count(*) FROM runs WHERE status != 'succeeded') >= 2
        AND EXISTS (SELECT 1 FROM attempts a WHERE a.status = 'running' AND EXISTS
                    (SELECT 1 FROM metrics m WHERE m.run_id = a.run_id AND m.attempt = a.attempt))")" == 1 ]]
}
wait_until 240 "mid-grid (some runs done, some running)" mid_grid
say "state at the kill: $(db "SELECT group_concat(status || '=' || n, ' ') FROM
  (SELECT status, count(*) n FROM runs GROUP BY status)")"
kill9_coordinator

# The workers keep running their attempts while the coordinator is down.
sleep 2
for w in w1 w2; do
  kill -0 "${HL_WORKER_PIDS[$w]}" 2>/dev/null || fail "worker $w died while the coordinator was down"
done
ok "both workers survived the coordinator's death"

start_coordinator
wait_workers 2
wait_grid "$EXP" 300

expect_eq "runs in the database after the restart" "$RUNS_BEFORE" "$(db "SELECT count(*) FROM runs")"
expect_eq "experiments in the database" 1 "$(db "SELECT count(*) FROM experiments")"
check_one_success_per_run "$EXP" 6
expect_eq "attempts neither succeeded nor lost" 0 \
  "$(db "SELECT count(*) FROM attempts WHERE status NOT IN ('succeeded', 'lost')")"
say "attempts lost and requeued across the restart: $(db "SELECT count(*) FROM attempts WHERE status = 'lost'")"
RUNS=$(runs_json "$EXP") || exit 1
expect_eq "runs --json statuses" succeeded "$(jq -r '[.[].status] | unique | join(",")' <<<"$RUNS")"
OUT=$(hl results "$EXP" --json) || fail "headlab results $EXP --json exited $?"
expect_eq "results: succeeded runs over both arms" 6 "$(jq '[.arms[].succeeded] | add' <<<"$OUT")"
