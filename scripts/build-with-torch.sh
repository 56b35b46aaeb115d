#!/usr/bin/env bash
# Builds and installs tune against the PyTorch of your Python (a pip or conda `torch`, CUDA or
# CPU): the way to get tune's CUDA trainer on a GPU workstation. It finds torch's CMake package,
# the CUDA compiler that matches torch's CUDA, says plainly what is missing, then configures,
# builds, checks that the CUDA trainer came on, and installs.
#
#   scripts/build-with-torch.sh [--python PY] [--prefix DIR] [--build-dir DIR] [--jobs N]
#                               [--no-install] [--check] [--test [-- CTEST_ARGS]]
#
#   --python PY      the Python whose torch to build against (default: python3 in PATH, so an
#                    activated virtual environment's)
#   --prefix DIR     where to install (default: ~/.local: tune in ~/.local/bin)
#   --build-dir DIR  default: build-torch in the source tree
#   --jobs N         parallel compile jobs (default: the number of cores)
#   --no-install     build only
#   --check          only find torch and nvcc and report; build nothing
#   --test           build the test suite too and run it (ctest) instead of installing; the
#                    arguments after -- go to ctest (e.g. -- -L torch). With --python
#                    .venv/bin/python this is how tune is checked against PyPI's torch.
#
# The other dependencies (CLI11, fmt, spdlog, SQLite, libpq, ICU, SentencePiece, ...) are the
# system's packages: scripts/install-deps.sh --no-torch installs them on Debian 12 and 13. Tested
# on Debian 12; other distributions are not (docs/gpu.md says what is known).
set -euo pipefail

src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=python3
prefix="$HOME/.local"
build="$src_dir/build-torch"
jobs=$(nproc)
install=1
check_only=0
run_tests=0
ctest_args=()

usage() { sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { echo "build-with-torch.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --python) python=${2:?--python needs a value}; shift 2 ;;
    --prefix) prefix=${2:?--prefix needs a value}; shift 2 ;;
    --build-dir) build=${2:?--build-dir needs a value}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a value}; shift 2 ;;
    --no-install) install=0; shift ;;
    --check) check_only=1; shift ;;
    --test) run_tests=1; install=0; shift ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build-with-torch.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

# 1. torch and its CMake package.
command -v "$python" >/dev/null 2>&1 || die "no Python '$python' (pass --python /path/to/python)"
if ! info=$("$python" - <<'EOF' 2>&1
import os, torch, torch.utils
prefix = torch.utils.cmake_prefix_path
print(torch.__version__)
print(torch.version.cuda or "")
print(prefix)
print("yes" if os.path.isfile(os.path.join(prefix, "Torch", "TorchConfig.cmake")) else "no")
EOF
); then
  die "$python cannot import torch: install PyTorch there first (pip install torch, the CUDA
build for your driver: https://pytorch.org/get-started/locally/), or pass --python. Python said:
$(echo "$info" | tail -n 1)"
fi
{ read -r torch_version; read -r torch_cuda; read -r torch_prefix; read -r has_cmake; } <<< "$info"
[ "$has_cmake" = yes ] ||
  die "torch $torch_version in $python has no CMake package ($torch_prefix/Torch/TorchConfig.cmake
is missing): Debian's python3-torch ships none; use a pip or conda torch"
if [ -n "$torch_cuda" ]; then torch_label="CUDA $torch_cuda"; else torch_label="CPU only"; fi
echo "torch $torch_version ($torch_label); CMake package in $torch_prefix"

# 2. A CUDA compiler whose major version is torch's (LibTorch's CMake package calls
# find_package(CUDAToolkit); a toolkit of another major version does not link with it).
nvcc=""
if [ -n "$torch_cuda" ]; then
  want_major=${torch_cuda%%.*}
  candidates=()
  command -v nvcc >/dev/null 2>&1 && candidates+=("$(command -v nvcc)")
  [ -n "${CUDA_HOME:-}" ] && candidates+=("$CUDA_HOME/bin/nvcc")
  candidates+=("/usr/local/cuda-$torch_cuda/bin/nvcc")
  for d in /usr/local/cuda-"$want_major".*/bin/nvcc /usr/local/cuda/bin/nvcc; do candidates+=("$d"); done
  found=""
  for c in "${candidates[@]}"; do
    [ -x "$c" ] || continue
    v=$("$c" --version | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p')
    found+="  $c: CUDA ${v:-unknown}"$'\n'
    if [ "${v%%.*}" = "$want_major" ]; then nvcc=$c; break; fi
  done
  if [ -z "$nvcc" ]; then
    die "torch was built with CUDA $torch_cuda, and no CUDA $want_major.x compiler (nvcc) was found.
Install the CUDA Toolkit $torch_cuda (NVIDIA's cuda-toolkit-${torch_cuda/./-} package, or conda's
cuda-nvcc), or set CUDA_HOME to it. Looked at:
${found:-  (no nvcc in PATH, \$CUDA_HOME, /usr/local/cuda*)}"
  fi
  echo "nvcc: $nvcc ($("$nvcc" --version | sed -n 's/.*release \([^,]*\).*/\1/p'))"
fi
[ "$check_only" = 1 ] && exit 0

# 3. Configure, build, check.
command -v cmake >/dev/null 2>&1 || die "cmake is missing: scripts/install-deps.sh --no-torch installs it and the other dependencies"
cmake_args=(-S "$src_dir" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
            "-DCMAKE_PREFIX_PATH=$torch_prefix" "-DCMAKE_INSTALL_PREFIX=$prefix"
            "-DTUNE_BUILD_TESTS=$([ "$run_tests" = 1 ] && echo ON || echo OFF)"
            -DTUNE_BUILD_BENCH=OFF)
if [ -n "$nvcc" ]; then
  cmake_args+=("-DCUDAToolkit_ROOT=$(dirname "$(dirname "$nvcc")")" "-DCMAKE_CUDA_COMPILER=$nvcc")
  # tune compiles no CUDA source; without a list, torch's CMake package compiles and runs a probe
  # for the machine's GPUs, which fails where CMake does not know the nvcc's C++20 flags (CMake
  # 3.25 with CUDA 13) or where there is no GPU.
  export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-7.5;8.0;8.6;8.9;9.0}"
fi
command -v ccache >/dev/null 2>&1 && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
mkdir -p "$build"
echo "cmake ${cmake_args[*]}"
if ! cmake "${cmake_args[@]}" > "$build/configure.log" 2>&1; then
  tail -n 30 "$build/configure.log" >&2
  die "configure failed ($build/configure.log); a missing package: scripts/install-deps.sh --no-torch"
fi
grep -q 'building tune_torch' "$build/configure.log" ||
  die "CMake did not use torch's LibTorch ($build/configure.log)"
if [ -n "$torch_cuda" ] && ! grep -q 'CUDA memory backend on' "$build/configure.log"; then
  die "torch has CUDA $torch_cuda, but tune's CUDA trainer is off ($build/configure.log)"
fi
cmake --build "$build" -j "$jobs"
"$build/tune" --version

# 3b. The test suite against this torch.
if [ "$run_tests" = 1 ]; then
  venv_python=$(cd "$(dirname "$python")" 2>/dev/null && pwd)/$(basename "$python")
  (cd "$build" && TUNE_VENV_PYTHON="$venv_python" ctest --output-on-failure -j "$jobs" \
     "${ctest_args[@]}")
  exit $?
fi

# 4. Install.
if [ "$install" = 1 ]; then
  cmake --install "$build" --strip
  echo "Installed: $prefix/bin/tune (man tune; tune python-path prints the Python module's directory)"
  case ":$PATH:" in *":$prefix/bin:"*) ;; *) echo "Add $prefix/bin to your PATH." ;; esac
fi
