#!/usr/bin/env bash
# The GPU kit, part 2 (on the borrowed GPU machine: PyTorch with CUDA in its Python, nvcc, CMake,
# a C++ compiler; no network, no apt): builds tune against PyTorch's LibTorch and the Debian 12
# packages scripts/gpu/prepare.sh put in .gpu-kit/, runs ctest (all of it, then `ctest -L cuda`)
# and writes logs and results into RESULTS_DIR (docs/gpu.md#the-gpu-kit).
#
#   1. Unpacks every .gpu-kit/debs/*.deb into a prefix (BUILD_DIR/kit-root) with `dpkg -x` (or
#      `ar` + `tar` without dpkg). Their CMake packages locate themselves relative to their own
#      directory, so CMAKE_PREFIX_PATH=<prefix>/usr finds them; absolute symlinks and the
#      prefix= of pkg-config files are pointed into the prefix.
#   2. LibTorch: TUNE_TORCH_PREFIX if set, else `python3 -c "import torch;
#      print(torch.utils.cmake_prefix_path)"` when that holds Torch/TorchConfig.cmake, else the
#      system's LibTorch (CPU fallback: Debian 12's libtorch-dev, whose python3-torch has no CMake
#      package). With a CUDA LibTorch, tune_torch's CUDA memory backend must come on, or this fails.
#   3. Configures (Ninja when there, ccache when there), builds with all cores, and checks that
#      every dependency was found in the prefix and that libtune_torch.so links libtorch_cuda.
#   4. ctest with the prefix's libraries and programs first on LD_LIBRARY_PATH and PATH (the
#      build's RUNPATH does not reach libraries' own dependencies, such as libpq's), then
#      `ctest -L cuda`.
#
# Usage: scripts/gpu/build.sh [--configure-only] RESULTS_DIR
#   --configure-only   stop after step 3's checks of the configuration (seconds, no build)
# Environment: TUNE_TORCH_PREFIX (a CMAKE_PREFIX_PATH entry holding Torch/TorchConfig.cmake),
#   TUNE_GPU_KIT (default: .gpu-kit in the source tree), TUNE_GPU_BUILD (default: build-gpu in the
#   source tree), JOBS (default: nproc), PYTHON (default: python3), TUNE_GPU_BENCH (ON: define the
#   benchmarks' targets too; default OFF), TUNE_GPU_TARGETS (build only
#   these targets, space-separated; default: all), TUNE_GPU_CTEST_ARGS (extra ctest arguments for
#   the full run, e.g. "-R Cuda|Train"; "skip": no full run, only `ctest -L cuda`; default: none).
# RESULTS_DIR: summary.txt (the lines printed at the end), environment.txt, configure.log,
#   build.log, link.txt, ctest.log, ctest.xml (JUnit), ctest-cuda.log, tune-version.txt.
# Exit status: 0 when the build and every test passed; 1 otherwise (summary.txt says where).
set -euo pipefail

configure_only=0
[ "${1:-}" = --configure-only ] && { configure_only=1; shift; }
[ $# -eq 1 ] || { echo "usage: scripts/gpu/build.sh [--configure-only] RESULTS_DIR" >&2; exit 2; }
src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$1"
results=$(cd "$1" && pwd)
kit=${TUNE_GPU_KIT:-$src_dir/.gpu-kit}
build=${TUNE_GPU_BUILD:-$src_dir/build-gpu}
jobs=${JOBS:-$(nproc)}
python=${PYTHON:-python3}
prefix=$build/kit-root
arch=x86_64-linux-gnu
start_s=$SECONDS

exec > >(tee "$results/build.sh.log") 2>&1
log() { echo "gpu-kit: $*"; }
summary() { echo "$*" | tee -a "$results/summary.txt"; }
die() {
  summary "FAILED: $*"
  exit 1
}
: > "$results/summary.txt"

# --- 0. The machine ---------------------------------------------------------------------------
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  uname -a
  (. /etc/os-release && echo "os: $PRETTY_NAME") 2>/dev/null || true
  echo "cpus: $(nproc)"
  nvidia-smi 2>&1 || echo "nvidia-smi: not available"
  command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -n 2
  cmake --version | head -n 1
  command -v ninja >/dev/null 2>&1 && echo "ninja $(ninja --version)"
  "${CXX:-c++}" --version | head -n 1
  "$python" -c "import torch; print('python torch', torch.__version__, 'cuda', torch.version.cuda,
    'available', torch.cuda.is_available())" 2>&1 || true
} > "$results/environment.txt" 2>&1
cat "$results/environment.txt"

# --- 1. The kit's packages into the prefix -----------------------------------------------------
unpack_deb() { # $1 .deb -> $prefix, with dpkg-deb or with ar + tar
  if command -v dpkg-deb >/dev/null 2>&1; then
    dpkg-deb -x "$1" "$prefix"
    return
  fi
  local member
  member=$(ar t "$1" | grep '^data\.tar')
  case "$member" in
    *.xz) ar p "$1" "$member" | tar -xJ -C "$prefix" ;;
    *.zst) ar p "$1" "$member" | tar --zstd -x -C "$prefix" ;;
    *.gz) ar p "$1" "$member" | tar -xz -C "$prefix" ;;
    *) ar p "$1" "$member" | tar -x -C "$prefix" ;;
  esac
}

shopt -s nullglob
debs=("$kit"/debs/*.deb)
[ ${#debs[@]} -gt 0 ] || die "no .deb in $kit/debs: run scripts/gpu/prepare.sh on the Debian machine"
rm -rf "$prefix"
mkdir -p "$prefix"
for deb in "${debs[@]}"; do unpack_deb "$deb" || die "cannot unpack $deb"; done
# Absolute symlinks point into the system: into the prefix instead.
while IFS= read -r link; do
  ln -sfn "$prefix$(readlink "$link")" "$link"
done < <(find "$prefix" -type l -lname '/*')
for pc in "$prefix"/usr/lib/$arch/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc; do
  sed -i "s#^prefix=/usr\$#prefix=$prefix/usr#" "$pc"
done
log "${#debs[@]} packages unpacked into $prefix"

# --- 2. LibTorch -------------------------------------------------------------------------------
torch_prefix=${TUNE_TORCH_PREFIX:-}
if [ -z "$torch_prefix" ]; then
  candidate=$("$python" -c "import torch; print(torch.utils.cmake_prefix_path)" 2>/dev/null || true)
  if [ -n "$candidate" ] && [ -f "$candidate/Torch/TorchConfig.cmake" ]; then
    torch_prefix=$candidate
  else
    log "no CMake package in $python's torch (${candidate:-no torch}): the system's LibTorch" \
        "(CPU fallback)"
  fi
fi
torch_cuda=$("$python" -c "import torch; print(torch.version.cuda or '')" 2>/dev/null || true)
[ -n "$torch_prefix" ] || torch_cuda=""

# --- 3. Configure, build -----------------------------------------------------------------------
# nvcc where CUDA installs it, for LibTorch's CMake package (find_package(CUDAToolkit)).
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cmake_args=(-S "$src_dir" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
            "-DCMAKE_PREFIX_PATH=${torch_prefix:+$torch_prefix;}$prefix/usr"
            "-DTUNE_BUILD_BENCH=${TUNE_GPU_BENCH:-OFF}" -DTUNE_LIBTORCH2_CHECK=OFF)
command -v ninja >/dev/null 2>&1 && cmake_args+=(-G Ninja)
command -v ccache >/dev/null 2>&1 && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
rm -f "$build/CMakeCache.txt"
log "cmake ${cmake_args[*]}"
cmake "${cmake_args[@]}" > "$results/configure.log" 2>&1 ||
  { tail -n 40 "$results/configure.log"; die "configure failed (configure.log)"; }
grep -E '^-- (LibTorch|tune_torch)|LibTorch NOT found' "$results/configure.log" || true
grep -q 'building tune_torch' "$results/configure.log" ||
  die "CMake found no LibTorch (configure.log): set TUNE_TORCH_PREFIX"
if [ -n "$torch_cuda" ] && ! grep -q 'CUDA memory backend on' "$results/configure.log"; then
  die "torch has CUDA $torch_cuda, but tune_torch's CUDA backend is off (configure.log)"
fi
# tune's own CUDA kernels (fused_elementwise) need nvcc: say whether they are in.
summary "gpu-kit: $(grep -m1 -o 'tune_torch: CUDA kernels.*' "$results/configure.log" ||
  echo 'tune_torch: no line about CUDA kernels')"

# Every dependency from the prefix, not from the system.
outside=()
for var in nlohmann_json_DIR fmt_DIR spdlog_DIR CLI11_DIR GTest_DIR SQLite3_INCLUDE_DIR \
           SQLite3_LIBRARY PostgreSQL_LIBRARY_RELEASE SENTENCEPIECE_INCLUDE_DIR SENTENCEPIECE_LIBRARY; do
  value=$(sed -n "s/^$var:[A-Z]*=//p" "$build/CMakeCache.txt")
  case "$value" in "$prefix"/*) ;; *) outside+=("$var=${value:-unset}") ;; esac
done
[ ${#outside[@]} -eq 0 ] || die "found outside the kit's prefix: ${outside[*]}"
log "every dependency found in $prefix"
if [ "$configure_only" = 1 ]; then
  summary "gpu-kit: configured in $build (--configure-only)"
  exit 0
fi

# The prefix's libraries and programs first, for the build too: gtest_discover_tests runs each
# test program at build time, and the build's RUNPATH does not reach libraries' own dependencies
# (libpq's Kerberos).
export LD_LIBRARY_PATH=$prefix/usr/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$prefix/usr/bin:$PATH
log "building with $jobs jobs (build.log)"
targets=()
for t in ${TUNE_GPU_TARGETS:-}; do targets+=(--target "$t"); done
keep_going=()  # every compile error in one run, not only the first
[ -f "$build/build.ninja" ] && keep_going=(-- -k 0)
cmake --build "$build" -j "$jobs" "${targets[@]}" "${keep_going[@]}" > "$results/build.log" 2>&1 ||
  { grep -E 'error|Error' "$results/build.log" | head -n 30; die "build failed (build.log)"; }
{
  find "$build" -name link.txt -path '*tune_torch.dir*' -exec cat {} \; 2>/dev/null ||
    true
  [ -f "$build/build.ninja" ] && ninja -C "$build" -t commands tune_torch | tail -n 1
  echo "NEEDED of libtune_torch.so:"
  readelf -d "$build/libtune_torch.so" | grep NEEDED
} > "$results/link.txt" 2>&1
if [ -n "$torch_cuda" ] && ! grep -q 'libtorch_cuda' "$results/link.txt"; then
  die "libtune_torch.so does not link libtorch_cuda (link.txt)"
fi

# --- 4. Tests ----------------------------------------------------------------------------------
"$build/tune" --version > "$results/tune-version.txt" 2>&1 || true
cat "$results/tune-version.txt"
rc=0
if [ "${TUNE_GPU_CTEST_ARGS:-}" = skip ]; then
  echo "the full ctest run skipped (TUNE_GPU_CTEST_ARGS=skip)" > "$results/ctest.log"
else
  # shellcheck disable=SC2086
  (cd "$build" && ctest --output-on-failure -j "$jobs" --output-junit "$results/ctest.xml" \
     ${TUNE_GPU_CTEST_ARGS:-}) \
    > "$results/ctest.log" 2>&1 || rc=$?
fi
cuda_rc=0
(cd "$build" && ctest -L cuda --output-on-failure -V) > "$results/ctest-cuda.log" 2>&1 ||
  cuda_rc=$?

minutes=$(( (SECONDS - start_s + 30) / 60 ))
summary "gpu-kit: $(grep -m1 '^LibTorch' "$results/tune-version.txt" || echo 'LibTorch ?');" \
        "torch prefix ${torch_prefix:-system}; $minutes min"
summary "ctest: $(grep -E '^[0-9]+% tests passed' "$results/ctest.log" | tail -n 1) (exit $rc)"
summary "ctest -L cuda: $(grep -E '^[0-9]+% tests passed|No tests were found' \
  "$results/ctest-cuda.log" | tail -n 1) (exit $cuda_rc)"
grep -E 'Skipped|SKIPPED|\*\*\*Failed|Failed  ' "$results/ctest-cuda.log" | head -n 10 || true
[ "$rc" = 0 ] && [ "$cuda_rc" = 0 ]
