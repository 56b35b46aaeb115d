#!/usr/bin/env bash
# Issue 7: builds tune and runs the memory guard's acceptance studies on CPU (the counting
# allocator as a simulated card), writing the <!-- guard:begin --> section of docs/benchmarks.md.
# About 10-20 minutes on 2 cores.
#
# Usage: bench/run_guard_bench.sh [--trials N]
# Environment: BUILD_DIR (default build), JOBS (default 2), PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
cmake -S . -B "$BUILD_DIR" >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target tune tune_torch
"$PYTHON" scripts/prepare-fortunes.py --out "$BUILD_DIR/data/fortunes" >/dev/null
"$PYTHON" bench/guard_acceptance.py --tune "$BUILD_DIR/tune" --fortunes "$BUILD_DIR/data/fortunes" \
  --work "$BUILD_DIR/bench-guard" --doc docs/benchmarks.md "$@"
