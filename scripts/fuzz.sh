#!/usr/bin/env bash
# scripts/fuzz.sh: builds the libFuzzer targets (fuzz/: json, grid, wire, http) with clang
# and runs each for a bounded number of inputs, starting from its seed corpus
# (fuzz/corpus/NAME, never written to; new inputs go to BUILD/corpus/NAME).
#
#   scripts/fuzz.sh [--runs N] [--max-seconds S] [--build DIR] [--target NAME]... [--build-only]
#
#   --runs N          inputs per target (default 20000; the documented long run: 1000000)
#   --max-seconds S   stop a target after S seconds even if N inputs were not reached
#                     (default: no limit); the line printed says how many were tried
#   --build DIR       build directory (default build/fuzz)
#   --target NAME     only this target (json, grid, wire, http); repeatable
#
# Prints one line per target: "NAME_fuzz: N inputs tried, 0 crashes, S s, corpus C". A
# crash (a sanitizer report, an uncaught exception, a broken invariant, an input slower than
# 10 s) stops that target, saves the input under BUILD/crashes/NAME/ and makes the script
# exit 1. Exit 77 when clang or libFuzzer is missing (the test suite then skips).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=20000
MAX_SECONDS=0
BUILD=$ROOT/build/fuzz
TARGETS=()
BUILD_ONLY=0
while (($#)); do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --max-seconds) MAX_SECONDS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --target) TARGETS+=("$2"); shift 2 ;;
    --build-only) BUILD_ONLY=1; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/fuzz.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
((${#TARGETS[@]})) || TARGETS=(json grid wire http)

CLANGXX=$(command -v clang++ || true)
CLANG=$(command -v clang || true)
if [[ -z "$CLANGXX" || -z "$CLANG" ]]; then
  echo "scripts/fuzz.sh: clang is not installed (apt-get install clang): fuzz targets skipped" >&2
  exit 77
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
     "$CLANGXX" -x c++ -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  echo "scripts/fuzz.sh: $CLANGXX cannot link libFuzzer (-fsanitize=fuzzer): fuzz targets skipped" >&2
  exit 77
fi

export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
mkdir -p "$BUILD"
# A folder configured from fuzz/ alone (before the fuzz part joined the main build) starts over.
if [[ -f "$BUILD/CMakeCache.txt" ]] &&
   ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$ROOT" "$BUILD/CMakeCache.txt"; then
  rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles"
fi
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -DHEADLAB_ONLY=fuzz \
    -DCMAKE_C_COMPILER="$CLANG" -DCMAKE_CXX_COMPILER="$CLANGXX" \
    >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log" >&2; exit 1; }
fi
names=()
for t in "${TARGETS[@]}"; do names+=("${t}_fuzz"); done
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target "${names[@]}" >"$BUILD/build.log" 2>&1 ||
  { tail -50 "$BUILD/build.log" >&2; echo "scripts/fuzz.sh: build failed ($BUILD/build.log)" >&2; exit 1; }
((BUILD_ONLY)) && exit 0

failed=0
for t in "${TARGETS[@]}"; do
  work=$BUILD/corpus/$t crashes=$BUILD/crashes/$t log=$BUILD/$t.log
  mkdir -p "$work" "$crashes"
  args=(-runs="$RUNS" -max_len=8192 -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 -print_final_stats=1
        -artifact_prefix="$crashes/" "$work" "$ROOT/fuzz/corpus/$t")
  ((MAX_SECONDS > 0)) && args+=(-max_total_time="$MAX_SECONDS")
  start=$(date +%s)
  ASAN_OPTIONS=detect_leaks=1 "$BUILD/fuzz/${t}_fuzz" "${args[@]}" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  tried=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  corpus=$(find "$work" -type f | wc -l)
  if ((rc == 0)); then
    echo "${t}_fuzz: ${tried:-?} inputs tried, 0 crashes, ${secs} s, corpus $corpus"
  else
    failed=1
    echo "${t}_fuzz: CRASH after ${tried:-?} inputs (exit $rc), ${secs} s; input in $crashes/, log $log"
    grep -m5 -E 'ERROR|SUMMARY|invariant|terminate|runtime error' "$log" | sed 's/^/    /'
  fi
done
exit "$failed"
