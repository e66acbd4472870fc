# harness-env.sh: sourced by the scripts that drive a coordinator and workers through
# tests/lib.sh on the device (measure-grids.sh, reproduce.sh). Sets ROOT (the checkout);
# puts the Debian tools and libraries that build-all.sh unpacked into its prefix on PATH
# and LD_LIBRARY_PATH (sqlite3 CLI for the harness, libzmq & co. for headlab); exports
# HEADLAB_SOURCE_DIR and HEADLAB_BIN (default: build-gpu/headlab as build-all.sh leaves
# it, else build/headlab).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEPS=${HEADLAB_DEPS:-/tmp/headlab-deps}
if [[ -x $DEPS/usr/bin/sqlite3 ]]; then
  export PATH=$DEPS/usr/bin:$PATH
  export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export HEADLAB_SOURCE_DIR=$ROOT
if [[ -z ${HEADLAB_BIN:-} ]]; then
  HEADLAB_BIN=$ROOT/build-gpu/headlab
  [[ -x $HEADLAB_BIN ]] || HEADLAB_BIN=$ROOT/build/headlab
fi
export HEADLAB_BIN
