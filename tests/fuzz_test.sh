#!/usr/bin/env bash
# Fuzz targets (docs/BENCHMARKS.md, "Service"): builds fuzz/ with clang and runs each parser's libFuzzer target
# (grid files, JSON, HTTP requests, worker messages) for a bounded number of inputs from
# its seed corpus; any crash, sanitizer report or broken invariant fails the test. Skipped
# (exit 77) where clang/libFuzzer is missing. The long run (10^6 inputs per target) is
# `scripts/fuzz.sh --runs 1000000`; its figures are in docs/BENCHMARKS.md.
set -uo pipefail
ROOT=${HEADLAB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD_DIR=$(dirname "${HEADLAB_BIN:-$ROOT/build/headlab}")
exec "$ROOT/scripts/fuzz.sh" --runs "${HEADLAB_FUZZ_RUNS:-20000}" --max-seconds 90 \
  --build "$BUILD_DIR/fuzz"
