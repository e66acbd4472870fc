#!/usr/bin/env bash
# The dashboard at scale (docs/BENCHMARKS.md, "Dashboard at scale"): a real coordinator
# over a database holding one finished experiment of RUNS runs with POINTS train.loss
# points each (tests/dashboard/scale_populate.sql), and headless Chromium timing every page
# until usable, the longest main-thread block while loading and interacting, and the
# coordinator CPU an idle experiment tab costs (tests/dashboard/scale_bench.mjs).
# Not part of `make test` (loading 10^5 runs and 5 * 10^6 points takes minutes here).
# Usage: HEADLAB_BIN=build/headlab scripts/dashboard-bench.sh [RUNS] [POINTS] [REPEATS] [IDLE_S]
source "$(dirname "$0")/../tests/lib.sh"
HERE=$HEADLAB_SOURCE_DIR/tests/dashboard
RUNS=${1:-100000}
POINTS=${2:-50}
[[ "$RUNS" =~ ^[0-9]+$ && "$POINTS" =~ ^[0-9]+$ && "$RUNS" -ge 4 && "$POINTS" -ge 1 ]] ||
  fail "RUNS and POINTS must be whole numbers (RUNS >= 4), got '$RUNS' '$POINTS'"

source "$HERE/bench_setup.sh"
bench_setup "$RUNS runs x $POINTS points" \
  < <(sed -e "s/@RUNS@/$RUNS/g" -e "s/@POINTS@/$POINTS/g" "$HERE/scale_populate.sql")

# The first results request computes and stores them (seconds at 10^5 runs); a researcher
# opening a finished experiment finds them stored, so the bench does too.
curl -s -o /dev/null -w "GET results (first: computes, stores): %{time_total} s, %{size_download} bytes\n" \
  "$HL_URL/api/v1/experiments/$EXP/results"
sleep 2
for u in "experiments/$EXP/results" "experiments/$EXP/results?per_pair=1" "experiments/$EXP/runs" \
         "experiments/$EXP/runs?limit=100&offset=0&keys=1" "experiments/$EXP/runs?limit=100&offset=50000&sort=summary:eval.ppl" \
         "experiments/$EXP/runs?limit=100&q=seed%3D1234" "experiments/$EXP"; do
  curl -s -o /dev/null -w "GET /api/v1/$u: %{time_total} s, %{size_download} bytes\n" "$HL_URL/api/v1/$u"
done
node "$HERE/scale_bench.mjs" "$HL_URL" "$EXP" "$HL_COORD_PID" "${3:-3}" "${4:-60}" || fail "scale_bench.mjs failed"
