# Shared by the dashboard benchmarks (tests/dashboard/bench.sh, scripts/dashboard-bench.sh),
# sourced after tests/lib.sh. bench_setup WHAT: builds the dashboard and the browser
# driver, creates the schema (starts and stops a coordinator), loads the SQL on stdin and
# then bench_finish.sql into its database with the coordinator stopped, prints what was loaded, starts the
# coordinator again and sets EXP to the id the SQL printed last.
bench_setup() {
  local here=$HEADLAB_SOURCE_DIR/tests/dashboard t0
  "$HEADLAB_SOURCE_DIR/dashboards/build.sh" || fail "dashboards/build.sh failed"
  (cd "$here" && { [[ -d node_modules/playwright-core ]] || npm ci --no-audit --no-fund --loglevel=error; }) ||
    fail "npm ci in tests/dashboard failed"
  say "create the schema (start and stop the coordinator), then load $1"
  start_coordinator
  hl_stop_pid "$HL_COORD_PID"
  HL_COORD_PID=""
  t0=$(date +%s%N)
  EXP=$(cat - "$here/bench_finish.sql" | sqlite3 -batch "$HL_DB" | tail -1) ||
    fail "loading the benchmark data failed"
  [[ "$EXP" =~ ^[0-9]+$ ]] || fail "the benchmark SQL printed no experiment id: $EXP"
  say "loaded in $(( ($(date +%s%N) - t0) / 1000000 )) ms: experiment $EXP," \
    "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP") runs," \
    "$(db "SELECT count(*) FROM metrics") points, $(du -h "$HL_DB" | cut -f1) database"
  start_coordinator
}
