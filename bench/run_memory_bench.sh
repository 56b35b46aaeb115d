#!/usr/bin/env bash
# Issue 6: builds tune and compares the memory estimator with the measured CPU peak over a grid
# of configurations, writing the table to the <!-- memory:begin --> section of
# docs/benchmarks.md. About 10 minutes on 2 cores; needs LibTorch (libtune_torch.so) for --measure.
#
# Usage: bench/run_memory_bench.sh [--quick]
# Environment: BUILD_DIR (default build), JOBS (default 2), PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
cmake -S . -B "$BUILD_DIR" >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target tune tune_torch
"$PYTHON" bench/memory_accuracy.py --tune "$BUILD_DIR/tune" --doc docs/benchmarks.md "$@"
