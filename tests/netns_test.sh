#!/usr/bin/env bash
# System test (README, "More hosts"): many hosts. Three "hosts" are network namespaces
# joined by veth links (iproute2): the coordinator's host C, and worker hosts A and B,
# each on its own point-to-point link to C (10.201.1.0/30 and 10.201.2.0/30). The workers
# join with --coordinator tcp://10.201.x.1:8322 over those links only, with the workers'
# own token and the coordinator's CURVE key (the port is encrypted beyond loopback; a
# worker without the key never registers). Checks:
#   1. a grid completes across the two worker hosts;
#   2. cutting host A off (its link set down) makes the coordinator declare A's attempt
#      lost and requeue its run within the lease time (kLiveness = 3 s, plus slack), and
#      the run completes on B;
#   3. A rejoining (link up) re-registers and does not duplicate results: one succeeded
#      attempt and one set of summaries per run, counted in SQLite.
# Needs root and working `ip netns`; otherwise exits 77 (ctest SKIP_RETURN_CODE) with the
# reason. Namespaces are removed on exit (trap), also on failure.
set -uo pipefail

skip() {
  echo "[netns_test] SKIP: $*"
  exit 77
}
[[ "$(id -u)" == 0 ]] || skip "needs root to create network namespaces (id -u = $(id -u))"
command -v ip >/dev/null || skip "iproute2's 'ip' is not installed"
NS_PREFIX="hl$$"
probe_err=$(ip netns add "${NS_PREFIX}probe" 2>&1) ||
  skip "'ip netns add' does not work here: $probe_err"
ip netns del "${NS_PREFIX}probe"

source "$(dirname "$0")/lib.sh"

NS_C=${NS_PREFIX}c NS_A=${NS_PREFIX}a NS_B=${NS_PREFIX}b
NS_ALL=("$NS_C" "$NS_A" "$NS_B")
HTTP_PORT=8321 WORKER_PORT=8322   # fixed: each namespace has its own fresh port space

ns_delete_all() {
  local ns
  for ns in "${NS_ALL[@]}"; do ip netns del "$ns" 2>/dev/null; done
}

# Stops the daemons (inside the namespaces), removes the namespaces, then the usual
# cleanup (logs on failure, temp dir, PASS line).
ns_exit() {
  local rc=$? name
  [[ "$BASHPID" == "$HL_MAIN_PID" ]] || exit "$rc"
  for name in "${!HL_WORKER_PIDS[@]}"; do
    hl_adopt_children "${HL_WORKER_PIDS[$name]}"
    hl_stop_pid "${HL_WORKER_PIDS[$name]}"
  done
  HL_WORKER_PIDS=()
  [[ -n "$HL_COORD_PID" ]] && hl_stop_pid "$HL_COORD_PID"
  HL_COORD_PID=""
  for pid in "${HL_EXTRA_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  ns_delete_all
  (exit "$rc")
  hl_cleanup
}
trap ns_exit EXIT

# --- Topology ------------------------------------------------------------------------
for ns in "${NS_ALL[@]}"; do
  ip netns add "$ns" || fail "ip netns add $ns"
  ip -n "$ns" link set lo up || fail "lo up in $ns"
done
# link HOST_NS SUBNET_INDEX: a veth pair C <-> HOST, 10.201.N.1 on C, 10.201.N.2 on HOST.
link() {
  local ns=$1 n=$2 c_end=c$2 h_end=h$2
  ip link add "${NS_PREFIX}$c_end" type veth peer name "${NS_PREFIX}$h_end" || fail "veth pair $n"
  ip link set "${NS_PREFIX}$c_end" netns "$NS_C" name "to$n" || fail "move veth to $NS_C"
  ip link set "${NS_PREFIX}$h_end" netns "$ns" name eth0 || fail "move veth to $ns"
  ip -n "$NS_C" addr add "10.201.$n.1/30" dev "to$n" || fail "address on C"
  ip -n "$ns" addr add "10.201.$n.2/30" dev eth0 || fail "address on $ns"
  ip -n "$NS_C" link set "to$n" up || fail "link up on C"
  ip -n "$ns" link set eth0 up || fail "link up on $ns"
}
link "$NS_A" 1
link "$NS_B" 2
ip -n "$NS_A" route get 10.201.1.1 >/dev/null 2>&1 || fail "host A has no route to C"
ip -n "$NS_B" route get 10.201.2.1 >/dev/null 2>&1 || fail "host B has no route to C"
ip -n "$NS_A" route get 10.201.2.2 >/dev/null 2>&1 && fail "host A has a route to host B: not isolated"
ip -n "$NS_A" route get 127.0.0.2 2>/dev/null | grep -q "dev lo" || fail "host A's loopback is not its own"
ok "three namespaces, links C-A and C-B; A and B have no route to each other"

# --- Daemons -------------------------------------------------------------------------
# The CLI and curl run inside C (the HTTP API listens on C's loopback only).
HL_URL=http://127.0.0.1:$HTTP_PORT
hl() {
  local cmd=$1
  shift
  ip netns exec "$NS_C" "$HEADLAB_BIN" "$cmd" --url "$HL_URL" --data-dir "$HL_DATA" "$@"
}
alive_workers() {
  ip netns exec "$NS_C" curl -sf --max-time 2 "$HL_URL/api/v1/workers" |
    jq '[.[] | select(.state == "alive")] | length'
}
worker_state() {
  ip netns exec "$NS_C" curl -sf --max-time 2 "$HL_URL/api/v1/workers" |
    jq -r --arg n "$1" '[.[] | select(.name == $n)] | map(.state) | join(",")'
}

ip netns exec "$NS_C" "$HEADLAB_BIN" coordinator --data-dir "$HL_DATA" \
  --http "127.0.0.1:$HTTP_PORT" --workers "tcp://0.0.0.0:$WORKER_PORT" \
  >>"$HL_LOGS/coordinator.log" 2>&1 &
HL_COORD_PID=$!
coord_healthy() { ip netns exec "$NS_C" curl -sf --max-time 2 "$HL_URL/api/v1/health" | jq -e '.ok == true'; }
wait_until 30 "coordinator health in $NS_C" coord_healthy
say "coordinator up in $NS_C (pid $HL_COORD_PID), workers socket tcp://0.0.0.0:$WORKER_PORT"

# start_ns_worker NAME NS COORDINATOR_ADDRESS
start_ns_worker() {
  local name=$1 ns=$2 addr=$3 dir=$HL_TMP/workers/$1
  mkdir -p "$dir"
  ip netns exec "$ns" "$HEADLAB_BIN" worker --coordinator "tcp://$addr:$WORKER_PORT" \
    --data-dir "$dir" --name "$name" --token-file "$HL_DATA/worker_token" --cpu-only --slots 1 \
    --coordinator-key "$HL_DATA/curve_server.pub" \
    >>"$HL_LOGS/worker-$name.log" 2>&1 &
  HL_WORKER_PIDS[$name]=$!
  say "started worker $name in $ns (pid $!) -> tcp://$addr:$WORKER_PORT"
}
grep -q "worker port encrypted (CURVE)" "$HL_LOGS/coordinator.log" ||
  fail "the coordinator on tcp://0.0.0.0 does not encrypt its worker port"
start_ns_worker a "$NS_A" 10.201.1.1
start_ns_worker b "$NS_B" 10.201.2.1
wait_workers 2
# Beyond loopback the worker port speaks only CURVE: a worker with the right token but
# without the coordinator's key never registers.
dir=$HL_TMP/workers/plain
mkdir -p "$dir"
ip netns exec "$NS_A" "$HEADLAB_BIN" worker --coordinator "tcp://10.201.1.1:$WORKER_PORT" \
  --data-dir "$dir" --name plain --token-file "$HL_DATA/worker_token" --cpu-only --slots 1 \
  >>"$HL_LOGS/worker-plain.log" 2>&1 &
PLAIN=$!
HL_EXTRA_PIDS+=($PLAIN)
sleep 5
expect_eq "state of a worker without the coordinator's key after 5 s" "" "$(worker_state plain)"
kill "$PLAIN" 2>/dev/null

# --- 1. A grid completes across hosts --------------------------------------------------
GRID=$HL_TMP/grid.jsonc
cat >"$GRID" <<'EOF'
// Noop runs long enough (2 s) for a host to be cut off mid-run.
{"name": "netns", "base": {"kind": "noop", "noop": {"duration_ms": 2000, "metrics": 10}},
 "axes": {"seed": [1, 2, 3, 4]}, "max_attempts": 3}
EOF
EXP=$(submit "$GRID") || exit 1
ok "experiment $EXP submitted (4 runs)"

# --- 2. Cut host A off mid-run ---------------------------------------------------------
running_on_a() {
  local r
  r=$(db "SELECT a.run_id || ' ' || a.attempt FROM attempts a JOIN workers w ON w.id = a.worker_id
          JOIN runs r ON r.id = a.run_id
          WHERE r.experiment_id = $EXP AND w.name = 'a' AND a.status = 'running' LIMIT 1")
  [[ -n "$r" ]] && echo "$r"
}
wait_until 30 "an attempt running on host A" running_on_a
read -r RUN ATT <<<"$(running_on_a)"
ip -n "$NS_C" link set to1 down || fail "link down"
CUT_MS=$(date +%s%3N)
say "cut host A off (link to1 down) while it runs run $RUN attempt $ATT"

attempt_lost() { [[ "$(db "SELECT status FROM attempts WHERE run_id = $RUN AND attempt = $ATT")" == lost ]]; }
wait_until 20 "run $RUN attempt $ATT declared lost" attempt_lost
LOST_MS=$(date +%s%3N)
# Lease/liveness time is 3 s (common/wire.h kLiveness); allow polling and timer slack.
(( LOST_MS - CUT_MS <= 6000 )) || fail "attempt lost $((LOST_MS - CUT_MS)) ms after the cut (> 6000 ms)"
ok "attempt $ATT of run $RUN lost $((LOST_MS - CUT_MS)) ms after the cut (lease 3000 ms)"
requeued() { [[ -n "$(db "SELECT 1 FROM attempts WHERE run_id = $RUN AND attempt = $((ATT + 1))")" ]]; }
wait_until 20 "run $RUN requeued as attempt $((ATT + 1))" requeued
expect_eq "worker of the requeued attempt" b "$(db "SELECT w.name FROM attempts a
  JOIN workers w ON w.id = a.worker_id WHERE a.run_id = $RUN AND a.attempt = $((ATT + 1))")"
expect_eq "state of host A's worker while cut off" dead "$(db "SELECT state FROM workers WHERE name = 'a'")"

# Keep A cut off until its exec child has finished the old attempt (2 s noop), so that
# it comes back holding a finished attempt whose DONE the coordinator must not count.
sleep_until_ms=$(( CUT_MS + 3000 ))
while (( $(date +%s%3N) < sleep_until_ms )); do sleep 0.2; done

# --- 3. A rejoins ---------------------------------------------------------------------
ip -n "$NS_C" link set to1 up || fail "link up"
say "host A's link is up again"
a_alive() { [[ "$(worker_state a)" == *alive* ]]; }
wait_until 30 "host A's worker re-registered" a_alive
ok "host A's worker re-registered after $(( ($(date +%s%3N) - CUT_MS) / 1000 )) s"

wait_grid "$EXP" 45
check_one_success_per_run "$EXP" 4
expect_eq "summary rows of experiment $EXP (one set per run)" \
  "$(db "SELECT count(*) FROM summaries s JOIN runs r ON r.id = s.run_id
         JOIN attempts a ON a.run_id = s.run_id AND a.attempt = s.attempt
         WHERE r.experiment_id = $EXP AND a.status = 'succeeded'")" \
  "$(db "SELECT count(*) FROM summaries s JOIN runs r ON r.id = s.run_id WHERE r.experiment_id = $EXP")"
expect_eq "status of the cut-off attempt after A rejoined" lost \
  "$(db "SELECT status FROM attempts WHERE run_id = $RUN AND attempt = $ATT")"
expect_eq "succeeded attempts of run $RUN" 1 \
  "$(db "SELECT count(*) FROM attempts WHERE run_id = $RUN AND status = 'succeeded'")"
# A is usable again: a second grid runs on both hosts.
sed -e 's/"duration_ms": 2000/"duration_ms": 300/' -e 's/\[1, 2, 3, 4\]/[5, 6]/' "$GRID" >"$HL_TMP/short.jsonc"
EXP2=$(submit "$HL_TMP/short.jsonc") || exit 1
wait_grid "$EXP2" 30
check_one_success_per_run "$EXP2" 2
expect_eq "hosts that ran experiment $EXP2" "a b" "$(db "SELECT group_concat(n, ' ') FROM (
  SELECT DISTINCT w.name AS n FROM attempts a JOIN workers w ON w.id = a.worker_id
  JOIN runs r ON r.id = a.run_id WHERE r.experiment_id = $EXP2 ORDER BY n)")"
