#!/usr/bin/env bash
# tree-id.sh: names the content of this work tree — the git tree hash of its tracked and
# untracked, not ignored files — for the logs of a device run. The device's copy of .git can
# be an older snapshot than the work tree the device tool copied, so `git log -1` there can
# name the wrong commit; the tree hash cannot. Here, find the commit it belongs to with
#   git log --all --format='%h %T %s' | grep TREE_HASH
#
#   scripts/gpu/tree-id.sh [DIR]     # prints "tree <hash>" (default DIR: the repository root)
set -euo pipefail
dir="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
idx="$(mktemp)"
rm -f "$idx"  # git creates the index afresh
trap 'rm -f "$idx"' EXIT
GIT_INDEX_FILE="$idx" git -C "$dir" add -A
echo "tree $(GIT_INDEX_FILE="$idx" git -C "$dir" write-tree)"
