#!/usr/bin/env bash
# cupti-check.sh: on the device machine, builds payload/measure standalone (CUDA, CUPTI,
# cuBLAS; no LibTorch) and runs its gpu test: the cuBLAS GEMM calibration of the tensor-core
# FLOP metric and the known FP32 kernel count (payload/measure/gpu_tests/measure_gpu_test.cu).
# The JSON summary and logs go to $OUT (or /tmp/headlab-cupti-out).
#
#   scripts/gpu/cupti-check.sh [--flops] [--help]   (from the repository root; carry .debs)
#     --flops  also build flops_exec_gpu_test against the machine's LibTorch (the flops run
#              kind over the few exec sources it needs; dense attention path) and run it
#
# Needs nlohmann-json from the carried .debs (scripts/gpu/fetch-debs.sh) and cmake from
# /opt/torch/.venv/bin there. scripts/gpu/build-all.sh runs the same test with the whole repo.
set -uo pipefail
flops=0
case "${1:-}" in
  -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
  --flops) flops=1 ;;
  "") ;;
  *) echo "cupti-check.sh: unknown argument: $1" >&2; exit 2 ;;
esac
out="${OUT:-/tmp/headlab-cupti-out}"
mkdir -p "$out"
export PATH="/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH"
deps=/tmp/headlab-cupti-deps
mkdir -p "$deps"
for d in .debs/nlohmann-json3-dev_*.deb .debs/catch2_*.deb; do
  [ -f "$d" ] && dpkg -x "$d" "$deps"
done
build=/tmp/headlab-cupti-build
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
prefix="$deps/usr"
torch_opts=()
if [ "$flops" = 1 ]; then
  prefix="$prefix;$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  torch_opts=(-DHEADLAB_MEASURE_WITH_TORCH=ON)
fi
if ! { cmake -S payload/measure -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_PREFIX_PATH="$prefix" "${torch_opts[@]}" &&
       cmake --build "$build" -j "$(nproc)"; } > "$out/cupti-build.log" 2>&1; then
  tail -40 "$out/cupti-build.log"
  echo "BUILD FAILED"
  exit 1
fi
echo "build ok"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; } > "$out/cupti-machine.txt" 2>&1
HEADLAB_MEASURE_OUT="$out" "$build/measure_gpu_test" 2>&1 | tee "$out/cupti-gpu-test.log"
status="${PIPESTATUS[0]}"
if [ "$flops" = 1 ]; then
  (cd "$out" && "$build/flops_exec_gpu_test" -s) > "$out/flops-gpu-test.log" 2>&1 || status=1
  grep -E "passed|failed|FAILED|status|step/|total|attention" "$out/flops-gpu-test.log" | tail -60
fi
exit "$status"
