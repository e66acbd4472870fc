#!/usr/bin/env bash
# gpu_smoke.sh: a demo-shaped training run (200 steps of the default model) through
# `headlab exec` on CUDA and on the CPU, from the main build (scripts/gpu/build-all.sh
# --no-test --target headlab: the binary and its LibTorch plugin). Run from the repository
# root on the device machine with carry [".debs"]. Logs go to $OUT (or
# /tmp/headlab-gpu-out): build-all.sh's, then events-<device>.jsonl and stderr-<device>.txt.
# Exit 0 iff the build and both runs succeeded.
set -uo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,7p' "$0"; exit 0; }
repo="$PWD"
out="${OUT:-/tmp/headlab-gpu-out}"
build="${HEADLAB_GPU_BUILD:-$repo/build-gpu}"
mkdir -p "$out"
"$repo/scripts/gpu/build-all.sh" --no-test --target headlab || exit 1
# The carried Debian libraries build-all.sh unpacked (ZeroMQ, SQLite) for the binary.
export LD_LIBRARY_PATH="${HEADLAB_DEPS:-/tmp/headlab-deps}/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
for device in cuda cpu; do
  dir="/tmp/exec-smoke-$device"
  rm -rf "$dir"
  mkdir -p "$dir"
  cat > "$dir/manifest.json" <<JSON
{"run": 1, "attempt": 0, "out_dir": "$dir/out",
 "config": {"seed": 1, "train": {"steps": 200, "device": "$device", "threads": 1}}}
JSON
  "$build/headlab" exec "$dir/manifest.json" > "$out/events-$device.jsonl" 2> "$out/stderr-$device.txt"
  rc=$?
  echo "$device: exit $rc"
  [ "$rc" = 0 ] || status=1
  grep -E "provenance|summary" "$out/events-$device.jsonl"
done
exit $status
