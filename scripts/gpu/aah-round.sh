#!/usr/bin/env bash
# aah-round.sh: one device round of AAH-v3's training speed, in the order that yields the
# headline first when device time is short: build the whole repository, the `kind: train`
# grid through a coordinator and worker (scripts/gpu/train-grids.sh PROTOCOL with the given
# --set arguments), then the GPU tests of the paths it runs on (exec_fused: the local heads'
# FlashAttention-2 path against the dense reference; aah_gpu: the observation; the kernels'
# primitives; HEADLAB_GPU_TESTS, a ctest regex, replaces the list) and the layer bench at
# the 1b shape (scripts/gpu/aah_layer_bench.py). Logs and results go to $OUT (or
# /tmp/headlab-train-out).
#
#   scripts/gpu/aah-round.sh [aah-1b | aah-diag | saf-1b]... [--set KEY=VALUE]...
#
# aah-1b (the default) is the claim's grid; aah-diag takes the 4K run apart (full attention,
# the controller alone, Full adaptive: experiments/measure/aah_train_1b_diag_gpu.jsonc);
# saf-1b (train-grids.sh) may share the round's build. The grids run in the order given.
#
# Device (through scripts/gpu/background.sh when it may outlast one call):
#   run(command="scripts/gpu/background.sh start aah scripts/gpu/aah-round.sh
#                  --set model.context=4096 && scripts/gpu/background.sh wait aah 560",
#       carry=[".debs", ".corpus-src"], timeout_s=600)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:-/tmp/headlab-train-out}"
mkdir -p "$out"
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,20p' "$0"; exit 0; }
protocols=()
while [[ ${1:-} == aah-1b || ${1:-} == aah-diag || ${1:-} == saf-1b ]]; do protocols+=("$1"); shift; done
(( ${#protocols[@]} )) || protocols=(aah-1b)
status=0
"$root/scripts/gpu/train-round.sh" "${protocols[@]}" "$@" || status=1
"$root/scripts/gpu/build-all.sh" -R "${HEADLAB_GPU_TESTS:-exec_fused|aah_gpu|primitives}" \
  > "$out/ctest-gpu.out" 2>&1 || status=1
grep -E "tests passed|tests failed|bf16 auto|Failed" "$out/ctest-gpu.out" | head -8
PYTHONUNBUFFERED=1 python3 "$root/scripts/gpu/aah_layer_bench.py" --contexts 4096 \
  --lib "$root/build-gpu/kernels/libheadlab_kernels_capi.so" > "$out/aah_layer_bench.log" 2>&1 || status=1
cat "$out/aah_layer_bench.log"
exit $status
