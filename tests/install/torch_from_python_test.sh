#!/usr/bin/env bash
# -DTUNE_TORCH_PYTHON=PY (cmake/TuneTorchFromPython.cmake), configured for real with no CUDA
# compiler on the PATH: a pip torch (tune's Python environment's CUDA wheel) is taken from its own
# directories with the CUDA memory backend on; Debian's python3-torch (whose torch/include and
# torch/lib are libtorch-dev's) as a CPU LibTorch; a Python that does not exist is refused with a
# message naming what is wrong.
#
# Usage: torch_from_python_test.sh SOURCE_DIR VENV_PYTHON. Exit 77 (skipped) when neither Python
# has a torch to try.
set -uo pipefail
src=$1
venv_python=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
ran=0
# Only the system's directories: CMake, the compiler and ccache are there, no nvcc.
clean_path=/usr/bin:/bin
if env PATH=$clean_path sh -c 'command -v nvcc' >/dev/null 2>&1; then
  echo "note: an nvcc is in $clean_path; the configure below does not use it"
fi

configure() { # configure NAME PYTHON: 0 when CMake succeeded; its output in $work/NAME.log
  env PATH=$clean_path cmake -S "$src" -B "$work/$1" -DTUNE_TORCH_PYTHON="$2" \
    -DTUNE_BUILD_TESTS=OFF -DTUNE_BUILD_BENCH=OFF > "$work/$1.log" 2>&1
}
expect_in_log() { # expect_in_log NAME TEXT
  if grep -qF -- "$2" "$work/$1.log"; then
    echo "ok: $1: '$2'"
  else
    echo "FAIL: $1: expected '$2' in CMake's output:"; tail -n 20 "$work/$1.log"
    failures=$((failures + 1))
  fi
}

# 1. A pip torch: found without its CMake package; with CUDA, the memory backend on.
if "$venv_python" -c 'import torch' >/dev/null 2>&1; then
  ran=1
  cuda=$("$venv_python" -c 'import torch; print(torch.version.cuda or "")')
  if configure wheel "$venv_python"; then
    expect_in_log wheel "without its CMake package (no CUDA compiler needed)"
    expect_in_log wheel "building tune_torch (the 'train' objective)"
    if [ -n "$cuda" ]; then
      expect_in_log wheel "CUDA $cuda, runtime "
      expect_in_log wheel "tune_torch: CUDA memory backend on"
    fi
  elif grep -q "installing it failed" "$work/wheel.log"; then
    # The wheel's runtime headers lack crt/ and PyPI could not be reached to add them.
    grep -A3 "installing it failed" "$work/wheel.log"
    echo "skip: the CUDA wheel's crt headers could not be installed (no PyPI?)"
  else
    echo "FAIL: wheel: configure failed:"; tail -n 30 "$work/wheel.log"; failures=$((failures + 1))
  fi
else
  echo "skip: $venv_python has no torch (make venv makes it)"
fi

# 2. Debian's python3-torch: the same LibTorch as libtorch-dev's, CPU only.
if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  ran=1
  if configure debian /usr/bin/python3; then
    expect_in_log debian "(CPU only) in "
    expect_in_log debian "building tune_torch (the 'train' objective)"
  else
    expect_in_log debian "has no C++ headers"  # python3-torch without libtorch-dev's headers
  fi
else
  echo "skip: /usr/bin/python3 has no torch (python3-torch)"
fi

# 3. A Python that does not exist.
if configure missing "$work/no-such-python"; then
  echo "FAIL: missing: configure succeeded"; failures=$((failures + 1))
else
  expect_in_log missing "cannot import torch"
fi

[ "$ran" = 1 ] || exit 77
echo "failures: $failures"
[ "$failures" -eq 0 ]
