#!/usr/bin/env bash
# Dashboard speed benchmark (docs/BENCHMARKS.md, "Service"): a real coordinator
# over a database holding one experiment of 10,000 runs and 1,000,000 metric points
# (bench_populate.sql), and headless Chromium timing the experiment page until its runs
# table and first chart are drawn (bench.mjs). Not part of `make test` (it takes a minute).
# Usage: HEADLAB_BIN=build/headlab tests/dashboard/bench.sh [REPEATS]
source "$(dirname "$0")/../lib.sh"
HERE=$HEADLAB_SOURCE_DIR/tests/dashboard

"$HEADLAB_SOURCE_DIR/dashboards/build.sh" || fail "dashboards/build.sh failed"
(cd "$HERE" && { [[ -d node_modules/playwright-core ]] || npm ci --no-audit --no-fund --loglevel=error; }) ||
  fail "npm ci in tests/dashboard failed"

say "create the schema (start and stop the coordinator), then load 10^4 runs and 10^6 points"
start_coordinator
hl_stop_pid "$HL_COORD_PID"
HL_COORD_PID=""
t0=$(date +%s%N)
EXP=$(sqlite3 -batch "$HL_DB" <"$HERE/bench_populate.sql" | tail -1) || fail "loading the benchmark data failed"
say "loaded in $(( ($(date +%s%N) - t0) / 1000000 )) ms: experiment $EXP," \
  "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP") runs," \
  "$(db "SELECT count(*) FROM metrics") points, $(du -h "$HL_DB" | cut -f1) database"
start_coordinator

for u in "experiments/$EXP" "experiments/$EXP/runs" "runs/$(db "SELECT min(id) FROM runs WHERE experiment_id = $EXP")/metrics?key=train.loss"; do
  curl -s -o /dev/null -w "GET /api/v1/$u: %{time_total} s, %{size_download} bytes\n" "$HL_URL/api/v1/$u"
done
node "$HERE/bench.mjs" "$HL_URL" "$EXP" "${1:-5}" || fail "bench.mjs failed"
