#!/usr/bin/env bash
# System test: `headlab bench coordinator` at a small scale runs all its phases against a
# real coordinator and its database checks hold. The figures' targets are not asserted
# here (CI machines are shared); docs/BENCHMARKS.md records the full-scale figures.
source "$(dirname "$0")/lib.sh"

say "headlab bench coordinator --runs 300 --workers 8 --batches 4 --results-runs 100 --json"
OUT=$(TMPDIR=$HL_TMP timeout 300 "$HEADLAB_BIN" bench coordinator --runs 300 --workers 8 \
        --batches 4 --results-runs 100 --json 2>"$HL_LOGS/bench.log")
RC=$?
(( RC == 0 || RC == 1 )) || fail "bench exited $RC: $(tail -n 5 "$HL_LOGS/bench.log")"
jq -e . <<<"$OUT" >/dev/null || fail "bench --json printed no JSON: $OUT"
jq -r '.figures[] | "\(.name): \(.value) \(.unit) (target \(.cmp) \(.target))"' <<<"$OUT"
expect_eq "figures reported" 8 "$(jq '.figures | length' <<<"$OUT")"
expect_eq "figures left unmeasured" "" "$(jq -r '[.figures[] | select(.value == null) | .name] | join(", ")' <<<"$OUT")"
expect_eq "database checks that failed" "" "$(jq -r '[.notes[] | select(test("FAILED"))] | join("; ")' <<<"$OUT")"
expect_eq "database checks that passed" 7 "$(jq '[.notes[] | select(startswith("check ok"))] | length' <<<"$OUT")"
jq -e '.notes | any(. == "coordinator exited 0 on SIGTERM")' <<<"$OUT" >/dev/null ||
  fail "the coordinator did not exit 0 on SIGTERM: $(jq -c .notes <<<"$OUT")"
ok "coordinator exited 0 on SIGTERM"
REQUEUE=$(jq '.figures[] | select(.name == "dead-worker requeue latency") | .value' <<<"$OUT")
# Liveness is 3 s; the figure cannot be below it (a smaller value would mean a wrong clock).
jq -e --argjson v "$REQUEUE" -n '$v >= 2.9' >/dev/null || fail "requeue latency $REQUEUE s is below the 3 s liveness window"
ok "requeue latency $REQUEUE s is not below the liveness window"
# Heartbeats every second; lateness past the 3 s liveness window would have cost leases.
LATE=$(jq '.figures[] | select(.name | startswith("heartbeat lateness")) | .value' <<<"$OUT")
jq -e --argjson v "$LATE" -n '$v >= 0 and $v < 2' >/dev/null || fail "heartbeat lateness $LATE s"
ok "coordinator heartbeats at most $LATE s late"
# Heartbeats keep their deadlines while results are computed, and once the
# experiment has finished its results are answered from the store.
LATE=$(jq '.figures[] | select(.name | startswith("results computing: heartbeat lateness")) | .value' <<<"$OUT")
jq -e --argjson v "$LATE" -n '$v >= 0 and $v < 2' >/dev/null || fail "heartbeat lateness while results compute: $LATE s"
ok "coordinator heartbeats at most $LATE s late (p99) while results compute"
STORED=$(jq -r '.notes[] | select(startswith("results: GET back to back"))' <<<"$OUT")
grep -qE '; [1-9][0-9]* answered from the store' <<<"$STORED" ||
  fail "no results answer came from the store: $STORED"
ok "$STORED"
$HEADLAB_BIN bench coordinator --runs 0 >/dev/null 2>&1
expect_eq "exit code for --runs 0" 2 "$?"
