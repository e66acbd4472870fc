#!/usr/bin/env bash
# fetch-debs.sh: downloads (here, on a Debian 12 machine with network) the .debs that the
# whole-project GPU build needs on the device machine into the git-ignored .debs/ of the
# repository root; the device call then carries them (`run` with carry [".debs"]) and
# scripts/gpu/build-all.sh unpacks them with `dpkg -x`. The list is docs/DESIGN.md's "Machines"
# (ZeroMQ, SQLite, nlohmann-json, Boost headers, Catch2) plus pkgconf
# and OpenSSL's libcrypto (common/sha256.h).
#
#   scripts/gpu/fetch-debs.sh [--help]
set -euo pipefail
case "${1:-}" in
  -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
  "") ;;
  *) echo "fetch-debs.sh: unknown argument: $1" >&2; exit 2 ;;
esac
packages=(libzmq5 libzmq3-dev cppzmq-dev libsodium23 libpgm-5.3-0 libnorm1 libbsd0 libmd0
          nlohmann-json3-dev libboost1.74-dev libsqlite3-0 libsqlite3-dev catch2
          sqlite3 libssl3 libssl-dev
          pkgconf-bin libpkgconf3)  # pkg-config, used only where the device has none
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$root/.debs"
cd "$root/.debs"
missing=()
for p in "${packages[@]}"; do
  ls "${p}"_*.deb > /dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get download "${missing[@]}"
fi
echo "$(ls "$root"/.debs/*.deb | wc -l) packages, $(du -sh "$root/.debs" | cut -f1) in $root/.debs"
