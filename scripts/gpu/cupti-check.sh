#!/usr/bin/env bash
# cupti-check.sh: on the device machine, the measurement library's gpu tests through the main
# build (scripts/gpu/build-all.sh, only these targets): the cuBLAS GEMM calibration of the
# tensor-core FLOP metric and the known FP32 kernel count
# (payload/measure/gpu_tests/measure_gpu_test.cu). The JSON summary and logs go to $OUT (or
# /tmp/headlab-gpu-out).
#
#   scripts/gpu/cupti-check.sh [--flops] [--help]   (from the repository root; carry .debs)
#     --flops  also flops_exec_gpu_test: the flops run kind end to end on CUDA
set -uo pipefail
targets=(--target measure_gpu_test)
regex='^measure_gpu_test$'
case "${1:-}" in
  -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
  --flops) targets+=(--target flops_exec_gpu_test); regex='^(measure|flops_exec)_gpu_test$' ;;
  "") ;;
  *) echo "cupti-check.sh: unknown argument: $1" >&2; exit 2 ;;
esac
export HEADLAB_MEASURE_OUT="${OUT:-/tmp/headlab-gpu-out}"  # measure_gpu_test's JSON summary
exec "$(dirname "$0")/build-all.sh" "${targets[@]}" -R "$regex"
