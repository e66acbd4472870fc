#!/usr/bin/env bash
# System test (docs/DESIGN.md, "Tokens"): workers have credentials of their own and, beyond
# loopback, an encrypted link, set up by `headlab up` without hand steps.
# - `up --workers tcp://0.0.0.0:P` (beyond loopback): the coordinator encrypts its worker
#   port with CURVE (key pair in DIR, secret key mode 0600, named in coordinator.json), and
#   up's worker connects with that key and DIR/worker_token; a grid completes.
# - A worker holding the user's token but not the key never registers; one with the key
#   and the workers' token does.
# - The workers' token grants nothing over HTTP.
source "$(dirname "$0")/lib.sh"

GRID=$HEADLAB_SOURCE_DIR/tests/data/noop_runs.jsonc
UP=$HL_TMP/up
P1=$(hl_free_port) && P2=$(hl_free_port) || exit 1
up_detached "$UP" --http "127.0.0.1:$P1" --workers "tcp://0.0.0.0:$P2"
U=http://127.0.0.1:$P1

say "up beyond loopback: an encrypted worker port, its worker set up by up"
grep -q "worker port encrypted (CURVE)" "$UP/coordinator.log" || fail "no CURVE: $(tail -n 5 "$UP/coordinator.log")"
expect_eq "mode of curve_server.key" 600 "$(stat -c %a "$UP/curve_server.key")"
expect_eq "length of the public key" 40 "$(tr -d '\n' <"$UP/curve_server.pub" | wc -c)"
expect_eq "coordinator.json's worker_key" "$(realpath "$UP")/curve_server.pub" "$(jq -r .worker_key "$UP/coordinator.json")"
WPID=$(jq -r .worker_pid "$UP/up.json")
ARGS=$(tr '\0' ' ' <"/proc/$WPID/cmdline")
[[ "$ARGS" == *"--coordinator-key $UP/curve_server.pub"* && "$ARGS" == *"--token-file $UP/worker_token"* ]] ||
  fail "up's worker runs as: $ARGS"
ok "up's worker: $ARGS"
OUT=$("$HEADLAB_BIN" submit "$GRID" --url "$U" --data-dir "$UP" --json) || fail "submit: $OUT"
EXP=$(jq -r .experiment <<<"$OUT")
done_ok() {
  "$HEADLAB_BIN" runs "$EXP" --url "$U" --data-dir "$UP" --json |
    jq -e 'length == 2 and all(.[]; .status == "succeeded")'
}
wait_until 60 "the grid to succeed over the encrypted link" done_ok
ok "2 runs succeeded over the encrypted link"

say "workers without the key are not heard; with it they are"
# worker NAME ARGS...: starts a worker on the encrypted port.
worker() {
  mkdir -p "$HL_TMP/workers/$1"
  "$HEADLAB_BIN" worker --coordinator "tcp://127.0.0.1:$P2" --data-dir "$HL_TMP/workers/$1" \
    --name "$1" --cpu-only --slots 1 "${@:2}" >>"$HL_LOGS/worker-$1.log" 2>&1 &
  HL_WORKER_PIDS[$1]=$!
}
state() { curl -sf --max-time 2 "$U/api/v1/workers" | jq -r --arg n "$1" '[.[] | select(.name == $n)] | map(.state) | join(",")'; }
worker plain --token-file "$UP/worker_token"
worker keyed --token-file "$UP/worker_token" --coordinator-key "$UP/curve_server.pub"
is_alive() { [[ "$(state "$1")" == alive ]]; }
wait_until 30 "the worker with the key to register" is_alive keyed
ok "the worker with the key and the workers' token registered"
sleep 3
expect_eq "state of the worker without the key" "" "$(state plain)"
echo "x" >"$HL_TMP/short.pub"
"$HEADLAB_BIN" worker --coordinator "tcp://127.0.0.1:$P2" --data-dir "$HL_TMP/workers/bad" \
  --token-file "$UP/worker_token" --coordinator-key "$HL_TMP/short.pub" >"$HL_TMP/bad.out" 2>&1
expect_eq "exit of a worker given a malformed key" 2 "$?"
grep -q "40-character Z85 key" "$HL_TMP/bad.out" || fail "malformed key: $(cat "$HL_TMP/bad.out")"

say "the workers' token grants nothing over HTTP"
W=$(cat "$UP/worker_token")
expect_eq "submit with the workers' token" 401 "$(curl -s -o /dev/null -w '%{http_code}' -X POST \
  -H 'Content-Type: application/json' -H "Authorization: Bearer $W" \
  --data-binary "$(jq -n --rawfile t "$GRID" '{text: $t}')" "$U/api/v1/experiments")"
expect_eq "cancel with the workers' token" 401 "$(curl -s -o /dev/null -w '%{http_code}' -X POST \
  -H 'Content-Type: application/json' -H "Authorization: Bearer $W" -d '{}' "$U/api/v1/experiments/$EXP/cancel")"
