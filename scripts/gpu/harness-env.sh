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

# collect_grid NAME EXP LIMIT_S: waits up to LIMIT_S for experiment EXP (tests/lib.sh,
# sourced after this file, has wait_grid, db, hl and say), writes its `headlab results` to
# $RESULTS/NAME.txt and NAME.json and prints its comparisons; a run that did not succeed
# sets status=1.
collect_grid() {
  local name=$1 exp=$2 limit=$3 bad
  wait_grid "$exp" "$limit"
  bad=$(db "SELECT count(*) FROM runs WHERE experiment_id = $exp AND status != 'succeeded'")
  (( bad == 0 )) || { say "$name: $bad runs did not succeed"; status=1; }
  hl results "$exp" > "$RESULTS/$name.txt"
  hl results "$exp" --json > "$RESULTS/$name.json"
  say "$name: experiment $exp -> $RESULTS/$name.{txt,json}"
  sed -n '/^comparisons/,$p' "$RESULTS/$name.txt"
}
