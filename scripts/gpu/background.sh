#!/usr/bin/env bash
# background.sh: runs a long device job across several device-tool calls. One call may run
# at most 10 minutes, but a machine stays warm (files and processes kept) while the next
# call follows within its idle time; a job started detached in one call is waited for in
# the next, and each call copies what the job has written so far back through $OUT.
#
#   scripts/gpu/background.sh start NAME CMD [ARG...]
#       starts CMD detached (its own session), stdout+stderr to /tmp/headlab-bg/NAME/log,
#       with JOB_OUT and OUT both /tmp/headlab-bg/NAME/out for its results (a call's own
#       $OUT is gone once that call returns); refuses a NAME that is still running
#   scripts/gpu/background.sh wait NAME SECONDS
#       waits until the job ends or SECONDS pass, then copies its log and out/ to
#       $OUT/NAME/ and prints the log's tail. Exit: the job's status when it ended, 3 while
#       it still runs (call `wait` again in the next call), 2 for bad usage or no such job.
#
# Example (scripts/gpu/reproduce.sh after the build, then more waiting):
#   run(command="scripts/gpu/build-all.sh --no-test --target headlab &&
#                scripts/gpu/background.sh start repro scripts/gpu/reproduce.sh &&
#                scripts/gpu/background.sh wait repro 380", ...)
#   run(command="scripts/gpu/background.sh wait repro 590")
set -uo pipefail
base=/tmp/headlab-bg
usage() { sed -n '2,20p' "$0"; }
[[ $# -ge 2 ]] || { usage >&2; exit 2; }
verb=$1 name=$2
shift 2
[[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "background.sh: bad NAME '$name'" >&2; exit 2; }
dir=$base/$name

running() { [[ -f $dir/pid ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null && [[ ! -f $dir/rc ]]; }

case "$verb" in
  start)
    [[ $# -ge 1 ]] || { usage >&2; exit 2; }
    if running; then echo "background.sh: job $name is still running" >&2; exit 2; fi
    rm -rf "$dir"
    mkdir -p "$dir/out"
    export JOB_OUT=$dir/out OUT=$dir/out
    # The job writes its exit status last, so `wait` can tell "ended" from "killed".
    setsid bash -c '"$@" > "$0/log" 2>&1; echo $? > "$0/rc"' "$dir" "$@" < /dev/null &
    echo $! > "$dir/pid"
    echo "background.sh: started $name (pid $!): $*"
    ;;
  wait)
    [[ $# -eq 1 && $1 =~ ^[0-9]+$ ]] || { usage >&2; exit 2; }
    [[ -d $dir ]] || { echo "background.sh: no job $name" >&2; exit 2; }
    deadline=$(( $(date +%s) + $1 ))
    while running && (( $(date +%s) < deadline )); do sleep 2; done
    if [[ -n ${OUT:-} ]]; then
      mkdir -p "$OUT/$name"
      cp "$dir/log" "$OUT/$name/log" 2>/dev/null
      cp -r "$dir/out/." "$OUT/$name/" 2>/dev/null
    fi
    tail -n 40 "$dir/log" 2>/dev/null
    if [[ -f $dir/rc ]]; then
      rc=$(cat "$dir/rc")
      echo "background.sh: $name ended with status $rc"
      exit "$rc"
    fi
    if running; then echo "background.sh: $name still running"; exit 3; fi
    echo "background.sh: $name ended without a status (killed?)"
    exit 1
    ;;
  *) usage >&2; exit 2 ;;
esac
