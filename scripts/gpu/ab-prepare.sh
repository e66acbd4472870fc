#!/usr/bin/env bash
# ab-prepare.sh: here, before a device call: writes build-ab/<branch>/ (git-ignored) with the
# CMakeLists.txt, cmake/, kernels/, scripts/ and common/testing/ of each named branch or commit and a REVISION file, for
# scripts/gpu/ab-kernels.sh on the device (whose copy of the repository holds HEAD's history only).
#   scripts/gpu/ab-prepare.sh REV...      then carry ["build-ab"]
set -euo pipefail
[ $# -gt 0 ] || { sed -n '2,5p' "$0"; exit 2; }
root="$(cd "$(dirname "$0")/../.." && pwd)"
for r in "$@"; do
  d="$root/build-ab/$(echo "$r" | tr '/' '-')"
  rm -rf "$d"; mkdir -p "$d"
  git -C "$root" archive "$r" CMakeLists.txt cmake kernels scripts common/testing | tar -x -C "$d"
  git -C "$root" log -1 --oneline "$r" > "$d/REVISION"
  echo "$d: $(cat "$d/REVISION")"
done
