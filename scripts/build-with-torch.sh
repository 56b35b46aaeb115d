#!/usr/bin/env bash
# Builds and installs tune against the PyTorch of your Python (a pip or conda `torch`, CUDA or
# CPU): the way to get tune's CUDA trainer on a GPU workstation, without root and without a CUDA
# compiler. It reads torch's headers and libraries from its package directory (and, for a CUDA
# torch, the CUDA runtime its nvidia-* wheels or conda environment ship: tune compiles no CUDA
# code), says plainly what is missing, then configures, builds, checks that the CUDA trainer
# came on, and installs.
#
#   scripts/build-with-torch.sh [--python PY] [--prefix DIR] [--build-dir DIR] [--jobs N]
#                               [--fetch-deps] [--cmake-arg ARG]... [--no-install] [--check]
#                               [--test [-- CTEST_ARGS]]
#
#   --python PY      the Python whose torch to build against (default: python3 in PATH, so an
#                    activated virtual environment's)
#   --prefix DIR     where to install (default: ~/.local: tune in ~/.local/bin)
#   --build-dir DIR  default: build-torch in the source tree
#   --jobs N         parallel compile jobs (default: the number of cores)
#   --fetch-deps     build the small libraries (fmt, spdlog, CLI11, nlohmann_json, SQLite, ...)
#                    from pinned sources instead of the system's (-DTUNE_FETCH_DEPS=ON: no root
#                    needed; downloads them unless FETCHCONTENT_SOURCE_DIR_<NAME> is set)
#   --cmake-arg ARG  one more argument for CMake's configure (repeatable), e.g.
#                    -DFETCHCONTENT_SOURCE_DIR_FMT=/src/fmt to take a fetched library from a
#                    local copy
#   --no-install     build only
#   --check          only find torch and report; build nothing
#   --test           build the test suite too and run it (ctest) instead of installing; the
#                    arguments after -- go to ctest (e.g. -- -L torch). With --python
#                    .venv/bin/python this is how tune is checked against PyPI's torch.
#
# The other dependencies are the system's packages (scripts/install-deps.sh --build installs them
# on Debian 12/13 and Ubuntu 22.04/24.04; README, "Platforms") or, with --fetch-deps, built here.
# torch must use the C++11 ABI (PyPI's wheels from torch 2.7 on, conda's); an older wheel is
# refused with that explanation.
set -euo pipefail

src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=python3
prefix="$HOME/.local"
build="$src_dir/build-torch"
jobs=$(nproc)
install=1
check_only=0
run_tests=0
fetch_deps=0
extra_cmake_args=()
ctest_args=()

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
die() { echo "build-with-torch.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --python) python=${2:?--python needs a value}; shift 2 ;;
    --prefix) prefix=${2:?--prefix needs a value}; shift 2 ;;
    --build-dir) build=${2:?--build-dir needs a value}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a value}; shift 2 ;;
    --fetch-deps) fetch_deps=1; shift ;;
    --cmake-arg) extra_cmake_args+=("${2:?--cmake-arg needs a value}"); shift 2 ;;
    --no-install) install=0; shift ;;
    --check) check_only=1; shift ;;
    --test) run_tests=1; install=0; shift ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build-with-torch.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

# 1. torch: its version, CUDA, headers and C++ ABI.
command -v "$python" >/dev/null 2>&1 || die "no Python '$python' (pass --python /path/to/python)"
# An absolute path that keeps a virtual environment's own python (its link is not resolved).
python_path=$(command -v "$python")
python_path=$(cd "$(dirname "$python_path")" && pwd)/$(basename "$python_path")
# What Python prints on stderr (a warning such as torch's "Failed to initialize NumPy") stays
# out of the answer.
python_err=$(mktemp)
trap 'rm -f "$python_err"' EXIT
if ! info=$("$python" - <<'EOF' 2>"$python_err"
import os, torch
root = os.path.dirname(torch.__file__)
print(torch.__version__)
print(torch.version.cuda or "")
print(root)
print("yes" if os.path.isfile(os.path.join(root, "include", "torch", "csrc", "api", "include",
                                           "torch", "torch.h")) else "no")
print(int(bool(torch._C._GLIBCXX_USE_CXX11_ABI)))
EOF
); then
  die "$python cannot import torch: install PyTorch there first (pip install torch, the CUDA
build for your driver: https://pytorch.org/get-started/locally/), or pass --python. Python said:
$(tail -n 1 "$python_err")"
fi
{ read -r torch_version; read -r torch_cuda; read -r torch_root; read -r has_headers;
  read -r torch_abi; } <<< "$info" || true
[ -n "${torch_abi:-}" ] || die "$python did not answer as a Python with torch does (it printed:
${info:-nothing})"
[ "$has_headers" = yes ] ||
  die "torch $torch_version in $python has no C++ headers ($torch_root/include): use a pip or
conda torch (Debian's python3-torch has them only with libtorch-dev)"
if [ -n "$torch_cuda" ]; then torch_label="CUDA $torch_cuda"; else torch_label="CPU only"; fi
echo "torch $torch_version ($torch_label) in $torch_root"

# 2. The C++ ABI: PyPI's wheels before torch 2.7 use the old one, which tune's other libraries
# (the system's fmt, spdlog, CLI11) cannot link with; CMake stops on it too, this says it sooner.
[ "$torch_abi" = 1 ] ||
  die "torch $torch_version was built with the old C++ ABI (_GLIBCXX_USE_CXX11_ABI=0), as PyPI's
wheels were before torch 2.7; tune's libraries use the C++11 ABI. Install torch 2.7 or later
(pip install 'torch>=2.7') or a conda torch into $python"
[ "$check_only" = 1 ] && exit 0

# 3. Configure, build, check.
command -v cmake >/dev/null 2>&1 || die "cmake is missing: scripts/install-deps.sh --build installs it and the other dependencies"
cmake_args=(-S "$src_dir" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
            "-DTUNE_TORCH_PYTHON=$python_path" "-DCMAKE_INSTALL_PREFIX=$prefix"
            "-DTUNE_BUILD_TESTS=$([ "$run_tests" = 1 ] && echo ON || echo OFF)"
            -DTUNE_BUILD_BENCH=OFF)
[ "$fetch_deps" = 1 ] && cmake_args+=(-DTUNE_FETCH_DEPS=ON)
cmake_args+=(${extra_cmake_args[@]+"${extra_cmake_args[@]}"})
command -v ccache >/dev/null 2>&1 && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
mkdir -p "$build"
echo "cmake ${cmake_args[*]}"
if ! cmake "${cmake_args[@]}" > "$build/configure.log" 2>&1; then
  tail -n 30 "$build/configure.log" >&2
  die "configure failed ($build/configure.log); a missing library: scripts/install-deps.sh --build
installs them (root), or pass --fetch-deps to build the small ones here"
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
  (cd "$build" && TUNE_VENV_PYTHON="$python_path" ctest --output-on-failure -j "$jobs" \
     "${ctest_args[@]}")
  exit $?
fi

# 4. Install.
if [ "$install" = 1 ]; then
  cmake --install "$build" --strip
  echo "Installed: $prefix/bin/tune (man tune; tune python-path prints the Python module's directory)"
  case ":$PATH:" in *":$prefix/bin:"*) ;; *) echo "Add $prefix/bin to your PATH." ;; esac
fi
