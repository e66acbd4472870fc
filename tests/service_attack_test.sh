#!/usr/bin/env bash
# System test (docs/BENCHMARKS.md, "Service under attack"): what a hostile client or web
# page can make the coordinator do stays bounded, on loopback.
# - Series reads are paged: limit=-1 and pages over the cap are 400; a 300,000-point run
#   reads in full through the `next` cursor; 12 clients reading it over and over, and 16
#   recomputing one 10,000-run experiment's results, leave /health answering at once
#   and the coordinator's RSS under its ceiling.
# - SQL stops: no string over the value cap (an instr() over 4 MB strings used to run for
#   minutes inside one call), no LIKE pattern over its cap, and the costliest instr() the
#   cap allows stops near the time limit. A row of 100 GLOB calls, each about a second
#   inside one VM step where SQLite never checks the time, is killed at the limit (it ran
#   for minutes and held a query thread); `select 1` is answered meanwhile, and a query
#   whose client leaves is stopped (no process is left running it).
# - Browsers: a rebound Host, a foreign Origin and a text/plain POST are refused; the
#   coordinator's own origin, localhost and --allow-host names are served.
# - Bodies trickled a byte at a time cannot keep new clients out.
# - A grid that would expand to too many bytes is refused at once (exit 2).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/flood_lib.sh"

# Limits this test checks (coordinator/http_policy.h, coordinator/query.h).
PAGE=100000
RSS_CEILING_MB=768
start_coordinator

# status [CURL ARGS...]: prints the HTTP status of a request, its body in $HL_TMP/out.
status() { curl -s -o "$HL_TMP/out" -w '%{http_code}' --max-time 30 "$@"; }
# query SQL: POSTs {sql} as JSON; prints the HTTP status.
query() {
  status -X POST -H 'Content-Type: application/json' \
    --data-binary "$(jq -n --arg s "$1" '{sql: $s}')" "$HL_URL/api/v1/query"
}
# check_flood WHAT: reads flood's line from stdin, records it, and fails when health was
# slow or the coordinator large. The machine running the tests may be loaded (other
# builds): the bounds are the median and the 90th percentile, which a coordinator whose
# every I/O thread builds a long answer misses by seconds.
check_flood() {
  local p50 p90 p99 rss load
  read -r p50 p90 p99 rss load
  ok "$1: health p50 $p50 ms, p90 $p90 ms, p99 $p99 ms; coordinator RSS up to $rss MB (load $load)"
  echo "$1: health p50 $p50 p90 $p90 p99 $p99 ms, RSS $rss MB, load $load" >>"$HL_LOGS/figures.log"
  (( p50 < 300 && p90 < 1500 )) || fail "health p50 $p50 ms, p90 $p90 ms under the $1"
  (( rss < RSS_CEILING_MB )) || fail "coordinator RSS $rss MB under the $1 (ceiling $RSS_CEILING_MB MB)"
}

say "series reads are paged"
EXP=$(submit "$HEADLAB_SOURCE_DIR/experiments/demo.jsonc" --set "seed=$(seq -s, 1 5000)")
RUN=$(db "SELECT min(id) FROM runs WHERE experiment_id = $EXP")
sqlite3 -batch -cmd '.timeout 10000' "$HL_DB" "WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL
  SELECT x + 1 FROM c WHERE x < 299999) INSERT INTO metrics (run_id, attempt, seq, step, key,
  value, time_s) SELECT $RUN, 1, x, x, 'train.loss', 1.0 / (x + 1), x * 0.01 FROM c" ||
  fail "cannot write the test's metric points"
M=$HL_URL/api/v1/runs/$RUN/metrics
expect_eq "limit=-1" 400 "$(status "$M?limit=-1")"
expect_eq "limit=$((PAGE + 1))" 400 "$(status "$M?limit=$((PAGE + 1))")"
expect_eq "a cursor that does not parse" 400 "$(status "$M?cursor=1:x")"
expect_eq "a page without limit" 200 "$(status "$M")"
expect_eq "points in it" $PAGE "$(jq '.points | length' "$HL_TMP/out")"
total=0 pages=0 cursor=""
while :; do
  [[ "$(status "$M?limit=$PAGE${cursor:+&cursor=$cursor}")" == 200 ]] || fail "page after '$cursor': $(head -c 300 "$HL_TMP/out")"
  total=$(( total + $(jq '.points | length' "$HL_TMP/out") ))
  pages=$(( pages + 1 ))
  cursor=$(jq -r '.next // empty' "$HL_TMP/out")
  [[ -n "$cursor" ]] || break
  (( pages < 10 )) || fail "more than 10 pages"
done
expect_eq "points read through the cursor" 300000 "$total"
ok "$pages pages"
expect_eq "last point's loss" "$(jq -n '1 / 300000')" \
  "$(curl -s "$M?cursor=1:299998" | jq '.points[0][4]')"

say "12 clients reading the 300,000-point series"
flood 10 12 get "$M" | check_flood "series flood" || exit 1

say "16 clients recomputing a 10,000-run experiment's results"
sqlite3 -batch -cmd '.timeout 10000' "$HL_DB" "UPDATE runs SET status = 'succeeded' WHERE experiment_id = $EXP;
  INSERT INTO summaries (run_id, key, value, attempt) SELECT id, 'eval.ppl',
  10 + (id % 7) * 0.1, 1 FROM runs WHERE experiment_id = $EXP" || fail "cannot write the test's summaries"
R=$HL_URL/api/v1/experiments/$EXP/results?recompute=1
expect_eq "one recompute" 200 "$(status "$R")"
jq -e '.comparisons[0].n == 5000' "$HL_TMP/out" >/dev/null || fail "results: $(head -c 400 "$HL_TMP/out")"
flood 10 16 get "$R" | check_flood "recompute flood" || exit 1

say "SQL cannot run long inside one function call"
expect_eq "instr() over 4 MB strings" 400 \
  "$(query "SELECT instr(hex(zeroblob(2097152)) || '1', hex(zeroblob(1048576)) || '1')")"
jq -e '.error | test("too big")' "$HL_TMP/out" >/dev/null || fail "the 4 MB instr(): $(cat "$HL_TMP/out")"
expect_eq "a 1 MB value" 400 "$(query "SELECT length(zeroblob(1048576))")"
# The longest strings the cap allows, in instr()'s worst case (the needle matches at every
# position but its last byte), once per row (x keeps SQLite from computing it once): the
# time limit stops it between calls.
START=$(date +%s%N)
BIG="WITH c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100)
     SELECT instr(hex(zeroblob(131071)), hex(zeroblob(65535 - x % 2)) || '1') FROM c"
expect_eq "100 instr() calls at the cap" 400 "$(query "$BIG")"
MS=$(( ($(date +%s%N) - START) / 1000000 ))
jq -e '.error | test("exceeded the 5000 ms limit")' "$HL_TMP/out" >/dev/null || fail "$(cat "$HL_TMP/out")"
(( MS < 12000 )) || fail "the query stopped after $MS ms (limit 5000)"
ok "stopped after $MS ms"
expect_eq "a LIKE pattern over 1,000 bytes" 400 "$(query "SELECT 'a' LIKE printf('%.*c', 1001, '%')")"

say "SQL is stopped at its deadline even inside one VM step, and when its client leaves"
# One row, 100 GLOB calls over 256 KiB strings (each about a second: 330 character classes
# tried at every position): no jump between them, so SQLite's progress handler never runs.
glob_row_json "$HL_TMP/globs.json"
# glob_query N: POSTs the GLOB row; writes "status seconds" to $HL_TMP/glob.N.
glob_query() {
  curl -s -o "$HL_TMP/glob.$1.out" -w '%{http_code} %{time_total}\n' --max-time 40 -X POST \
    -H 'Content-Type: application/json' --data-binary @"$HL_TMP/globs.json" \
    "$HL_URL/api/v1/query" >"$HL_TMP/glob.$1"
}
glob_query 1 &
G1=$!
glob_query 2 &
G2=$!
sleep 1
SELECT1=$(curl -s -o "$HL_TMP/select1.out" -w '%{http_code} %{time_total}' --max-time 30 -X POST \
  -H 'Content-Type: application/json' --data-binary '{"sql": "SELECT 1"}' "$HL_URL/api/v1/query")
read -r CODE SECS <<<"$SELECT1"
expect_eq "select 1 while two GLOB rows run" 200 "$CODE"
awk -v s="$SECS" 'BEGIN { exit !(s < 3) }' || fail "select 1 took $SECS s while two GLOB rows ran"
ok "select 1 answered in $SECS s"
wait "$G1" "$G2"
for i in 1 2; do
  read -r CODE SECS <"$HL_TMP/glob.$i"
  expect_eq "GLOB row $i" 400 "$CODE"
  jq -e '.error | test("exceeded the 5000 ms limit")' "$HL_TMP/glob.$i.out" >/dev/null ||
    fail "GLOB row $i: $(head -c 300 "$HL_TMP/glob.$i.out")"
  # The limit, the kill grace (1 s) and a loaded machine's delays.
  awk -v s="$SECS" 'BEGIN { exit !(s < 9) }' || fail "GLOB row $i stopped after $SECS s (limit 5 s)"
  ok "GLOB row $i stopped after $SECS s"
done
# A client that leaves after 1 s: its query's process is gone soon after, not at the limit.
curl -s -o /dev/null --max-time 1 -X POST -H 'Content-Type: application/json' \
  --data-binary @"$HL_TMP/globs.json" "$HL_URL/api/v1/query"
no_query_child() { [[ -z "$(pgrep -P "$HL_COORD_PID" -f query-child)" ]]; }
wait_until 3 "the query of the client that left to be stopped" no_query_child
ok "the query stopped when its client left"

say "web pages cannot reach the API"
PORT=$HL_HTTP_PORT
expect_eq "GET under a rebound Host" 421 \
  "$(status -H 'Host: rebind.evil.example' "$HL_URL/api/v1/experiments")"
expect_eq "GET under Host localhost" 200 "$(status -H "Host: localhost:$PORT" "$HL_URL/api/v1/experiments")"
expect_eq "GET under Host [::1]" 200 "$(status -H "Host: [::1]:$PORT" "$HL_URL/api/v1/experiments")"
expect_eq "GET from a foreign origin" 403 \
  "$(status -H 'Origin: http://evil.example' "$HL_URL/api/v1/experiments")"
expect_eq "GET from the page's own origin" 200 \
  "$(status -H "Origin: http://127.0.0.1:$PORT" "$HL_URL/api/v1/experiments")"
expect_eq "a text/plain query (a simple cross-origin POST)" 415 \
  "$(status -X POST -H 'Content-Type: text/plain' --data-binary '{"sql": "SELECT 1"}' "$HL_URL/api/v1/query")"
expect_eq "a form-encoded write" 415 \
  "$(status -X POST -H "Authorization: Bearer $(cat "$HL_DATA/token")" --data-binary '{}' "$HL_URL/api/v1/runs/$RUN/cancel")"
expect_eq "a JSON query from a foreign origin" 403 \
  "$(status -X POST -H 'Content-Type: application/json' -H 'Origin: null' --data-binary '{"sql": "SELECT 1"}' "$HL_URL/api/v1/query")"
expect_eq "a JSON query from its own origin" 200 \
  "$(status -X POST -H 'Content-Type: application/json; charset=utf-8' -H "Origin: http://127.0.0.1:$PORT" \
    --data-binary '{"sql": "SELECT 1"}' "$HL_URL/api/v1/query")"
expect_eq "the dashboard under a rebound Host" 421 "$(status -H 'Host: rebind.evil.example' "$HL_URL/")"
OUT=$(hl status 2>&1) || fail "headlab status: $OUT"
ok "the CLI is served"

say "a grid that would expand to too many bytes is refused before expansion"
{
  printf '{"name": "wide", "base": {"kind": "command", "command": {"program": "x.py"}, "params": {'
  for i in $(seq 0 99); do
    (( i )) && printf ', '
    printf '"p%d": "%s"' "$i" "$(head -c 4000 /dev/zero | tr '\0' 'x')"
  done
  printf '}}, "axes": {"seed": [%s]}}\n' "$(seq -s, 1 2000)"
} >"$HL_TMP/wide.jsonc"
START=$(date +%s%N)
hl submit "$HL_TMP/wide.jsonc" --dry-run >"$HL_TMP/wide.out" 2>&1
expect_eq "exit of a dry run of the 800 MB grid" 2 "$?"
grep -q 'MiB of configs' "$HL_TMP/wide.out" || fail "the refusal: $(head -c 400 "$HL_TMP/wide.out")"
jq -n --rawfile t "$HL_TMP/wide.jsonc" '{text: $t, dry_run: true}' >"$HL_TMP/wide.body"
expect_eq "the same grid over HTTP" 400 "$(status -X POST -H 'Content-Type: application/json' \
  -H "Authorization: Bearer $(cat "$HL_DATA/token")" --data-binary @"$HL_TMP/wide.body" "$HL_URL/api/v1/experiments")"
MS=$(( ($(date +%s%N) - START) / 1000000 ))
(( MS < 5000 )) || fail "refusing the grid took $MS ms"
ok "both refused in $MS ms"
# A grid that names only a run kind still expands to complete configs (2.7 KB each for a
# no-op run): 100,000 of them are refused too (they took 18 s and 2 GB of the coordinator).
jq -n '{name: "many", base: {kind: "noop"}, axes: {seed: [range(1; 100001)]}}' >"$HL_TMP/many.jsonc"
jq -n --rawfile t "$HL_TMP/many.jsonc" '{text: $t, dry_run: true}' >"$HL_TMP/many.body"
START=$(date +%s%N)
hl submit "$HL_TMP/many.jsonc" --dry-run >"$HL_TMP/many.out" 2>&1
expect_eq "exit of a dry run of 100,000 no-op runs" 2 "$?"
grep -q 'MiB of configs' "$HL_TMP/many.out" || fail "the refusal: $(head -c 400 "$HL_TMP/many.out")"
expect_eq "the same grid over HTTP" 400 "$(status -X POST -H 'Content-Type: application/json' \
  -H "Authorization: Bearer $(cat "$HL_DATA/token")" --data-binary @"$HL_TMP/many.body" "$HL_URL/api/v1/experiments")"
MS=$(( ($(date +%s%N) - START) / 1000000 ))
(( MS < 5000 )) || fail "refusing 100,000 no-op runs took $MS ms"
ok "both refused in $MS ms"

say "bodies trickled a byte at a time do not keep new clients out"
# 1,024 descriptors: the coordinator admits 512 connections; 600 trickle.
start_coordinator_1024
trickle 600 60 "$P2" 2>/dev/null &
TRICKLE=$!
HL_EXTRA_PIDS+=($TRICKLE)
opened() { [[ -s "$HL_TMP/trickle.opened" ]]; }
wait_until 60 "the trickling connections to open" opened
ok "trickling connections: $(cat "$HL_TMP/trickle.opened")"
served=0
for i in $(seq 10); do
  c=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$P2/api/v1/experiments")
  [[ "$c" == 200 ]] && served=$((served + 1))
  sleep 0.3
done
expect_eq "reads answered while 600 bodies trickle" 10 "$served"
kill "$TRICKLE" 2>/dev/null
hl_stop_pid "$C2"
