#!/usr/bin/env bash
# System test (README "Adding hosts and Slurm", docs/DESIGN.md "Tokens"): the CLI over
# https through a TLS-terminating proxy in front of the coordinator, as a researcher off
# the coordinator's host uses it. A CA and a server certificate for `localhost` are made
# with `openssl req` here; tests/tls_proxy.py terminates TLS on loopback and relays to the
# coordinator, which reads with a token only (--reads token, as behind nginx).
# - submit, runs, status, results, logs, export --history and wait work over https with --ca-file (and with
#   HEADLAB_CA_FILE);
# - a certificate from another CA, the system's store (which does not know the test CA), a
#   certificate that does not name the URL's host, and a plain HTTP server behind an https
#   URL are each refused: exit 1, a message naming the URL, and nothing reaches the
#   coordinator;
# - plain http still works.
source "$(dirname "$0")/lib.sh"

python3 -c 'import ssl' 2>/dev/null || { echo "python3 with its ssl module is needed"; exit 77; }
command -v openssl >/dev/null || { echo "openssl is needed"; exit 77; }

GRID=$HEADLAB_SOURCE_DIR/tests/data/noop_runs.jsonc
PKI=$HL_TMP/pki
mkdir -p "$PKI"

say "a test CA, a server certificate for localhost, and an unrelated CA"
# make_ca NAME: a self-signed CA certificate and key, $PKI/NAME.crt and $PKI/NAME.key.
make_ca() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=headlab test $1" \
    -keyout "$PKI/$1.key" -out "$PKI/$1.crt" -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign >>"$HL_LOGS/openssl.log" 2>&1 ||
    fail "openssl could not make CA $1 (see openssl.log)"
}
make_ca ca
make_ca other_ca
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$PKI/server.key" \
  -out "$PKI/server.csr" >>"$HL_LOGS/openssl.log" 2>&1 || fail "openssl req (server) failed"
printf 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$PKI/server.ext"
openssl x509 -req -in "$PKI/server.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
  -CAcreateserial -days 2 -extfile "$PKI/server.ext" -out "$PKI/server.crt" \
  >>"$HL_LOGS/openssl.log" 2>&1 || fail "openssl x509 (signing the server certificate) failed"
openssl verify -CAfile "$PKI/ca.crt" "$PKI/server.crt" >/dev/null ||
  fail "the server certificate does not verify against the test CA"
ok "server certificate for DNS:localhost signed by the test CA"

# The coordinator on loopback with reads that need a token, as behind a proxy.
HL_COORD_ARGS=(--reads token)
start_coordinator
start_worker w1  # its runs are this test's only wait for it (reads need the token here)

say "a TLS terminator in front of it"
python3 "$HEADLAB_SOURCE_DIR/tests/tls_proxy.py" --cert "$PKI/server.crt" --key "$PKI/server.key" \
  --backend "$HL_HTTP_PORT" --port-file "$HL_TMP/proxy.port" >>"$HL_LOGS/tls_proxy.log" 2>&1 &
PROXY_PID=$!
HL_EXTRA_PIDS+=("$PROXY_PID")
proxy_listening() { [[ -s "$HL_TMP/proxy.port" ]]; }
wait_until 20 "the TLS proxy to listen" proxy_listening
PROXY_PORT=$(cat "$HL_TMP/proxy.port")
HTTPS=https://localhost:$PROXY_PORT
ok "proxy at $HTTPS -> $HL_URL"
# The proxy really speaks TLS with this certificate (an independent client).
curl -sf --max-time 5 --cacert "$PKI/ca.crt" "$HTTPS/api/v1/health" | jq -e '.ok == true' >/dev/null ||
  fail "curl --cacert through the proxy: no health"
ok "curl --cacert reaches the coordinator's health through the proxy"

# hs CMD ARGS...: `headlab CMD` against the proxy with the user's token and the test CA.
# No --data-dir: the researcher's host has none, and no database may answer in its place.
hs() {
  local cmd=$1
  shift
  "$HEADLAB_BIN" "$cmd" --url "$HTTPS" --token-file "$HL_DATA/token" --ca-file "$PKI/ca.crt" "$@"
}

say "every kind of command over https with --ca-file"
OUT=$(hs submit "$GRID" --json 2>"$HL_TMP/err") || fail "submit over https: $(cat "$HL_TMP/err")"
EXP=$(jq -er .experiment <<<"$OUT") || fail "submit over https printed no experiment: $OUT"
expect_eq "runs stored by the https submit" 2 \
  "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP")"
timeout 120 "$HEADLAB_BIN" wait "$EXP" --url "$HTTPS" --token-file "$HL_DATA/token" \
  --ca-file "$PKI/ca.crt" >"$HL_TMP/wait.out" 2>&1 || fail "wait over https: $(tail -5 "$HL_TMP/wait.out")"
ok "wait $EXP over https returned when the grid finished"
expect_eq "succeeded runs (database)" 2 \
  "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP AND status = 'succeeded'")"
RUNS=$(hs runs "$EXP" --json 2>"$HL_TMP/err") || fail "runs over https: $(cat "$HL_TMP/err")"
expect_eq "runs over https: succeeded" 2 "$(jq '[.[] | select(.status == "succeeded")] | length' <<<"$RUNS")"
expect_eq "run ids over https = the database's" \
  "$(db "SELECT group_concat(id, ' ') FROM (SELECT id FROM runs WHERE experiment_id = $EXP ORDER BY id)")" \
  "$(jq -r '[.[].id] | sort | map(tostring) | join(" ")' <<<"$RUNS")"
STATUS=$(hs status --json 2>"$HL_TMP/err") || fail "status over https: $(cat "$HL_TMP/err")"
expect_eq "status over https: succeeded runs" \
  "$(db "SELECT count(*) FROM runs WHERE status = 'succeeded'")" \
  "$(jq -r '.runs_by_status.succeeded' <<<"$STATUS")"
RESULTS=$(hs results "$EXP" --json 2>"$HL_TMP/err") || fail "results over https: $(cat "$HL_TMP/err")"
expect_eq "results over https = results over plain http" \
  "$(hl results "$EXP" --json --token-file "$HL_DATA/token" | jq -S -c 'del(.computed_at)')" \
  "$(jq -S -c 'del(.computed_at)' <<<"$RESULTS")"
RUN=$(jq -r '.[0].id' <<<"$RUNS")
expect_eq "logs $RUN over https = over plain http" \
  "$(hl logs "$RUN" --json --token-file "$HL_DATA/token" | jq -S -c .)" \
  "$(hs logs "$RUN" --json | jq -S -c .)"
hs export "$EXP" --history -o "$HL_TMP/history_https.jsonl" 2>"$HL_TMP/err" ||
  fail "export --history over https: $(cat "$HL_TMP/err")"
hl export "$EXP" --history -o "$HL_TMP/history_http.jsonl" --token-file "$HL_DATA/token" ||
  fail "export --history over plain http failed"
expect_eq "metric points exported over https" \
  "$(db "SELECT count(*) FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.experiment_id = $EXP")" \
  "$(wc -l <"$HL_TMP/history_https.jsonl")"
cmp -s "$HL_TMP/history_https.jsonl" "$HL_TMP/history_http.jsonl" ||
  fail "export --history differs between https and plain http"
ok "export --history over https = over plain http"
OUT=$(HEADLAB_CA_FILE=$PKI/ca.crt "$HEADLAB_BIN" runs "$EXP" --url "$HTTPS" \
  --token-file "$HL_DATA/token" --json 2>"$HL_TMP/err") || fail "runs with HEADLAB_CA_FILE: $(cat "$HL_TMP/err")"
expect_eq "runs over https with HEADLAB_CA_FILE" 2 "$(jq length <<<"$OUT")"
CODE=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$PKI/ca.crt" "$HTTPS/api/v1/experiments")
expect_eq "a read through the proxy without a token (--reads token)" 401 "$CODE"

# refused WHAT EXPECTED_PATTERN CMD...: CMD must exit 1 with a message naming the URL and
# matching the pattern, and must not have reached the coordinator.
refused() {
  local what=$1 pattern=$2 rc before after
  shift 2
  before=$(db "SELECT count(*) FROM experiments")
  "$@" >"$HL_TMP/refused.out" 2>"$HL_TMP/refused.err"
  rc=$?
  after=$(db "SELECT count(*) FROM experiments")
  expect_eq "$what: exit code" 1 "$rc"
  grep -qF "$URL_TRIED" "$HL_TMP/refused.err" || fail "$what: the message does not name $URL_TRIED: $(cat "$HL_TMP/refused.err")"
  grep -qiE "$pattern" "$HL_TMP/refused.err" || fail "$what: the message does not say '$pattern': $(cat "$HL_TMP/refused.err")"
  expect_eq "$what: experiments stored" "$before" "$after"
  ok "$what: $(head -1 "$HL_TMP/refused.err")"
}

say "untrusted or mismatched certificates are refused, never retried in clear"
URL_TRIED=$HTTPS
refused "a certificate of another CA (--ca-file)" "certificate verify failed" \
  "$HEADLAB_BIN" submit "$GRID" --url "$HTTPS" --token-file "$HL_DATA/token" --ca-file "$PKI/other_ca.crt"
refused "a certificate of another CA (HEADLAB_CA_FILE)" "certificate verify failed" \
  env HEADLAB_CA_FILE="$PKI/other_ca.crt" "$HEADLAB_BIN" runs "$EXP" --url "$HTTPS" --token-file "$HL_DATA/token"
refused "the system's CAs, which do not know the test CA" "certificate verify failed" \
  env -u HEADLAB_CA_FILE "$HEADLAB_BIN" submit "$GRID" --url "$HTTPS" --token-file "$HL_DATA/token"
URL_TRIED=https://127.0.0.1:$PROXY_PORT
refused "a certificate for localhost at 127.0.0.1" "hostname mismatch|IP address mismatch" \
  "$HEADLAB_BIN" submit "$GRID" --url "$URL_TRIED" --token-file "$HL_DATA/token" --ca-file "$PKI/ca.crt"
URL_TRIED=https://127.0.0.1:$HL_HTTP_PORT
refused "an https URL of a plain HTTP server" "TLS handshake" \
  "$HEADLAB_BIN" submit "$GRID" --url "$URL_TRIED" --token-file "$HL_DATA/token" --ca-file "$PKI/ca.crt"
OUT=$("$HEADLAB_BIN" status --url "$HTTPS" --ca-file "$HL_TMP/no-such-ca.pem" 2>&1)
expect_eq "a missing --ca-file: exit code" 2 "$?"
grep -qF "$HL_TMP/no-such-ca.pem" <<<"$OUT" || fail "a missing --ca-file: the message does not name it: $OUT"
ok "a missing --ca-file: $OUT"

say "plain http still works"
OUT=$(hl runs "$EXP" --json --token-file "$HL_DATA/token") || fail "runs over plain http failed"
expect_eq "runs over plain http" 2 "$(jq length <<<"$OUT")"
EXP2=$(submit "$GRID" --token-file "$HL_DATA/token")
expect_eq "runs stored by a plain-http submit" 2 \
  "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP2")"
check_daemons
hl_stop_pid "$PROXY_PID" 2>/dev/null
