#!/usr/bin/env bash
# scripts/demo.sh: the `make demo` / `make up` entry point.
#
#   scripts/demo.sh         start headlab (coordinator + one local worker) in .headlab/demo,
#                           submit experiments/demo.jsonc, wait with a progress bar, print
#                           the results; exits 0 only if every run of the grid succeeded.
#   scripts/demo.sh --up    only start headlab in .headlab/demo and print the dashboard URL.
#   scripts/demo.sh --rerun run the demo grid again instead of reusing finished runs.
#
# A headlab left running by an earlier demo is stopped first (it may be an older build).
# The service keeps running afterwards so the dashboard can be browsed; stop it with
# `build/headlab down --data-dir .headlab/demo`.
#
# Environment: BUILD (build dir, default build), HEADLAB_BIN (default $BUILD/headlab),
# HEADLAB_DEMO_DIR (default .headlab/demo), HEADLAB_DEMO_GRID (default experiments/demo.jsonc),
# HEADLAB_DEMO_HTTP / HEADLAB_DEMO_WORKERS (`up --http ADDR:PORT` / `--workers tcp://ADDR:PORT`;
# default: headlab's 127.0.0.1:8321 and tcp://127.0.0.1:8322), HEADLAB_DEMO_SLOTS (the local
# worker's slots, default nproc).
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
HL=${HEADLAB_BIN:-${BUILD:-build}/headlab}
DIR=${HEADLAB_DEMO_DIR:-.headlab/demo}
GRID=${HEADLAB_DEMO_GRID:-experiments/demo.jsonc}

up_only=0
submit_args=()
for arg in "$@"; do
  case "$arg" in
    --up) up_only=1 ;;
    --rerun) submit_args+=(--rerun) ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "demo: $*" >&2; exit 1; }
[[ -x "$HL" ]] || die "$HL is not built; run 'make' first"
command -v jq >/dev/null || die "jq is needed (apt-get install jq)"
[[ $up_only == 1 || -f "$GRID" ]] || die "grid file $GRID not found"

# A previous `up` in the same dir: stop it, so this demo runs the binary just built.
if [[ -f "$DIR/up.json" ]]; then
  echo "demo: stopping the headlab left running in $DIR"
  "$HL" down --data-dir "$DIR" || die "could not stop the previous headlab in $DIR"
fi

# One run per core: the demo grid's runs use one thread each (train.threads 1).
up_args=(--detach --data-dir "$DIR" --worker-slots "${HEADLAB_DEMO_SLOTS:-$(nproc)}")
[[ -n "${HEADLAB_DEMO_HTTP:-}" ]] && up_args+=(--http "$HEADLAB_DEMO_HTTP")
[[ -n "${HEADLAB_DEMO_WORKERS:-}" ]] && up_args+=(--workers "$HEADLAB_DEMO_WORKERS")
"$HL" up "${up_args[@]}" || die "headlab up failed (logs in $DIR/*.log)"
URL=$(jq -r '.url // empty' "$DIR/up.json" 2>/dev/null)
[[ -n "$URL" ]] || die "$DIR/up.json does not name the URL"
URL=${URL%/}
STOP="$HL down --data-dir $DIR"

if [[ $up_only == 1 ]]; then
  echo
  echo "dashboard: $URL/"
  echo "submit:    $HL submit $GRID --url $URL --data-dir $DIR"
  echo "stop:      $STOP"
  exit 0
fi

hl() { "$HL" "$1" --url "$URL" --data-dir "$DIR" "${@:2}"; }

echo
echo "demo: submitting $GRID"
OUT=$(hl submit "$GRID" --json "${submit_args[@]}") || die "headlab submit failed"
EXP=$(jq -er '.experiment' <<<"$OUT") || die "headlab submit printed no experiment id: $OUT"
echo "demo: experiment $EXP with $(jq -r '.runs' <<<"$OUT") runs (dashboard: $URL/)"

hl wait "$EXP"
WAIT_RC=$?

echo
hl results "$EXP" || die "headlab results failed"

RUNS=$(hl runs "$EXP" --json) || die "headlab runs failed"
TOTAL=$(jq 'length' <<<"$RUNS")
GOOD=$(jq '[.[] | select(.status == "succeeded")] | length' <<<"$RUNS")
echo
echo "dashboard: $URL/   (experiment $EXP)"
echo "stop:      $STOP"
if [[ $WAIT_RC != 0 || $TOTAL == 0 || $GOOD != "$TOTAL" ]]; then
  die "$GOOD of $TOTAL runs succeeded (headlab wait exited $WAIT_RC); see $HL runs $EXP --url $URL"
fi
echo "demo: all $TOTAL runs succeeded"
