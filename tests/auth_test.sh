#!/usr/bin/env bash
# System test (docs/DESIGN.md, "Tokens"): workers must present their own token
# (DIR/worker_token, which grants nothing over HTTP; the user's token is refused on the
# worker port, so a worker host cannot act as the user), HTTP writes need the user's bearer
# token, and the SQL query endpoint cannot write.
source "$(dirname "$0")/lib.sh"

GRID=$HEADLAB_SOURCE_DIR/tests/data/noop_runs.jsonc
start_coordinator
[[ -s "$HL_DATA/token" ]] || fail "the coordinator did not create $HL_DATA/token"
expect_eq "mode of $HL_DATA/token" 600 "$(stat -c %a "$HL_DATA/token")"
TOKEN=$(cat "$HL_DATA/token")
BODY=$(jq -n --rawfile t "$GRID" '{file: "noop_runs.jsonc", text: $t, sets: []}')

# post PATH BODY [CURL ARGS...]: prints the HTTP status of a POST.
post() {
  local path=$1 body=$2
  shift 2
  curl -s -o "$HL_TMP/post.out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data-binary "$body" "$@" "$HL_URL$path"
}

say "HTTP writes without or with a wrong bearer token"
expect_eq "POST /api/v1/experiments without a token" 401 "$(post /api/v1/experiments "$BODY")"
CODE=$(post /api/v1/experiments "$BODY" -H "Authorization: Bearer not-the-$TOKEN")
[[ "$CODE" == 401 || "$CODE" == 403 ]] || fail "POST with a wrong token: expected 401/403, got $CODE"
ok "POST with a wrong token -> $CODE"
expect_eq "POST with a token that is not a bearer token" 401 \
  "$(post /api/v1/experiments "$BODY" -H "Authorization: $TOKEN")"
expect_eq "experiments stored after refused POSTs" 0 "$(curl -sf "$HL_URL/api/v1/experiments" | jq length)"

expect_eq "POST /api/v1/experiments with the token" 200 \
  "$(post /api/v1/experiments "$BODY" -H "Authorization: Bearer $TOKEN")"
EXP=$(jq -er .experiment "$HL_TMP/post.out") || fail "no experiment id in $(cat "$HL_TMP/post.out")"
RUN=$(db "SELECT min(id) FROM runs WHERE experiment_id = $EXP")
expect_eq "POST /api/v1/runs/$RUN/cancel without a token" 401 "$(post "/api/v1/runs/$RUN/cancel" '{}')"
expect_eq "POST /api/v1/experiments/$EXP/cancel without a token" 401 \
  "$(post "/api/v1/experiments/$EXP/cancel" '{}')"
expect_eq "runs still queued" 2 "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP AND status = 'queued'")"

say "workers with a wrong or an empty token"
echo "wrong-$TOKEN" >"$HL_TMP/wrong_token"
: >"$HL_TMP/empty_token"
# run_bad_worker NAME TOKEN_FILE: starts a worker with that token file; it must exit non-zero.
run_bad_worker() {
  start_worker "$1" --token-file "$2"
  local pid=${HL_WORKER_PIDS[$1]} rc
  worker_exited() { ! kill -0 "$pid" 2>/dev/null; }
  wait_until 20 "worker $1 to exit" worker_exited
  wait "$pid"
  rc=$?
  unset "HL_WORKER_PIDS[$1]"
  (( rc != 0 )) || fail "worker $1 exited 0"
  ok "worker $1 exited $rc"
}
LINES=$(wc -l <"$HL_LOGS/coordinator.log")
run_bad_worker bad_token "$HL_TMP/wrong_token"
REFUSAL=$(tail -n +"$((LINES + 1))" "$HL_LOGS/coordinator.log" | grep -iE 'refus' | head -1)
[[ -n "$REFUSAL" ]] || fail "the coordinator log does not mention refusing the worker with a wrong token"
ok "coordinator logged: $REFUSAL"
# The user's token writes over HTTP: the worker port refuses it (a worker host holding it
# could submit `command` runs to every worker).
LINES=$(wc -l <"$HL_LOGS/coordinator.log")
run_bad_worker user_token "$HL_DATA/token"
tail -n +"$((LINES + 1))" "$HL_LOGS/coordinator.log" | grep -q 'refused READY.*bad token' ||
  fail "the coordinator log does not mention refusing the worker with the user's token"
grep -q "bad token" "$HL_LOGS/worker-user_token.log" ||
  fail "the worker with the user's token did not say why it stopped: $(tail -n 2 "$HL_LOGS/worker-user_token.log")"
# An empty token may be refused by the worker itself (bad input) or by the coordinator.
run_bad_worker empty_token "$HL_TMP/empty_token"
grep -qi token "$HL_LOGS/worker-empty_token.log" ||
  fail "the worker with an empty token did not say why it stopped"
ok "worker with an empty token: $(grep -i token "$HL_LOGS/worker-empty_token.log" | tail -1)"
expect_eq "attempts assigned to refused workers" 0 "$(db "SELECT count(*) FROM attempts")"
expect_eq "alive workers" 0 "$(alive_workers)"

say "writes through the read-only query endpoint"
sleep 1
BEFORE=$(db_fingerprint)
# Through the CLI (exit 2: the API answers 400)...
for sql in "INSERT INTO experiments (name, grid_json, max_attempts, created_at) VALUES ('x', '{}', 1, 'now')" \
           "DELETE FROM runs" \
           "DROP TABLE runs"; do
  OUT=$(hl query "$sql" 2>&1)
  RC=$?
  (( RC == 2 )) || fail "headlab query \"$sql\": expected exit 2, got $RC: $OUT"
  grep -qi 'read-only' <<<"$OUT" || fail "headlab query \"$sql\": message does not say read-only: $OUT"
  ok "headlab query refused (exit 2): $sql"
done
# ...and straight at the API (no CLI start-up per statement), with no token at all.
for sql in "UPDATE runs SET status = 'succeeded'" \
           "CREATE TABLE evil (x)" \
           "PRAGMA user_version = 99" \
           "ATTACH DATABASE '$HL_TMP/evil.db' AS evil" \
           "WITH x AS (SELECT 1) DELETE FROM runs" \
           "INSERT INTO runs SELECT * FROM runs"; do
  CODE=$(post /api/v1/query "$(jq -n --arg s "$sql" '{sql: $s}')")
  [[ "$CODE" == 400 ]] || fail "POST /api/v1/query \"$sql\": expected 400, got $CODE: $(cat "$HL_TMP/post.out")"
  jq -e '.error | test("read-only"; "i")' "$HL_TMP/post.out" >/dev/null ||
    fail "POST /api/v1/query \"$sql\": error does not say read-only: $(cat "$HL_TMP/post.out")"
  ok "POST /api/v1/query refused (400 read-only): $sql"
done
[[ ! -e "$HL_TMP/evil.db" ]] || fail "ATTACH created $HL_TMP/evil.db"
# A second statement after a harmless one must not run either.
hl query "SELECT 1; DELETE FROM runs" >/dev/null 2>&1
expect_eq "POST /api/v1/query SELECT without a token" 200 \
  "$(post /api/v1/query '{"sql": "SELECT count(*) FROM runs"}')"
AFTER=$(db_fingerprint)
expect_eq "database files byte-for-byte after the refused writes" "$BEFORE" "$AFTER"
expect_eq "runs after the refused writes" 2 "$(db "SELECT count(*) FROM runs")"
OUT=$(hl query "SELECT count(*) AS n FROM runs" --json) || fail "a read-only query failed"
expect_eq "query --json SELECT count(*)" 2 "$(jq -r '.rows[0][0]' <<<"$OUT")"

say "positive control: a worker with the right token runs the grid"
start_worker w1
wait_workers 1
wait_grid "$EXP" 60
expect_eq "runs succeeded with the right token" 2 \
  "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP AND status = 'succeeded'")"

say "the workers' own token: worthless over HTTP"
[[ -s "$HL_DATA/worker_token" ]] || fail "the coordinator did not create $HL_DATA/worker_token"
expect_eq "mode of $HL_DATA/worker_token" 600 "$(stat -c %a "$HL_DATA/worker_token")"
WTOKEN=$(cat "$HL_DATA/worker_token")
[[ "$WTOKEN" != "$TOKEN" ]] || fail "the worker token is the user's token"
expect_eq "POST /api/v1/experiments with the worker token" 401 \
  "$(post /api/v1/experiments "$BODY" -H "Authorization: Bearer $WTOKEN")"
expect_eq "POST /api/v1/runs/$RUN/retry with the worker token" 401 \
  "$(post "/api/v1/runs/$RUN/retry" '{}' -H "Authorization: Bearer $WTOKEN")"
start_worker w2 --token-file "$HL_DATA/worker_token"
wait_workers 2
EXP2=$(submit "$GRID" --rerun)
wait_grid "$EXP2" 60
expect_eq "runs succeeded with both workers" 2 \
  "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP2 AND status = 'succeeded'")"

say "request bodies are not read before the token is checked"
# 20 MB offered without a token, with Expect: 100-continue: refused from the head, and the
# client is never told to send the body.
head -c 20000000 /dev/zero >"$HL_TMP/big.body"
OUT=$(curl -s -o "$HL_TMP/post.out" -w '%{http_code} %{size_upload}' --max-time 10 -X POST \
  -H 'Expect: 100-continue' -H 'Content-Type: application/json' \
  --data-binary @"$HL_TMP/big.body" "$HL_URL/api/v1/experiments")
read -r CODE UPLOADED <<<"$OUT"
expect_eq "POST of 20 MB without a token" 401 "$CODE"
(( UPLOADED < 1000000 )) || fail "the client sent $UPLOADED bytes of the refused body"
ok "bytes of the refused body sent: $UPLOADED"
# A head announcing 50 MB and no body at all: the refusal comes at once (before the fix the
# server waited for the body).
exec 3<>"/dev/tcp/127.0.0.1/$HL_HTTP_PORT"
printf 'POST /api/v1/experiments HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n' >&3
STATUS=$(timeout 5 head -n 1 <&3 | tr -d '\r')
exec 3<&-
expect_eq "answer to a head announcing 50 MB, body never sent" "HTTP/1.1 401 Unauthorized" "$STATUS"

say "reads are open on loopback, need the token beyond it"
expect_eq "GET /api/v1/experiments without a token (loopback)" 200 \
  "$(curl -s -o /dev/null -w '%{http_code}' "$HL_URL/api/v1/experiments")"
# A second coordinator listening on every address: reads need the token.
D2=$HL_TMP/data2
mkdir -p "$D2"
P2=$(hl_free_port)
"$HEADLAB_BIN" coordinator --data-dir "$D2" --http "0.0.0.0:$P2" \
  --workers "tcp://127.0.0.1:$(hl_free_port)" >>"$HL_LOGS/coordinator2.log" 2>&1 &
C2=$!
HL_EXTRA_PIDS+=($C2)
U2=http://127.0.0.1:$P2
up2() { curl -sf --max-time 2 "$U2/api/v1/health" >/dev/null; }
wait_until 30 "the second coordinator (--http 0.0.0.0:$P2)" up2
grep -q "HTTP reads need the token" "$HL_LOGS/coordinator2.log" ||
  fail "the coordinator on 0.0.0.0 does not say that reads need the token"
T2=$(cat "$D2/token")
code() { curl -s -o "$HL_TMP/read.out" -w '%{http_code}' --max-time 5 "$@"; }
expect_eq "GET /api/v1/health without a token" 200 "$(code "$U2/api/v1/health")"
for path in /api/v1/experiments /api/v1/status /api/v1/workers /api/v1/runs/1; do
  expect_eq "GET $path without a token" 401 "$(code "$U2$path")"
done
jq -e '.error | test("token")' "$HL_TMP/read.out" >/dev/null || fail "the 401 does not mention the token"
expect_eq "POST /api/v1/query without a token" 401 \
  "$(code -X POST -H 'Content-Type: application/json' --data-binary '{"sql": "SELECT 1"}' "$U2/api/v1/query")"
expect_eq "GET /api/v1/stream without a token" 401 "$(code "$U2/api/v1/stream?runs=1")"
expect_eq "GET /api/v1/experiments with the token" 200 \
  "$(code -H "Authorization: Bearer $T2" "$U2/api/v1/experiments")"
expect_eq "GET /api/v1/experiments with the workers' token" 401 \
  "$(code -H "Authorization: Bearer $(cat "$D2/worker_token")" "$U2/api/v1/experiments")"
expect_eq "the live stream with the dashboard's cookie" 200 \
  "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -b "headlab_token=$T2" "$U2/api/v1/stream?runs=1")"
expect_eq "a write with only the cookie" 401 \
  "$(code -X POST -H 'Content-Type: application/json' -b "headlab_token=$T2" --data-binary '{}' "$U2/api/v1/runs/1/cancel")"
# The CLI sends the token it finds (DIR/token) with reads; without one it is refused.
OUT=$("$HEADLAB_BIN" status --url "$U2" --data-dir "$D2" --json) || fail "headlab status with the token failed: $OUT"
jq -e '.experiments' <<<"$OUT" >/dev/null || fail "headlab status --json: $OUT"
ok "headlab status with DIR/token reads"
OUT=$("$HEADLAB_BIN" query "SELECT 1" --url "$U2" --data-dir "$HL_TMP/no-such-dir" 2>&1)
RC=$?
(( RC != 0 )) || fail "headlab query without a token succeeded against a coordinator beyond loopback"
grep -qi token <<<"$OUT" || fail "headlab query without a token: message does not mention the token: $OUT"
ok "headlab query without a token: exit $RC, $OUT"
hl_stop_pid "$C2"
