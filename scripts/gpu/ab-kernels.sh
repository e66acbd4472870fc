#!/usr/bin/env bash
# ab-kernels.sh: an A/B of kernel revisions in ONE device call. For each revision named, its
# CMakeLists.txt, cmake/, kernels/, scripts/ and common/testing/ get a kernels-only build (the
# main build with -DHEADLAB_ONLY=kernels, ~15 s on 16 cores; all builds in parallel); then,
# one revision at a time on the GPU: kernels_gpu_test --quick and kernels_decode_gpu_test --quick (the numerics against fp64
# references; each stopped after HEADLAB_AB_TEST_TIMEOUT seconds, default 120, so a kernel
# that hangs costs minutes, not the call, and line-buffered so its log shows where), then
# that revision's own bench. One log per revision, $OUT/<name>.log (revision, build errors,
# tests, bench: the device tool brings back at most 8 files), and $OUT/summary.txt.
#
#   scripts/gpu/ab-kernels.sh [--full-test] [--test-only] REV[:fwd|:decode]...
#     REV          `.` (this work tree as the device tool copied it; `worktree` in the logs),
#                  a commit of this repository (the device's copy of .git can be a snapshot
#                  older than the work tree), or a directory holding another revision's
#                  kernels/, scripts/, common/testing/ and a REVISION file, prepared here by
#                  scripts/gpu/ab-prepare.sh BRANCH... (carry ["build-ab"]); the last path
#                  component names it in the logs
#     REV:fwd      bench_vs_sdpa.py --fwd-only instead of every row
#     REV:decode   decode_attention_bench instead of bench_vs_sdpa.py
#     --full-test  the numerics tests without --quick (T up to 4096; minutes per revision)
#     --test-only  no bench (numerics only)
#
# Example: here `scripts/gpu/ab-prepare.sh ws-forward-3wg`, then on the device
#   run(command="scripts/gpu/ab-kernels.sh .:fwd build-ab/ws-forward-3wg:fwd", carry=["build-ab"])
# Exit 0 iff every build and every numerics test passed.
set -uo pipefail
quick="--quick"
bench=1
specs=()
for a in "$@"; do
  case "$a" in
    --full-test) quick="" ;;
    --test-only) bench=0 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "ab-kernels.sh: unknown option $a (see --help)" >&2; exit 2 ;;
    *) specs+=("$a") ;;
  esac
done
[ "${#specs[@]}" -gt 0 ] || { echo "ab-kernels.sh: name at least one revision (see --help)" >&2; exit 2; }

root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:-/tmp/headlab-gpu-out}"
work="${HEADLAB_AB_DIR:-/tmp/headlab-ab}"
mkdir -p "$out" "$work"
export PATH="/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH"
summary="$out/summary.txt"
: > "$summary"
t0=$(date +%s)
note() { echo "$* ($(( $(date +%s) - t0 )) s)" | tee -a "$summary"; }
{ nvidia-smi; nvcc --version; date -u; } > "$out/machine.txt" 2>&1

name_of() { local r="${1%%:*}"; [ "$r" = . ] && echo worktree || basename "$r"; }
rev_of() { echo "${1%%:*}"; }

# 1. Sources and builds, in parallel (a build is CPU-only).
jobs_per=$(( $(nproc) / ${#specs[@]} )); [ "$jobs_per" -ge 2 ] || jobs_per=2
pids=()
for s in "${specs[@]}"; do
  n=$(name_of "$s"); r=$(rev_of "$s"); src="$work/$n/src"
  rm -rf "$work/$n"; mkdir -p "$src"
  if [ -d "$r" ]; then  # this work tree (.), or one prepared by ab-prepare.sh
    cp -r "$r"/CMakeLists.txt "$r"/cmake "$r"/kernels "$r"/scripts "$r"/common "$src"/ || { note "$n: copy of $r failed"; exit 1; }
    if [ -f "$r/REVISION" ]; then
      cp "$r/REVISION" "$out/$n.log"
    else
      echo "work tree $r: $("$root/scripts/gpu/tree-id.sh" "$r" 2>&1)" > "$out/$n.log"
    fi
  elif git -C "$root" archive "$r" CMakeLists.txt cmake kernels scripts common/testing | tar -x -C "$src"; then
    git -C "$root" log -1 --oneline "$r" > "$out/$n.log"
  else
    note "$n: git archive $r failed"; exit 1
  fi
  ( cmake -S "$src" -B "$work/$n/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEADLAB_ONLY=kernels &&
    cmake --build "$work/$n/build" -j "$jobs_per" ) > "$work/$n/build.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!specs[@]}"; do
  n=$(name_of "${specs[$i]}")
  if wait "${pids[$i]}"; then
    note "$n: build ok"
  else
    note "$n: build FAILED"; status=1
    { echo "== build"; grep -E "error|FAILED" -A3 "$work/$n/build.log" | head -60; } >> "$out/$n.log"
  fi
done

# 2. Numerics, then the bench, one revision at a time.
for s in "${specs[@]}"; do
  n=$(name_of "$s"); b="$work/$n/build/kernels"
  [ -x "$b/kernels_gpu_test" ] || continue
  passed=1
  for t in kernels_gpu_test kernels_decode_gpu_test; do
    echo "== $t $quick" >> "$out/$n.log"
    if timeout "${HEADLAB_AB_TEST_TIMEOUT:-120}" stdbuf -oL "$b/$t" $quick >> "$out/$n.log" 2>&1; then
      note "$n: $t $quick ok"
    else
      note "$n: $t $quick FAILED (exit $?; 124: timed out)"; grep -iE "fail|mismatch|error" "$out/$n.log" | head -20
      status=1; passed=0; break
    fi
  done
  [ "$passed" = 1 ] && [ "$bench" = 1 ] || continue
  mode=""; [ "$s" != "${s#*:}" ] && mode="${s#*:}"
  if [ "$mode" = decode ]; then
    echo "== decode_attention_bench" >> "$out/$n.log"
    timeout 300 stdbuf -oL "$b/decode_attention_bench" >> "$out/$n.log" 2>&1 || status=1
    note "$n: decode_attention_bench done"
    continue
  fi
  fwd=(); [ "$mode" = fwd ] && fwd=(--fwd-only)
  echo "== bench_vs_sdpa.py ${fwd[*]}" >> "$out/$n.log"
  PYTHONUNBUFFERED=1 timeout 400 python3 "$work/$n/src/scripts/gpu/bench_vs_sdpa.py" --lib "$b/libheadlab_kernels_capi.so" \
    "${fwd[@]}" >> "$out/$n.log" 2>&1 || status=1
  note "$n: bench_vs_sdpa ${fwd[*]} done"
done
note "ab-kernels.sh: exit $status"
exit $status
