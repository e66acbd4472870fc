#!/usr/bin/env bash
# build-and-test.sh: builds the hybrid-head kernels on the device machine, runs the `gpu`
# ctest label, the dev bench and the SDPA comparison; logs go to $OUT (or /tmp/headlab-gpu-out).
#
#   scripts/gpu/build-and-test.sh [--quick] [--no-bench] [--test-only] [--ncu] [--torch-only]
#
# Run it from the repository root on the device machine (through the `run` tool). Needs
# cmake/ninja (/opt/torch/.venv/bin there), nvcc, python3 with torch for the SDPA baseline.
# Only kernels/ is built (the main build with -DHEADLAB_ONLY=kernels: nvcc alone); the whole
# repository is scripts/gpu/build-all.sh (which --torch-only runs for the LibTorch op's test).
set -uo pipefail
quick=""
bench=1
ncu_profile=0
torch_only=0
for a in "$@"; do
  case "$a" in
    --quick) quick="--quick" ;;
    --no-bench|--test-only) bench=0 ;;
    --ncu) ncu_profile=1 ;;
    --torch-only) torch_only=1 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "unknown argument: $a" >&2; exit 2 ;;
  esac
done
out="${OUT:-/tmp/headlab-gpu-out}"
mkdir -p "$out"
export PATH="/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH"
build="${HEADLAB_KERNELS_BUILD:-/tmp/headlab-kernels-build}"
status=0

{ nvidia-smi; nvcc --version; date -u; } > "$out/machine.txt" 2>&1

generator=()
command -v ninja > /dev/null && generator=(-G Ninja)

if [ "$torch_only" = 1 ]; then
  # The LibTorch op (kernels/torch/) against the machine's CUDA LibTorch, and its test (carry .debs).
  exec "$(dirname "$0")/build-all.sh" --target kernels_torch_test -R '^kernels_torch_test$'
fi
if ! { cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DHEADLAB_ONLY=kernels &&
       cmake --build "$build" -j "$(nproc)"; } > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "BUILD FAILED"
  exit 1
fi
echo "build ok"

(cd "$build" && ctest -L gpu -V --timeout 1200) > "$out/gpu-test.log" 2>&1 || status=1
grep -E "FAIL|PASSED|FAILED|tests passed|tests failed|launch failed" "$out/gpu-test.log" | tail -15

if [ "$bench" = 1 ]; then
  "$build/kernels/hybrid_attention_bench" $quick > "$out/bench.log" 2>&1 || status=1
  cat "$out/bench.log"
  PYTHONUNBUFFERED=1 python3 scripts/gpu/bench_vs_sdpa.py --lib "$build/kernels/libheadlab_kernels_capi.so" \
    $quick > "$out/sdpa.log" 2>&1 || status=1
  cat "$out/sdpa.log"
fi
if [ "$ncu_profile" = 1 ]; then
  # Hardware counters of the tensor-core kernels at the bench size (clocks left alone).
  ncu --clock-control none -k regex:'Mma(Forward|Backward)Kernel' --launch-count 3 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    "$build/kernels/hybrid_attention_bench" --profile > "$out/ncu.txt" 2>&1 || status=1
  grep -E "MmaForward|MmaBackward|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall|ERROR" "$out/ncu.txt" | head -40
fi
exit $status
