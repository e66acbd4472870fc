#!/usr/bin/env bash
# System test (docs/DESIGN.md, "Wire protocol"): kill -9 a worker mid-run. Its attempt becomes `lost`, the run
# is requeued as attempt 2 (resuming from the last checkpoint) and completes on the other
# worker: exactly one succeeded attempt per run and no duplicated metric points.
source "$(dirname "$0")/lib.sh"

GRID=$HEADLAB_SOURCE_DIR/tests/data/two_long_runs.jsonc

start_cluster 2

EXP=$(submit "$GRID") || exit 1
ok "experiment $EXP submitted (2 runs)"

# A run is "mid-run" once its first attempt is running and has written a checkpoint.
mid_run() {
  local r
  r=$(db "SELECT a.run_id FROM attempts a JOIN runs r ON r.id = a.run_id
          WHERE r.experiment_id = $EXP AND a.attempt = 1 AND a.status = 'running'
            AND EXISTS (SELECT 1 FROM artifacts f WHERE f.run_id = a.run_id
                        AND f.attempt = 1 AND f.kind = 'checkpoint')
          ORDER BY a.run_id LIMIT 1")
  [[ -n "$r" ]] && echo "$r"
}
wait_until 120 "a running attempt with a checkpoint" mid_run
RUN=$(mid_run)
WID=$(db "SELECT worker_id FROM attempts WHERE run_id = $RUN AND attempt = 1")
VICTIM=$(db "SELECT name FROM workers WHERE id = '$WID'")
[[ -n "${HL_WORKER_PIDS[$VICTIM]:-}" ]] || fail "attempt 1 of run $RUN is on worker '$WID' (name '$VICTIM'), not one of ours"
SURVIVOR=w1; [[ "$VICTIM" == w1 ]] && SURVIVOR=w2
STEP_AT_KILL=$(db "SELECT coalesce(max(step), -1) FROM metrics WHERE run_id = $RUN AND attempt = 1")
say "run $RUN attempt 1 is on $VICTIM at step $STEP_AT_KILL; killing $VICTIM"
KILLED_AT=$(date +%s)
ORPHANS_BEFORE=${#HL_EXTRA_PIDS[@]}
kill9_worker "$VICTIM"
ORPHANS=("${HL_EXTRA_PIDS[@]:$ORPHANS_BEFORE}")
[[ "$(db "SELECT status FROM runs WHERE id = $RUN")" != succeeded ]] ||
  fail "run $RUN finished before the kill: make tests/data/two_long_runs.jsonc longer"

has_attempt2() { [[ -n "$(db "SELECT 1 FROM attempts WHERE run_id = $RUN AND attempt = 2")" ]]; }
wait_until 30 "run $RUN requeued as attempt 2" has_attempt2
ok "run $RUN requeued as attempt 2"
expect_eq "status of the killed worker's attempt" lost \
  "$(db "SELECT status FROM attempts WHERE run_id = $RUN AND attempt = 1")"
# Liveness is 3 heartbeats of 1 s: the attempt must be declared lost within seconds.
LOST_AT=$(db "SELECT CAST(strftime('%s', finished_at) AS INTEGER) FROM attempts
              WHERE run_id = $RUN AND attempt = 1")
[[ -n "$LOST_AT" ]] || fail "attempt 1 of run $RUN has no finished_at"
(( LOST_AT - KILLED_AT <= 10 )) || fail "attempt 1 was marked lost $((LOST_AT - KILLED_AT))s after the kill (> 10 s)"
ok "attempt 1 marked lost $((LOST_AT - KILLED_AT))s after the kill"
WID2=$(db "SELECT worker_id FROM attempts WHERE run_id = $RUN AND attempt = 2")
expect_eq "worker of attempt 2" "$SURVIVOR" "$(db "SELECT name FROM workers WHERE id = '$WID2'")"

# Informational: the killed worker's `headlab exec` child loses its stdout pipe; say
# whether it ended by itself (cleanup kills it either way).
for pid in "${ORPHANS[@]}"; do
  if kill -0 "$pid" 2>/dev/null; then say "note: the killed worker's child pid $pid is still running"
  else say "note: the killed worker's child pid $pid has exited"; fi
done
wait_grid "$EXP" 300
check_one_success_per_run "$EXP" 2
expect_eq "attempts of run $RUN" 2 "$(db "SELECT count(*) FROM attempts WHERE run_id = $RUN")"
expect_eq "succeeded attempt of run $RUN" 2 \
  "$(db "SELECT attempt FROM attempts WHERE run_id = $RUN AND status = 'succeeded'")"
RUNS=$(runs_json "$EXP") || exit 1
expect_eq "runs --json attempts of run $RUN" 2 "$(jq ".[] | select(.id == $RUN) | .attempts" <<<"$RUNS")"

# Attempt 2 resumes from a checkpoint attempt 1 wrote (same SHA-256 as its artifact row).
RESUME=$(db "SELECT resume_json FROM attempts WHERE run_id = $RUN AND attempt = 2")
jq -e 'type == "object" and (.sha256 | type == "string") and (.step | type == "number")' \
  <<<"$RESUME" >/dev/null || fail "attempt 2 did not resume from a checkpoint: resume_json=$RESUME"
RSHA=$(jq -r .sha256 <<<"$RESUME")
RSTEP=$(jq -r .step <<<"$RESUME")
expect_eq "resume checkpoint is an artifact of attempt 1 at its step" 1 "$(db "
  SELECT count(*) FROM artifacts WHERE run_id = $RUN AND attempt = 1 AND kind = 'checkpoint'
    AND sha256 = '$RSHA' AND step = $RSTEP")"
expect_eq "resume step is attempt 1's last checkpoint" "$(db "
  SELECT max(step) FROM artifacts WHERE run_id = $RUN AND attempt = 1 AND kind = 'checkpoint'")" "$RSTEP"
expect_eq "attempt 2 train.loss points before the resume step $RSTEP (retrained steps)" 0 "$(db "
  SELECT count(*) FROM metrics WHERE run_id = $RUN AND attempt = 2 AND key = 'train.loss'
    AND step < $RSTEP")"
OTHER=$(db "SELECT id FROM runs WHERE experiment_id = $EXP AND id != $RUN")
expect_eq "last train.loss step of attempt 2 (as in the uninterrupted run $OTHER)" \
  "$(db "SELECT max(step) FROM metrics WHERE run_id = $OTHER AND key = 'train.loss'")" \
  "$(db "SELECT max(step) FROM metrics WHERE run_id = $RUN AND attempt = 2 AND key = 'train.loss'")"

STATE=$(curl -sf "$HL_URL/api/v1/workers" | jq -r --arg id "$WID" '.[] | select(.id == $id) | .state')
expect_eq "state of the killed worker" dead "$STATE"
