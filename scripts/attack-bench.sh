#!/usr/bin/env bash
# Health and coordinator RSS under each flood of docs/BENCHMARKS.md, "Service under
# attack": one coordinator on loopback holding 1,024 descriptors, an experiment of 10,000
# finished runs and a 300,000-point series; each flood runs SECONDS (default 20) while
# GET /api/v1/health is timed every 50 ms (a fresh curl connection each) and the
# coordinator's RSS is sampled every 0.1 s. Prints one markdown row per flood.
#
# usage: scripts/attack-bench.sh [SECONDS [FLOOD...]]
#   FLOOD: idle series recompute sql browser trickle grids (default: all).
#   HEADLAB_BIN: the headlab binary (default build/headlab); FLOOD_NICE=N runs the flood's
#   clients at nice N (tests/flood_lib.sh). Loopback only.
source "$(dirname "$0")/../tests/lib.sh"
source "$(dirname "$0")/../tests/flood_lib.sh"

SECS=${1:-20}
WANT=" ${*:2} "
# want NAME: true iff flood NAME was asked for (all when none was named).
want() { [[ "$WANT" == "  " || "$WANT" == *" $1 "* ]]; }
# Finding 4's setting: the coordinator may hold 1,024 descriptors (512 HTTP connections).
ulimit -n 1024
start_coordinator
TOKEN=$(cat "$HL_DATA/token")

say "setting up: 10,000 finished runs with summaries, a 300,000-point series"
EXP=$(submit "$HEADLAB_SOURCE_DIR/experiments/demo.jsonc" --set "seed=$(seq -s, 1 5000)")
RUN=$(db "SELECT min(id) FROM runs WHERE experiment_id = $EXP")
sqlite3 -batch -cmd '.timeout 10000' "$HL_DB" "WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL
  SELECT x + 1 FROM c WHERE x < 299999) INSERT INTO metrics (run_id, attempt, seq, step, key,
  value, time_s) SELECT $RUN, 1, x, x, 'train.loss', 1.0 / (x + 1), x * 0.01 FROM c;
  UPDATE runs SET status = 'succeeded' WHERE experiment_id = $EXP;
  INSERT INTO summaries (run_id, key, value, attempt) SELECT id, 'eval.ppl',
  10 + (id % 7) * 0.1, 1 FROM runs WHERE experiment_id = $EXP" || fail "cannot write the data"
M=$HL_URL/api/v1/runs/$RUN/metrics
R=$HL_URL/api/v1/experiments/$EXP/results?recompute=1
Q=$HL_URL/api/v1/query
glob_row_json "$HL_TMP/globs.json"
echo '{"sql": "SELECT count(*) FROM metrics"}' >"$HL_TMP/select.json"
# The largest no-op grid the bound accepts, as a dry run.
jq -n '{name: "dry", base: {kind: "noop"}, axes: {seed: [range(1; 20001)]}} |
  {text: tojson, dry_run: true}' >"$HL_TMP/dry.json"
# What a web page would send: a rebound Host, a foreign Origin, a text/plain query.
browser() {
  get -H 'Host: rebind.evil.example' "$HL_URL/api/v1/experiments"
  get -H 'Origin: http://evil.example' "$HL_URL/api/v1/experiments"
  curl -s -o /dev/null -X POST -H 'Content-Type: text/plain' --data-binary @"$HL_TMP/globs.json" "$Q"
}

# row WHAT: reads flood's line from stdin and prints the table row.
row() {
  local p50 p90 p99 rss load met
  read -r p50 p90 p99 rss load
  met=$(( p99 < 50 ? 1 : 0 ))
  printf '| %s | %s / %s / %s ms | %s MB | load %s | %s |\n' "$1" "$p50" "$p90" "$p99" "$rss" \
    "$load" "$( ((met)) && echo met || echo '**missed**')"
}

say "floods of $SECS s each"
echo "| flood | health p50 / p90 / p99 | coordinator RSS (max) | machine | p99 < 50 ms |"
echo "| --- | --- | --- | --- | --- |"
want idle && flood "$SECS" 0 true | row "none (idle)"
want series && flood "$SECS" 12 get "$M" |
  row "12 clients reading a 300,000-point series (100,000-point pages)"
want recompute && flood "$SECS" 16 get "$R" |
  row "16 clients recomputing a 10,000-run experiment's results"
want sql && flood "$SECS" 8 post_json "$Q" "$HL_TMP/globs.json" |
  row "8 clients looping a row of 100 GLOB calls (each query killed at 6 s)"
want browser && flood "$SECS" 16 browser |
  row "16 clients looping rebound-Host and foreign-Origin reads and text/plain queries"
if want trickle; then
  trickle 600 $((SECS + 5)) "$HL_HTTP_PORT" 2>/dev/null &
  TRICKLE=$!
  HL_EXTRA_PIDS+=($TRICKLE)
  sleep 2
  flood "$SECS" 0 true | row "600 request bodies trickled at 1 byte/s ($(cat "$HL_TMP/trickle.opened") open)"
  kill "$TRICKLE" 2>/dev/null
fi
want grids && flood "$SECS" 4 post_json "$HL_URL/api/v1/experiments" "$HL_TMP/dry.json" \
  -H "Authorization: Bearer $TOKEN" | row "4 clients looping a dry run of a 20,000-run grid (near the size bound)"
true
