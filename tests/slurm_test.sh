#!/usr/bin/env bash
# System test (README, "More hosts"): workers on a Slurm allocation. The test runs its own
# Slurm from Debian's packages (slurmctld + slurmd, one node "hlnode1" on loopback, ports
# picked free, auth/none so no munge key is needed, proctrack/linuxproc, no cgroups; its
# config and state live in the temp dir) next to a real coordinator, then:
#   1. `headlab slurm submit-workers` writes and submits the sbatch script; a worker named
#      slurm-<job>-hlnode1 joins and a grid completes on it;
#   2. the allocation is requeued mid-grid (`scontrol requeue`, as on preemption): the
#      worker stops, its attempts are lost and requeued, the restarted allocation's
#      worker rejoins under the same name and the grid completes with one succeeded
#      attempt and one set of summaries per run (counted in SQLite);
#   3. `scancel` ends the allocation and its worker leaves the coordinator.
# Exits 77 (ctest SKIP_RETURN_CODE) with the reason when not root or when the Slurm
# daemons are not installed (scripts/install-deps.sh installs them).
set -uo pipefail

skip() {
  echo "[slurm_test] SKIP: $*"
  exit 77
}
[[ "$(id -u)" == 0 ]] || skip "slurmd must run as root here (id -u = $(id -u))"
for tool in slurmctld slurmd sbatch squeue scontrol scancel sinfo; do
  command -v "$tool" >/dev/null || PATH=$PATH:/usr/sbin command -v "$tool" >/dev/null ||
    skip "'$tool' is not installed (Debian: slurmctld slurmd slurm-client; scripts/install-deps.sh)"
done
export PATH=$PATH:/usr/sbin

source "$(dirname "$0")/lib.sh"

SL=$HL_TMP/slurm
mkdir -p "$SL/state" "$SL/spool" "$SL/log"
export SLURM_CONF=$SL/slurm.conf
SLURMCTLD_PID="" SLURMD_PID=""
NODE=hlnode1
PARTITION=hltest

# Cancels our jobs, stops the Slurm daemons we started, then the usual cleanup.
slurm_exit() {
  local rc=$? i
  [[ "$BASHPID" == "$HL_MAIN_PID" ]] || exit "$rc"
  if [[ -n "$SLURMCTLD_PID" ]] && kill -0 "$SLURMCTLD_PID" 2>/dev/null; then
    scancel --full "${JOB:-0}" >/dev/null 2>&1
    for ((i = 0; i < 50; i++)); do
      [[ -z "$(squeue -h 2>/dev/null)" ]] && break
      sleep 0.2
    done
  fi
  if (( rc != 0 )); then
    for f in "$SL"/log/* "$SL"/out/*; do
      [[ -e "$f" ]] || continue
      echo "----- tail of $f -----" >&2
      tail -n 20 "$f" >&2
    done
  fi
  [[ -n "$SLURMD_PID" ]] && hl_stop_pid "$SLURMD_PID"
  [[ -n "$SLURMCTLD_PID" ]] && hl_stop_pid "$SLURMCTLD_PID"
  # A worker the job started and that outlived it (it should not) is ours to end.
  for pid in "${SLURM_WORKER_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  (exit "$rc")
  hl_cleanup
}
SLURM_WORKER_PIDS=()
trap slurm_exit EXIT

start_coordinator
CTLD_PORT=$(hl_free_port)
SLURMD_PORT=$(hl_free_port)
HOST=$(hostname -s)
cat >"$SLURM_CONF" <<EOF
# Written by tests/slurm_test.sh: a one-node cluster on loopback.
ClusterName=hl$$
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$SL/state
SlurmdSpoolDir=$SL/spool
SlurmctldPidFile=$SL/slurmctld.pid
SlurmdPidFile=$SL/slurmd.pid
SlurmctldLogFile=$SL/log/slurmctld.log
SlurmdLogFile=$SL/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=10
InactiveLimit=0
NodeName=$NODE NodeHostname=$HOST NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -i -f "$SLURM_CONF" >>"$HL_LOGS/slurmctld.log" 2>&1 &
SLURMCTLD_PID=$!
slurmd -D -N "$NODE" -f "$SLURM_CONF" >>"$HL_LOGS/slurmd.log" 2>&1 &
SLURMD_PID=$!
node_idle() {
  kill -0 "$SLURMCTLD_PID" 2>/dev/null || fail "slurmctld exited: $(tail -n 3 "$HL_LOGS/slurmctld.log" | tr '\n' ' ')"
  kill -0 "$SLURMD_PID" 2>/dev/null || fail "slurmd exited: $(tail -n 3 "$HL_LOGS/slurmd.log" | tr '\n' ' ')"
  [[ "$(sinfo -h -n "$NODE" -o %T 2>/dev/null)" == idle ]]
}
wait_until 30 "Slurm node $NODE idle" node_idle
ok "slurmctld (port $CTLD_PORT) and slurmd ($NODE, port $SLURMD_PORT) up; node idle"

# --- 1. submit-workers -----------------------------------------------------------------
# Bad input first: exit 2 and the option named, nothing submitted.
out=$(hl slurm submit-workers --nodes 1 2>&1)
expect_eq "exit code without --partition" 2 "$?"
[[ "$out" == *"--partition"* ]] || fail "the error does not name --partition: $out"
out=$(hl slurm submit-workers --partition "$PARTITION" --coordinator "127.0.0.1:1" 2>&1)
expect_eq "exit code with a malformed --coordinator" 2 "$?"
# No --coordinator: DATA/coordinator.json names a loopback socket, which nodes cannot reach.
out=$(hl slurm submit-workers --partition "$PARTITION" 2>&1)
expect_eq "exit code with a loopback-only coordinator" 2 "$?"
[[ "$out" == *"loopback"* ]] || fail "the error does not explain the loopback socket: $out"
expect_eq "jobs submitted by the bad invocations" "" "$(squeue -h -o %i)"

DRY=$(hl slurm submit-workers --partition "$PARTITION" --nodes 1 --gpus-per-node 0 \
  --coordinator "tcp://127.0.0.1:$HL_WORKER_PORT" --dry-run 2>/dev/null) || fail "--dry-run failed"
[[ "$DRY" == *"#SBATCH --partition=$PARTITION"* && "$DRY" == *"--requeue"* ]] ||
  fail "--dry-run printed no sbatch script: $DRY"
expect_eq "jobs after --dry-run" "" "$(squeue -h -o %i)"

SUB=$(hl slurm submit-workers --partition "$PARTITION" --nodes 1 --gpus-per-node 0 --cpu-slots 2 \
  --coordinator "tcp://127.0.0.1:$HL_WORKER_PORT" --job-name hl-test --json) ||
  fail "headlab slurm submit-workers failed: $SUB"
JOB=$(jq -er '.job' <<<"$SUB") || fail "submit-workers --json printed no job: $SUB"
SCRIPT=$(jq -r '.script' <<<"$SUB")
[[ -f "$SCRIPT" ]] || fail "the sbatch script $SCRIPT does not exist"
ok "submitted Slurm job $JOB (script $SCRIPT)"
WNAME=slurm-$JOB-$NODE

# worker_ids NAME: the ids of alive workers called NAME, one per line.
worker_ids() {
  curl -sf --max-time 2 "$HL_URL/api/v1/workers" |
    jq -r --arg n "$1" '.[] | select(.name == $n and .state == "alive") | .id'
}
named_alive() { [[ -n "$(worker_ids "$WNAME")" ]]; }
wait_until 40 "worker $WNAME registered" named_alive
WID1=$(worker_ids "$WNAME")
SLURM_WORKER_PIDS+=("$(curl -sf "$HL_URL/api/v1/workers" | jq -r --arg i "$WID1" '.[] | select(.id == $i) | .pid')")
ok "worker $WNAME joined (id $WID1)"

GRID=$HL_TMP/grid.jsonc
cat >"$GRID" <<'EOF'
{"name": "slurm", "base": {"kind": "noop", "noop": {"duration_ms": 2500, "metrics": 10}},
 "axes": {"seed": [1, 2, 3, 4, 5, 6]}, "max_attempts": 3}
EOF
EXP=$(submit "$GRID") || exit 1
ok "experiment $EXP submitted (6 runs)"

# --- 2. Requeue the allocation mid-grid --------------------------------------------------
running_attempts() {
  local n
  n=$(db "SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id
          WHERE r.experiment_id = $EXP AND a.status = 'running' AND a.worker_id = '$WID1'")
  (( n > 0 )) && echo "$n"
}
wait_until 30 "attempts running on $WNAME" running_attempts
INTERRUPTED=$(db "SELECT group_concat(a.run_id || '/' || a.attempt, ' ') FROM attempts a
  JOIN runs r ON r.id = a.run_id WHERE r.experiment_id = $EXP AND a.status = 'running'")
scontrol requeue "$JOB" || fail "scontrol requeue $JOB failed"
say "requeued job $JOB while attempts $INTERRUPTED ran on it"
# Slurm holds a requeued job back (BeginTime) for a while; release it now.
first_gone() { [[ -z "$(worker_ids "$WNAME" | grep -Fx "$WID1")" ]]; }
wait_until 30 "the first worker of $WNAME to leave" first_gone
ok "the requeued allocation's worker left the coordinator"
for ref in $INTERRUPTED; do
  expect_eq "status of interrupted attempt $ref" lost \
    "$(db "SELECT status FROM attempts WHERE run_id = ${ref%/*} AND attempt = ${ref#*/}")"
done
pending() { [[ "$(squeue -h -j "$JOB" -o %T 2>/dev/null)" == PENDING ]]; }
wait_until 30 "job $JOB pending again" pending
scontrol update JobId="$JOB" StartTime=now || fail "cannot release job $JOB"
rejoined() { [[ -n "$(worker_ids "$WNAME" | grep -vFx "$WID1")" ]]; }
wait_until 40 "worker $WNAME rejoined from the restarted allocation" rejoined
WID2=$(worker_ids "$WNAME" | grep -vFx "$WID1" | head -n 1)
SLURM_WORKER_PIDS+=("$(curl -sf "$HL_URL/api/v1/workers" | jq -r --arg i "$WID2" '.[] | select(.id == $i) | .pid')")
expect_eq "Restarts of job $JOB" 1 "$(scontrol show job "$JOB" | grep -o 'Restarts=[0-9]*' | cut -d= -f2)"
ok "worker $WNAME rejoined (id $WID2)"

wait_grid "$EXP" 60
check_one_success_per_run "$EXP" 6
expect_eq "summary rows of experiment $EXP from succeeded attempts (all of them)" \
  "$(db "SELECT count(*) FROM summaries s JOIN runs r ON r.id = s.run_id WHERE r.experiment_id = $EXP")" \
  "$(db "SELECT count(*) FROM summaries s JOIN runs r ON r.id = s.run_id
         JOIN attempts a ON a.run_id = s.run_id AND a.attempt = s.attempt
         WHERE r.experiment_id = $EXP AND a.status = 'succeeded'")"
for ref in $INTERRUPTED; do
  expect_eq "succeeded attempts of interrupted run ${ref%/*}" 1 \
    "$(db "SELECT count(*) FROM attempts WHERE run_id = ${ref%/*} AND status = 'succeeded'")"
  expect_eq "interrupted run ${ref%/*} finished on the rejoined worker" "$WID2" \
    "$(db "SELECT worker_id FROM attempts WHERE run_id = ${ref%/*} AND status = 'succeeded'")"
done

# --- 3. scancel -----------------------------------------------------------------------
scancel "$JOB" || fail "scancel $JOB failed"
none_alive() { [[ -z "$(worker_ids "$WNAME")" ]]; }
wait_until 30 "worker $WNAME gone after scancel" none_alive
job_gone() { [[ -z "$(squeue -h -j "$JOB" 2>/dev/null)" ]]; }
wait_until 30 "job $JOB gone from squeue" job_gone
ok "scancel ended job $JOB and its worker left"
grep -q "headlab workers: job $JOB (restart 1)" "$HL_TMP/data/slurm/slurm-$JOB.out" ||
  fail "the job output does not show the restarted allocation"
