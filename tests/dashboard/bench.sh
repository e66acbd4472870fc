#!/usr/bin/env bash
# Dashboard speed benchmark (docs/BENCHMARKS.md, "Service"): a real coordinator
# over a database holding one experiment of 10,000 runs and 1,000,000 metric points
# (bench_populate.sql), and headless Chromium timing the experiment page until its runs
# table and first chart are drawn (bench.mjs). Not part of `make test` (it takes a minute).
# Usage: HEADLAB_BIN=build/headlab tests/dashboard/bench.sh [REPEATS]
source "$(dirname "$0")/../lib.sh"
HERE=$HEADLAB_SOURCE_DIR/tests/dashboard

source "$HERE/bench_setup.sh"
bench_setup "10^4 runs and 10^6 points" <"$HERE/bench_populate.sql"

for u in "experiments/$EXP" "experiments/$EXP/runs" "runs/$(db "SELECT min(id) FROM runs WHERE experiment_id = $EXP")/metrics?key=train.loss"; do
  curl -s -o /dev/null -w "GET /api/v1/$u: %{time_total} s, %{size_download} bytes\n" "$HL_URL/api/v1/$u"
done
node "$HERE/bench.mjs" "$HL_URL" "$EXP" "${1:-5}" || fail "bench.mjs failed"
