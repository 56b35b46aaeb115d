#!/usr/bin/env bash
# Issue 6: builds and runs the memory estimator's latency benchmark (bench/estimator_speed.cpp)
# and writes the table, with the machine and its load, to the
# <!-- estimator-speed:begin --> ... <!-- estimator-speed:end --> section of docs/benchmarks.md.
# Under a minute on 2 cores; needs no LibTorch.
#
# Usage: bench/run_estimator_speed.sh [--calls N] [--searches N]
# Environment: BUILD_DIR (default build), JOBS (build jobs, default 2), PYTHON (default
# /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
RESULTS="$BUILD_DIR/bench-results"

cmake -S . -B "$BUILD_DIR" -DTUNE_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target tune_bench_estimator_speed
mkdir -p "$RESULTS"
loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
"$BUILD_DIR/bench/tune_bench_estimator_speed" "$@" >"$RESULTS/estimator_speed.jsonl"
"$PYTHON" bench/format_estimator_speed.py --results "$RESULTS/estimator_speed.jsonl" \
  --doc docs/benchmarks.md --loadavg "$loadavg" --loadavg-after "$(cut -d' ' -f1-3 /proc/loadavg)"
