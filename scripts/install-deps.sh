#!/usr/bin/env bash
# Installs the Debian packages headlab needs that are missing on this machine.
# Idempotent: prints nothing and exits 0 when everything is present.
set -euo pipefail
PKGS=(build-essential cmake ccache pkg-config git
      libzmq3-dev cppzmq-dev libsqlite3-dev sqlite3 libboost-dev nlohmann-json3-dev
      catch2 libtorch-dev jq curl procps psmisc chromium
      # SHA-256 of artifacts, checkpoints and configs (common/sha256.h): OpenSSL's libcrypto.
      libssl-dev
      # The source format check (scripts/check-format.sh, ctest source_format).
      clang-format
      # Debian's LibTorch calls the generic libblas.so.3; without this it gets the netlib
      # reference BLAS and `headlab exec` trains ~4x slower (serial: no thread oversubscription
      # on shared CPUs, deterministic results).
      libopenblas0-serial
      # Data-parallel runs on the CPU (payload/exec/dist.h): c10d's Gloo headers.
      libgloo-dev
      # tests/slurm_test.sh starts its own slurmctld + slurmd on loopback.
      slurmctld slurmd slurm-client)
missing=()
# The dashboard build needs node and npm; any install of them will do (the machine image
# may carry its own), so only fall back to Debian's when the commands are absent.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: run as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
