#!/usr/bin/env bash
# check-format.sh: checks C++ and CUDA sources (.cc .h .cu .cuh) against .clang-format.
# By default only the files that differ from a base revision (committed since the merge-base,
# staged, unstaged or untracked); --all checks every tracked source (the ctest source_format,
# so `make test` and CI fail on a formatting regression).
#
#   scripts/check-format.sh [--base REV] [--all] [--lines] [--fix]
#     --base REV  compare with the merge-base of REV and HEAD (default: main)
#     --all       every tracked source file, not only the changed ones
#     --lines     only the changed lines of the changed files (git clang-format), for files
#                 that predate the reformat
#     --fix       rewrite the files (or lines) in place instead of reporting them
#
# Prints each file that is not formatted, with its diff. Exit 0 iff everything checked is
# formatted, 1 if something is not, 2 on bad usage or a missing clang-format.
set -uo pipefail
base=main all=0 lines=0 fix=0
while [ $# -gt 0 ]; do
  case "$1" in
    --base) shift; base="${1:-}"; [ -n "$base" ] || { echo "check-format.sh: --base needs a revision" >&2; exit 2; } ;;
    --all) all=1 ;;
    --lines) lines=1 ;;
    --fix) fix=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "check-format.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
cd "$(dirname "$0")/.." || exit 2
clang_format="${CLANG_FORMAT:-clang-format}"
command -v "$clang_format" > /dev/null ||
  { echo "check-format.sh: $clang_format not found (apt-get install clang-format)" >&2; exit 2; }
pattern='\.(cc|h|cu|cuh)$'

if [ "$lines" = 1 ]; then
  merge_base=$(git merge-base "$base" HEAD) || { echo "check-format.sh: no merge-base with $base" >&2; exit 2; }
  if [ "$fix" = 1 ]; then
    git clang-format --binary "$(command -v "$clang_format")" --extensions cc,h,cu,cuh "$merge_base"
    exit $?
  fi
  out=$(git clang-format --binary "$(command -v "$clang_format")" --extensions cc,h,cu,cuh \
        --diff "$merge_base" 2>&1)
  case "$out" in
    ""|"no modified files to format"|"clang-format did not modify any files") exit 0 ;;
    *) echo "$out"; exit 1 ;;
  esac
fi

if [ "$all" = 1 ]; then
  files=$(git ls-files | grep -E "$pattern")
else
  merge_base=$(git merge-base "$base" HEAD) || { echo "check-format.sh: no merge-base with $base" >&2; exit 2; }
  files=$( { git diff --name-only --diff-filter=ACMR "$merge_base";
             git ls-files --others --exclude-standard; } | grep -E "$pattern" | sort -u)
fi
status=0
for f in $files; do
  [ -f "$f" ] || continue
  if [ "$fix" = 1 ]; then
    "$clang_format" -i --style=file "$f" || status=1
  elif ! "$clang_format" --style=file "$f" | diff -u --label "$f" --label "$f (formatted)" "$f" -; then
    status=1
  fi
done
exit $status
