# tests/lib.sh: shared harness of the whole-system tests (sourced by tests/*_test.sh).
#
# Starts a real coordinator and real workers on loopback ports inside a temp dir, drives
# them through the headlab CLI, and cleans up on exit. Every wait has a deadline, so a
# test always stops by itself. On failure the coordinator and worker log tails are printed.
#
# Environment: HEADLAB_BIN (the headlab binary; default $HEADLAB_SOURCE_DIR/build/headlab),
# HEADLAB_SOURCE_DIR (the source tree; default: the parent of this file's dir),
# HEADLAB_KEEP_TMP=1 keeps the temp dir for inspection.
#
# Layout of the temp dir:
#   $HL_TMP/data/             the coordinator's --data-dir (headlab.db, token, ...)
#   $HL_TMP/workers/wN/       each worker's --data-dir
#   $HL_TMP/logs/*.log        stdout+stderr of every daemon this test started

set -uo pipefail

HEADLAB_SOURCE_DIR=${HEADLAB_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
HEADLAB_BIN=${HEADLAB_BIN:-$HEADLAB_SOURCE_DIR/build/headlab}
# The tests use the default token convention (the coordinator creates DATA/token); an
# inherited token would silently change what is being tested.
unset HEADLAB_TOKEN HEADLAB_URL

HL_TEST_NAME=$(basename "${BASH_SOURCE[1]:-$0}" .sh)
HL_TMP=$(mktemp -d "${TMPDIR:-/tmp}/headlab-$HL_TEST_NAME.XXXXXX")
HL_DATA=$HL_TMP/data
HL_LOGS=$HL_TMP/logs
mkdir -p "$HL_DATA" "$HL_LOGS" "$HL_TMP/workers"
HL_DB=$HL_DATA/headlab.db
HL_HTTP_PORT=""
HL_WORKER_PORT=""
HL_URL=""
HL_COORD_PID=""
declare -A HL_WORKER_PIDS=()   # name -> pid
HL_EXTRA_PIDS=()               # processes started indirectly (e.g. orphaned exec children)
HL_COORD_ARGS=()               # extra arguments of start_coordinator's coordinator
HL_START=$(date +%s)
HL_MAIN_PID=$BASHPID

# ---------------------------------------------------------------------------------------
# Reporting.

# Prints a step of the test.
say() { echo "[$HL_TEST_NAME +$(( $(date +%s) - HL_START ))s] $*"; }
# Prints a passed check.
ok() { echo "[$HL_TEST_NAME +$(( $(date +%s) - HL_START ))s]   ok: $*"; }
# Prints the failure and exits 1 (the EXIT trap prints the logs and cleans up). Inside
# $(...) it only ends the subshell: write `x=$(helper ...) || exit 1`.
fail() {
  echo "[$HL_TEST_NAME +$(( $(date +%s) - HL_START ))s] FAIL: $*" >&2
  exit 1
}
# expect_eq WHAT EXPECTED ACTUAL: fails unless the two strings are equal.
expect_eq() {
  if [[ "$2" != "$3" ]]; then fail "$1: expected '$2', got '$3'"; fi
  ok "$1 = $3"
}

# ---------------------------------------------------------------------------------------
# Processes and cleanup.

# Kills pid $1 (TERM, then KILL after a 5 s grace) and reaps it if it is our child.
hl_stop_pid() {
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}

# Remembers the children of $1 (e.g. a worker's `headlab exec`) so that cleanup ends them.
hl_adopt_children() {
  local c
  for c in $(pgrep -P "$1" 2>/dev/null); do HL_EXTRA_PIDS+=("$c"); done
}

hl_print_logs() {
  local f
  for f in "$HL_LOGS"/*.log; do
    [[ -e "$f" ]] || continue
    echo "----- tail of $(basename "$f") -----" >&2
    tail -n 40 "$f" >&2
  done
  echo "----- end of logs (temp dir $HL_TMP) -----" >&2
}

hl_cleanup() {
  local rc=$? name pid
  [[ "$BASHPID" == "$HL_MAIN_PID" ]] || exit "$rc"
  trap - EXIT INT TERM
  if (( rc != 0 )); then hl_print_logs; fi
  for name in "${!HL_WORKER_PIDS[@]}"; do
    pid=${HL_WORKER_PIDS[$name]}
    hl_adopt_children "$pid"
    hl_stop_pid "$pid"
  done
  [[ -n "$HL_COORD_PID" ]] && hl_stop_pid "$HL_COORD_PID"
  for pid in "${HL_EXTRA_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  if [[ "${HEADLAB_KEEP_TMP:-0}" == 1 ]]; then
    echo "[$HL_TEST_NAME] kept $HL_TMP" >&2
  else
    rm -rf "$HL_TMP"
  fi
  if (( rc == 0 )); then
    echo "[$HL_TEST_NAME] PASS ($(( $(date +%s) - HL_START ))s)"
  fi
  exit "$rc"
}
trap hl_cleanup EXIT
trap 'exit 130' INT TERM

[[ -x "$HEADLAB_BIN" ]] || fail "HEADLAB_BIN=$HEADLAB_BIN is not an executable"
for tool in curl jq sqlite3 sha256sum pgrep; do
  command -v "$tool" >/dev/null || fail "the tests need '$tool' on PATH"
done

# ---------------------------------------------------------------------------------------
# `headlab up --detach` as a user runs it.

# Starts `headlab up --detach --data-dir $1` on free ports with 2 worker slots (its output
# in $HL_TMP/up.out, the HTTP port in HL_UP_PORT) and stops it with `down` at exit.
hl_up_detached() {
  HL_UP_PORT=$(hl_free_port) && local workers_port && workers_port=$(hl_free_port) || exit 1
  up_detached "$1" --http "127.0.0.1:$HL_UP_PORT" --workers "tcp://127.0.0.1:$workers_port" \
    --worker-slots 2
}

# ---------------------------------------------------------------------------------------
# Ports.

# Returns 0 iff nothing accepts connections on 127.0.0.1:$1 (and, where `ss` exists, no
# socket uses the port at all).
hl_port_unused() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 1; fi
  if command -v ss >/dev/null; then
    [[ -z "$(ss -Htan "( sport = :$1 or dport = :$1 )" 2>/dev/null)" ]] || return 1
  fi
  return 0
}

# Prints a random TCP port in [20000, 60000) on 127.0.0.1 that looks unused. Tests running
# in parallel could still pick the same port: start_coordinator retries on other ports.
hl_free_port() {
  local p i
  for ((i = 0; i < 200; i++)); do
    p=$(( 20000 + (RANDOM * 32768 + RANDOM + $$) % 40000 ))
    if hl_port_unused "$p"; then
      echo "$p"
      return 0
    fi
  done
  fail "no free port found"
}

# ---------------------------------------------------------------------------------------
# Coordinator.

# wait_until SECONDS WHAT CMD...: runs CMD every 0.2 s until it succeeds; fails after SECONDS.
wait_until() {
  local limit=$1 what=$2 deadline
  shift 2
  deadline=$(( $(date +%s) + limit ))
  until "$@" >/dev/null; do
    (( $(date +%s) < deadline )) || fail "timed out after ${limit}s waiting for: $what"
    sleep 0.2
  done
}

hl_health() { curl -sf --max-time 2 "$HL_URL/api/v1/health" | jq -e '.ok == true'; }

# Starts the coordinator on $HL_HTTP_PORT/$HL_WORKER_PORT (picked on first use) and waits
# for /api/v1/health. A first start that cannot bind retries on other ports. The array
# HL_COORD_ARGS, if set, is added to the coordinator's arguments.
start_coordinator() {
  local attempt log
  for attempt in 1 2 3; do
    if [[ -z "$HL_HTTP_PORT" ]]; then
      HL_HTTP_PORT=$(hl_free_port)
      HL_WORKER_PORT=$(hl_free_port)
      [[ "$HL_WORKER_PORT" == "$HL_HTTP_PORT" ]] && HL_WORKER_PORT=$(hl_free_port)
      HL_FRESH_PORTS=1
    fi
    HL_URL=http://127.0.0.1:$HL_HTTP_PORT
    log=$HL_LOGS/coordinator.log
    echo "=== start (attempt $attempt) $(date -u +%FT%TZ) http=$HL_HTTP_PORT workers=$HL_WORKER_PORT" >>"$log"
    "$HEADLAB_BIN" coordinator --data-dir "$HL_DATA" --http "127.0.0.1:$HL_HTTP_PORT" \
      --workers "tcp://127.0.0.1:$HL_WORKER_PORT" "${HL_COORD_ARGS[@]}" >>"$log" 2>&1 &
    HL_COORD_PID=$!
    local deadline=$(( $(date +%s) + 30 ))
    while (( $(date +%s) < deadline )); do
      if hl_health >/dev/null 2>&1; then
        say "coordinator up (pid $HL_COORD_PID, $HL_URL, workers tcp://127.0.0.1:$HL_WORKER_PORT)"
        return 0
      fi
      kill -0 "$HL_COORD_PID" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$HL_COORD_PID" 2>/dev/null; then
      fail "coordinator (pid $HL_COORD_PID) did not answer /api/v1/health within 30s"
    fi
    wait "$HL_COORD_PID"
    say "coordinator exited with $? before it was healthy"
    HL_COORD_PID=""
    # Only freshly picked ports may have been taken by someone else meanwhile.
    [[ "${HL_FRESH_PORTS:-0}" == 1 ]] || fail "coordinator did not start on its ports"
    HL_HTTP_PORT=""
  done
  fail "coordinator did not start (see coordinator.log)"
}

# start_coordinator_1024: a second coordinator (data dir $D2, HTTP port $P2, pid $C2) whose
# process may hold only 1,024 file descriptors; waits for its health.
start_coordinator_1024() {
  D2=$HL_TMP/data2
  mkdir -p "$D2"
  P2=$(hl_free_port)
  (ulimit -n 1024 && exec "$HEADLAB_BIN" coordinator --data-dir "$D2" --http "127.0.0.1:$P2" \
    --workers "tcp://127.0.0.1:$(hl_free_port)") >>"$HL_LOGS/coordinator2.log" 2>&1 &
  C2=$!
  HL_EXTRA_PIDS+=($C2)
  up2() { curl -sf --max-time 2 "http://127.0.0.1:$P2/api/v1/health" >/dev/null; }
  wait_until 30 "the second coordinator" up2
}

# up_detached DIR ARGS...: `headlab up --detach --data-dir DIR ARGS...` (its output in
# $HL_TMP/up.out); what it started is stopped with `headlab down` on exit.
up_detached() {
  HL_UP_DIR=$1
  shift
  "$HEADLAB_BIN" up --detach --data-dir "$HL_UP_DIR" "$@" >"$HL_TMP/up.out" 2>&1 ||
    { cat "$HL_TMP/up.out"; fail "headlab up failed"; }
  HL_EXTRA_PIDS+=($(jq -r '.coordinator_pid, .worker_pid' "$HL_UP_DIR/up.json"))
  trap 'hl_cleanup_up' EXIT
}
hl_cleanup_up() {  # stop what `up` started, then the harness's cleanup with our status
  local rc=$?
  "$HEADLAB_BIN" down --data-dir "$HL_UP_DIR" >/dev/null 2>&1
  (exit "$rc")
  hl_cleanup
}

# kill -9 the coordinator (fault injection).
kill9_coordinator() {
  [[ -n "$HL_COORD_PID" ]] || fail "no coordinator to kill"
  kill -KILL "$HL_COORD_PID"
  wait "$HL_COORD_PID" 2>/dev/null
  say "killed coordinator pid $HL_COORD_PID with SIGKILL"
  HL_COORD_PID=""
  HL_FRESH_PORTS=0
}

# ---------------------------------------------------------------------------------------
# Workers.

# start_worker NAME [EXTRA ARGS...]: starts a worker connected to the coordinator; its
# token is the workers' own, DATA/worker_token (--token-file), unless EXTRA ARGS say else.
start_worker() {
  local name=$1
  shift
  local dir=$HL_TMP/workers/$name
  mkdir -p "$dir"
  local args=(--coordinator "tcp://127.0.0.1:$HL_WORKER_PORT" --data-dir "$dir" --name "$name")
  if [[ " $* " != *" --token-file "* ]]; then args+=(--token-file "$HL_DATA/worker_token"); fi
  "$HEADLAB_BIN" worker "${args[@]}" "$@" >>"$HL_LOGS/worker-$name.log" 2>&1 &
  HL_WORKER_PIDS[$name]=$!
  say "started worker $name (pid $!)"
}

# Prints how many workers the coordinator reports alive.
alive_workers() {
  curl -sf --max-time 2 "$HL_URL/api/v1/workers" | jq '[.[] | select(.state == "alive")] | length'
}

# Fails if the coordinator or a worker this test started (and did not kill) has exited.
check_daemons() {
  local name
  if [[ -n "$HL_COORD_PID" ]] && ! kill -0 "$HL_COORD_PID" 2>/dev/null; then
    fail "the coordinator (pid $HL_COORD_PID) exited unexpectedly"
  fi
  for name in "${!HL_WORKER_PIDS[@]}"; do
    kill -0 "${HL_WORKER_PIDS[$name]}" 2>/dev/null ||
      fail "worker $name (pid ${HL_WORKER_PIDS[$name]}) exited unexpectedly: $(tail -n 2 "$HL_LOGS/worker-$name.log" | tr '\n' ' ')"
  done
}

hl_alive_at_least() {
  check_daemons
  local n
  n=$(alive_workers 2>/dev/null) && (( ${n:-0} >= $1 ))
}

# wait_workers N: waits until at least N workers are registered and alive.
wait_workers() {
  wait_until 30 "$1 alive workers" hl_alive_at_least "$1"
  ok "$1 worker(s) registered"
}

# kill9_worker NAME: SIGKILL the worker (its exec children are remembered for cleanup).
kill9_worker() {
  local pid=${HL_WORKER_PIDS[$1]}
  hl_adopt_children "$pid"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null
  unset "HL_WORKER_PIDS[$1]"
  say "killed worker $1 (pid $pid) with SIGKILL"
}

# start_cluster N: a coordinator and N workers w1..wN, all registered.
start_cluster() {
  local i
  start_coordinator
  for ((i = 1; i <= $1; i++)); do start_worker "w$i"; done
  wait_workers "$1"
}

# ---------------------------------------------------------------------------------------
# CLI, API and database.

# hl CMD ARGS...: runs `headlab CMD` against this test's coordinator.
hl() {
  local cmd=$1
  shift
  "$HEADLAB_BIN" "$cmd" --url "$HL_URL" --data-dir "$HL_DATA" "$@"
}

# db SQL: runs read-only SQL on the coordinator's database (separator '|').
db() { sqlite3 -readonly -batch -noheader -cmd '.timeout 5000' "$HL_DB" "$1"; }

# Prints the sha256 of the database files (main file and, if present, WAL).
db_fingerprint() {
  local f
  for f in "$HL_DB" "$HL_DB-wal"; do
    if [[ -e "$f" ]]; then sha256sum "$f"; else echo "absent $f"; fi
  done
}

# submit FILE [ARGS...]: submits a grid; prints the experiment id; fails on error.
submit() {
  local out rc
  out=$(hl submit "$@" --json 2>"$HL_TMP/submit.err")
  rc=$?
  (( rc == 0 )) || fail "headlab submit $* exited $rc: $(cat "$HL_TMP/submit.err") $out"
  local exp
  exp=$(jq -er '.experiment' <<<"$out") || fail "submit --json printed no experiment id: $out"
  echo "$exp"
}

# Prints `headlab runs EXP --json` (fails if the command fails).
runs_json() {
  local out
  out=$(hl runs "$1" --json) || fail "headlab runs $1 --json failed"
  jq -e 'type == "array"' <<<"$out" >/dev/null || fail "runs --json is not an array: $out"
  echo "$out"
}

# wait_grid EXP SECONDS: waits until every run of EXP is finished (succeeded, failed or
# cancelled); prints progress when it changes.
wait_grid() {
  local exp=$1 limit=$2 deadline last="" cur json
  deadline=$(( $(date +%s) + limit ))
  while :; do
    check_daemons
    json=$(hl runs "$exp" --json 2>/dev/null) || json=""
    if [[ -n "$json" ]]; then
      cur=$(jq -r 'group_by(.status) | map("\(.[0].status)=\(length)") | join(" ")' <<<"$json")
      [[ "$cur" != "$last" ]] && say "experiment $exp: $cur"
      last=$cur
      if jq -e 'length > 0 and all(.[]; .status == "succeeded" or .status == "failed" or .status == "cancelled")' \
           <<<"$json" >/dev/null; then
        return 0
      fi
    fi
    (( $(date +%s) < deadline )) || fail "experiment $exp not finished after ${limit}s (last: $cur)"
    sleep 0.5
  done
}

# check_one_success_per_run EXP N: exactly N runs, each succeeded with exactly one
# succeeded attempt row and a summary; no metric (key, step) repeats within that attempt.
check_one_success_per_run() {
  local exp=$1 n=$2
  expect_eq "runs of experiment $exp in the database" "$n" \
    "$(db "SELECT count(*) FROM runs WHERE experiment_id = $exp")"
  expect_eq "runs not succeeded" 0 \
    "$(db "SELECT count(*) FROM runs WHERE experiment_id = $exp AND status != 'succeeded'")"
  expect_eq "runs without exactly one succeeded attempt" 0 "$(db "
    SELECT count(*) FROM runs r WHERE r.experiment_id = $exp AND
      (SELECT count(*) FROM attempts a WHERE a.run_id = r.id AND a.status = 'succeeded') != 1")"
  expect_eq "runs without a summary" 0 "$(db "
    SELECT count(*) FROM runs r WHERE r.experiment_id = $exp AND
      NOT EXISTS (SELECT 1 FROM summaries s WHERE s.run_id = r.id)")"
  expect_eq "summaries not from the succeeded attempt" 0 "$(db "
    SELECT count(*) FROM summaries s JOIN runs r ON r.id = s.run_id
    WHERE r.experiment_id = $exp AND s.attempt != (SELECT a.attempt FROM attempts a
      WHERE a.run_id = s.run_id AND a.status = 'succeeded')")"
  expect_eq "succeeded attempts without metrics" 0 "$(db "
    SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id
    WHERE r.experiment_id = $exp AND a.status = 'succeeded' AND
      NOT EXISTS (SELECT 1 FROM metrics m WHERE m.run_id = a.run_id AND m.attempt = a.attempt)")"
  expect_eq "duplicated (key, step) metric points in succeeded attempts" "" "$(db "
    SELECT m.run_id, m.attempt, m.key, m.step, count(*) FROM metrics m
    JOIN attempts a ON a.run_id = m.run_id AND a.attempt = m.attempt AND a.status = 'succeeded'
    JOIN runs r ON r.id = m.run_id WHERE r.experiment_id = $exp
    GROUP BY m.run_id, m.attempt, m.key, m.step HAVING count(*) > 1 LIMIT 5")"
  expect_eq "attempts still running" 0 "$(db "
    SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id
    WHERE r.experiment_id = $exp AND a.status = 'running'")"
}
