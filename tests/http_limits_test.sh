#!/usr/bin/env bash
# System test (docs/BENCHMARKS.md, "Service"): the HTTP API's work stays bounded under hostile
# use. Eight runaway SQL queries leave /health and the other reads answering at once; an
# answer stops at its byte cap; functions that expose SQLite's internals are refused;
# thousands of idle connections against a coordinator with few file descriptors neither
# make it unreachable nor spin its accept loop; bytes that are not UTF-8 are 400, not 500.
source "$(dirname "$0")/lib.sh"

start_coordinator

# query SQL: POSTs {sql} to the query endpoint; prints the HTTP status, the answer in
# $HL_TMP/query.out.
query() {
  curl -s -o "$HL_TMP/query.out" -w '%{http_code}' --max-time 60 -X POST \
    -H 'Content-Type: application/json' --data-binary "$(jq -n --arg s "$1" '{sql: $s}')" "$HL_URL/api/v1/query"
}
# Prints the seconds a GET of $1 took; fails unless it answered 200.
timed_get() {
  local out
  out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 10 "$HL_URL$1")
  [[ "${out%% *}" == 200 ]] || fail "GET $1 answered '${out%% *}' while the queries ran"
  echo "${out#* }"
}

say "eight runaway queries at once"
RUNAWAY='WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c'
pids=()
for i in 1 2 3 4 5 6 7 8; do
  curl -s -o "$HL_TMP/runaway.$i" -w '%{http_code}' --max-time 60 -X POST \
    -H 'Content-Type: application/json' --data-binary "$(jq -n --arg s "$RUNAWAY" '{sql: $s}')" "$HL_URL/api/v1/query" \
    >"$HL_TMP/runaway.$i.code" &
  pids+=($!)
done
sleep 1
worst=0
for i in $(seq 10); do
  for path in /api/v1/health /api/v1/experiments /api/v1/status; do
    t=$(timed_get "$path") || exit 1
    worst=$(awk -v a="$worst" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
  done
  sleep 0.2
done
awk -v w="$worst" 'BEGIN { exit !(w < 1.0) }' || fail "slowest read while 8 queries ran: ${worst}s (limit 1 s)"
ok "slowest of 30 reads while the queries ran: ${worst}s"
wait "${pids[@]}"
stopped=0 busy=0
for i in 1 2 3 4 5 6 7 8; do
  c=$(cat "$HL_TMP/runaway.$i.code")
  if [[ "$c" == 400 ]] && jq -e '.error | test("exceeded the 5000 ms limit")' "$HL_TMP/runaway.$i" >/dev/null; then
    stopped=$((stopped + 1))
  elif [[ "$c" == 503 ]]; then
    busy=$((busy + 1))
  else
    fail "runaway query $i: HTTP $c: $(head -c 300 "$HL_TMP/runaway.$i")"
  fi
done
(( stopped >= 4 )) || fail "only $stopped runaway queries ran to their time limit"
ok "runaway queries: $stopped stopped at the 5 s limit, $busy refused (503) after waiting for the query pool"

say "answers stop at the byte cap; internals stay hidden"
# 5,000 rows of 10,000 characters (50 MB) stop at the 32 MiB cap: 10,005 bytes per row.
expect_eq "HTTP status of a 50 MB answer" 200 \
  "$(query "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000) SELECT printf('%.*c', 10000, 'x') FROM c")"
expect_eq "rows in the capped answer" $(( (32 << 20) / 10005 )) "$(jq '.rows | length' "$HL_TMP/query.out")"
expect_eq "why it was cut" bytes "$(jq -r .truncated_by "$HL_TMP/query.out")"
SIZE=$(stat -c %s "$HL_TMP/query.out")
(( SIZE <= (32 << 20) )) || fail "the capped answer is $SIZE bytes"
ok "capped answer: $SIZE bytes"
for fn in "hex(fts3_tokenizer('simple'))" "sqlite_compileoption_get(0)" "load_extension('x')"; do
  expect_eq "SELECT $fn" 400 "$(query "SELECT $fn")"
  jq -e '.error | test("function")' "$HL_TMP/query.out" >/dev/null || fail "SELECT $fn: $(cat "$HL_TMP/query.out")"
done
expect_eq "a query whose answer holds bytes that are not UTF-8" 200 "$(query "SELECT CAST(x'61ff' AS TEXT) AS t")"
expect_eq "the byte, replaced" "a"$'\xef\xbf\xbd' "$(jq -r '.rows[0][0]' "$HL_TMP/query.out")"

say "requests that are not UTF-8 are 400"
# raw_status REQUEST: sends the bytes over a fresh connection; prints the status line.
raw_status() {
  exec 3<>"/dev/tcp/127.0.0.1/$HL_HTTP_PORT"
  printf '%b' "$1" >&3
  timeout 5 head -n 1 <&3 | tr -d '\r'
  exec 3<&-
}
expect_eq "GET /api/v1/runs/<0xff>" "HTTP/1.1 400 Bad Request" \
  "$(raw_status 'GET /api/v1/runs/\xff HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n')"
expect_eq "a query body with byte 0xff" "HTTP/1.1 400 Bad Request" \
  "$(raw_status 'POST /api/v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 19\r\n\r\n{"sql": "SELECT \xff"}')"

say "thousands of idle connections against a coordinator with 1024 file descriptors"
start_coordinator_1024
# A subshell opens 3,000 connections that never send a byte and holds them.
(
  for ((i = 0; i < 3000; i++)); do exec {fd}<>"/dev/tcp/127.0.0.1/$P2" || break; done
  echo "$i" >"$HL_TMP/flood.opened"
  sleep 120
) 2>/dev/null &
FLOOD=$!
HL_EXTRA_PIDS+=($FLOOD)
flood_open() { [[ -s "$HL_TMP/flood.opened" ]]; }
wait_until 60 "the flood's connections to open" flood_open
ok "idle connections opened: $(cat "$HL_TMP/flood.opened")"
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$C2/stat"; }
T0=$(cpu_ticks)
for i in $(seq 5); do
  OUT=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 5 "http://127.0.0.1:$P2/api/v1/experiments")
  [[ "${OUT%% *}" == 200 ]] || fail "GET /api/v1/experiments under the flood: '$OUT'"
  awk -v t="${OUT#* }" 'BEGIN { exit !(t < 1.0) }' || fail "GET /api/v1/experiments under the flood took ${OUT#* }s"
  sleep 0.5
done
ok "5 reads under the flood answered within 1 s each"
sleep 1
TICKS=$(( $(cpu_ticks) - T0 ))
(( TICKS < 100 )) || fail "the coordinator used $TICKS CPU ticks in 3.5 s of idle connections (its accept loop spins)"
ok "coordinator CPU over 3.5 s of the flood: $TICKS ticks"
FDS=$(ls "/proc/$C2/fd" | wc -l)
(( FDS < 1024 )) || fail "the coordinator holds $FDS file descriptors"
ok "coordinator file descriptors: $FDS"
kill "$FLOOD" 2>/dev/null
hl_stop_pid "$C2"
