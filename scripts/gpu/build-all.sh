#!/usr/bin/env bash
# build-all.sh: the main build (`make`'s CMake configuration) on the device machine, where it
# finds the CUDA toolkit and the bundled PyTorch 2.11's LibTorch and so builds the GPU path,
# then the `gpu` ctest label — the one command every GPU test runs under. All it adds is the
# prefix of Debian packages the device lacks. Logs and a summary go to $OUT (or
# /tmp/headlab-gpu-out).
#
#   scripts/gpu/build-all.sh [--cpu] [--bench] [--train-bench] [--quick] [--no-test] [-j N]
#                            [-R REGEX] [--target T]...
#     --cpu      also run `ctest -L cpu` (after the gpu label)
#     --bench    then the kernels' dev bench, the SDPA / FlexAttention comparison and the
#                measured-choice layer bench (docs/BENCHMARKS.md, kernels)
#     --train-bench  then training throughput against PyTorch eager and torch.compile
#                (scripts/gpu/bench_train.py; bench_train.{json,log} in $OUT)
#     --quick    shorter bench (with --bench)
#     --no-test  build only
#     -R REGEX   run only the tests whose names match (ctest -R), within the labels
#     --target T build only T (repeatable; default: everything, i.e. headlab,
#                libheadlab_exec.so and every test binary)
#
# Run it from the repository root through the device tool with the Debian packages carried:
#   here, once:  scripts/gpu/fetch-debs.sh          (fills the git-ignored .debs/)
#   device:      run(command="scripts/gpu/build-all.sh", carry=[".debs"], timeout_s=300)
# The .debs (ZeroMQ, SQLite, nlohmann-json, Boost headers, Catch2; docs/DESIGN.md, "Machines")
# are unpacked with `dpkg -x` into a prefix (never into /). cmake and
# ninja come from /opt/torch/.venv/bin, LibTorch from the python3 there (CMakeLists.txt). The build
# directory is build-gpu/ (git-ignored), so a second call on a still-warm machine rebuilds
# incrementally. Exit 0 iff the build and every test run passed, 1 otherwise, 2 bad usage.
set -uo pipefail

usage() { sed -n '2,28p' "$0"; }
run_cpu=0 bench=0 train_bench=0 quick="" run_tests=1 jobs="" regex="" targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) run_cpu=1 ;;
    --bench) bench=1 ;;
    --train-bench) train_bench=1 ;;
    --quick) quick="--quick" ;;
    --no-test) run_tests=0 ;;
    -j) shift; jobs="${1:-}" ;;
    -R) shift; regex="${1:-}" ;;
    --target) shift; targets+=("${1:-}") ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build-all.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:-/tmp/headlab-gpu-out}"
deps="${HEADLAB_DEPS:-/tmp/headlab-deps}"
build="${HEADLAB_GPU_BUILD:-$root/build-gpu}"
jobs="${jobs:-$(nproc)}"
mkdir -p "$out" "$deps"
summary="$out/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
status=0
t_start=$(date +%s)
phase() { note "$1: $2 ($(( $(date +%s) - t_start )) s since start)"; }

export PATH="/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH"
# The work tree's content by its git tree hash (the device's .git can be an older snapshot:
# `git log -1` there may name another commit; scripts/gpu/tree-id.sh says how to map it).
{ nvidia-smi; nvcc --version; cmake --version; date -u; "$root/scripts/gpu/tree-id.sh" "$root"; } \
  > "$out/machine.txt" 2>&1
note "work tree: $("$root/scripts/gpu/tree-id.sh" "$root" 2>&1)"

# 1. The Debian packages, unpacked into a prefix.
debs=("$root"/.debs/*.deb)
if [ ! -e "${debs[0]}" ]; then
  note "no .debs/ in $root: run scripts/gpu/fetch-debs.sh here and carry [\".debs\"]"
  exit 1
fi
for f in "${debs[@]}"; do dpkg -x "$f" "$deps" || { note "dpkg -x $f failed"; exit 1; }; done
lib="$deps/usr/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Debian's libzmq.pc names the -dev .pc files of its static dependencies (Requires.private),
# which pkg-config insists on finding even for a shared link: the prefix gets its own.
mkdir -p "$deps/pc"
cat > "$deps/pc/libzmq.pc" <<PC
Name: libzmq
Description: ZeroMQ (headlab build-all.sh, from Debian's libzmq3-dev)
Version: $(sed -n 's/^Version: //p' "$lib/pkgconfig/libzmq.pc")
Libs: -L/usr/lib/x86_64-linux-gnu -lzmq
Cflags: -I/usr/include
PC
export PKG_CONFIG_PATH="$deps/pc:$lib/pkgconfig:$deps/usr/share/pkgconfig"
export PKG_CONFIG_LIBDIR="$PKG_CONFIG_PATH"
export PKG_CONFIG_SYSROOT_DIR="$deps"  # the .pc files say prefix=/usr
pkg_config="$(command -v pkg-config || echo "$deps/usr/bin/pkgconf")"

# 2. The main build's own configuration (CMakeLists.txt: CUDA toolkit + the CUDA PyTorch of
# the python3 on PATH -> the GPU path, LibTorch and NCCL's header from that PyTorch), with only
# the prefix of step 1 added. HEADLAB_TORCH_CMAKE names another LibTorch CMake prefix.
torch_opts=()
[ -n "${HEADLAB_TORCH_CMAKE:-}" ] && torch_opts=(-DHEADLAB_TORCH_PREFIX="$HEADLAB_TORCH_CMAKE")
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
if ! cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${torch_opts[@]}" \
      -DCMAKE_PREFIX_PATH="$deps/usr" \
      -DPKG_CONFIG_EXECUTABLE="$pkg_config" \
      -DBoost_DIR="$lib/cmake/Boost-1.74.0" \
      -DSQLite3_INCLUDE_DIR="$deps/usr/include" -DSQLite3_LIBRARY="$lib/libsqlite3.so" \
      -DOPENSSL_ROOT_DIR="$deps/usr" -DOPENSSL_INCLUDE_DIR="$deps/usr/include" \
      -DOPENSSL_CRYPTO_LIBRARY="$lib/libcrypto.so" \
      -DCPPZMQ_INCLUDE_DIR="$deps/usr/include" \
      -DCMAKE_CXX_FLAGS="-isystem $deps/usr/include" \
      -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$lib" \
      -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$lib" \
      -DCMAKE_MODULE_LINKER_FLAGS="-Wl,-rpath-link,$lib" > "$out/build.log" 2>&1; then
  tail -30 "$out/build.log"
  phase configure FAILED
  exit 1
fi
grep -E "headlab: LibTorch" "$out/build.log" | tee -a "$summary"
if ! grep -q "CUDA LibTorch ON" "$out/build.log"; then
  note "the configuration did not find a CUDA toolkit and a CUDA LibTorch (see build.log)"
  exit 1
fi
phase configure ok

# 3. Build (keep going past a failing target so one module's error hides no other's).
target_args=()
for t in "${targets[@]}"; do target_args+=(--target "$t"); done
keep_going=()
[ "${#generator[@]}" -gt 0 ] && keep_going=(-- -k 0)
if ! cmake --build "$build" -j "$jobs" "${target_args[@]}" "${keep_going[@]}" >> "$out/build.log" 2>&1; then
  grep -E "error:|Error |FAILED:" "$out/build.log" | head -40
  phase build "FAILED (see build.log; tests of the targets that built still run)"
  status=1
else
  phase build ok
fi

# 4. Tests: the gpu label (and the cpu label with --cpu).
run_label() {
  local label="$1" args=(-L "$1" --timeout 900)
  if [ "$1" = gpu ]; then args+=(-V); else args+=(--output-on-failure); fi  # gpu tests print figures
  [ -n "$regex" ] && args+=(-R "$regex")
  (cd "$build" && ctest "${args[@]}") > "$out/ctest-$label.log" 2>&1
  local rc=$?
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout|No tests were found" "$out/ctest-$label.log" | tee -a "$summary"
  phase "ctest -L $label" "$([ $rc = 0 ] && echo ok || echo FAILED)"
  return $rc
}
if [ "$run_tests" = 1 ]; then
  run_label gpu || status=1
  if [ "$run_cpu" = 1 ]; then run_label cpu || status=1; fi
fi

# 5. The kernels' dev bench and the SDPA comparison, from this build.
if [ "$bench" = 1 ]; then
  bench_bin="$build/kernels/hybrid_attention_bench"
  capi="$build/kernels/libheadlab_kernels_capi.so"
  if [ -x "$bench_bin" ] && [ -f "$capi" ]; then
    "$bench_bin" $quick > "$out/bench.log" 2>&1 || status=1
    cat "$out/bench.log"
    PYTHONUNBUFFERED=1 python3 "$root/scripts/gpu/bench_vs_sdpa.py" --lib "$capi" $quick \
      > "$out/sdpa.log" 2>&1 || status=1
    cat "$out/sdpa.log"
    # The whole layer as training runs it (train.attention = auto's measured choice).
    layer_bench="$build/kernels/kernels_exec_fused_test"
    if [ -x "$layer_bench" ]; then
      "$layer_bench" "[layer_bench]" > "$out/layer_bench.log" 2>&1 || status=1
      grep -E "^d=|passed|failed" "$out/layer_bench.log"
    fi
    phase bench "$([ $status = 0 ] && echo ok || echo FAILED)"
  else
    phase bench "not built"
    status=1
  fi
fi
# 6. Training throughput against PyTorch, through `headlab exec` of this build.
if [ "$train_bench" = 1 ]; then
  HEADLAB_DEPS="$deps" PYTHONUNBUFFERED=1 python3 "$root/scripts/gpu/bench_train.py" \
    --headlab "$build/headlab" > "$out/bench_train.log" 2>&1 || status=1
  tail -14 "$out/bench_train.log"
  phase train-bench "$([ $status = 0 ] && echo ok || echo FAILED)"
fi
note "build-all.sh: exit $status"
exit $status
