#!/usr/bin/env bash
# Issue 20: builds the decoder benchmark and compares `tune plan`'s inference estimate with the
# peak measured on CPU (prefill + decode with a KV cache, GPT-2 and Llama-style), writing the
# table to the <!-- inference:begin --> section of docs/benchmarks.md. About a minute on 2 cores
# once built; needs LibTorch (tune_torch).
#
# Usage: bench/run_decoder_memory_bench.sh [--quick]
# Environment: BUILD_DIR (default build), JOBS (default 2), PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
cmake -S . -B "$BUILD_DIR" >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target tune_bench_decoder_memory
"$PYTHON" bench/decoder_memory.py --bench "$BUILD_DIR/bench/tune_bench_decoder_memory" \
  --doc docs/benchmarks.md "$@"
