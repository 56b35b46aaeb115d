#!/usr/bin/env bash
# Issue 17: builds tune and runs the packing benchmark (bench/packing_bench.py): the criteria
# space on one simulated 24 GiB card, fixed PAR = 1-4 independent workers vs `tune --jobs auto`.
# Writes the <!-- packing --> section of docs/benchmarks.md.
#
# Usage: bench/run_packing_bench.sh      (about 30 minutes; the trials sleep, so load matters little)
# Environment: BUILD_DIR (default build), JOBS (build jobs, default 2), TRIALS (default 300),
# SECONDS_PER_PFLOP (default 60), MODES (default 1,2,3,4,auto-wait,auto;
# auto-wait: --jobs auto with memory.shrink_to_start false), SAMPLER (random or tpe, default random).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" >/dev/null
cmake --build "$BUILD_DIR" -j"${JOBS:-2}" --target tune tune_train
/usr/bin/python3 bench/packing_bench.py --tune "$BUILD_DIR/tune" --trials "${TRIALS:-300}" \
  --seconds-per-pflop "${SECONDS_PER_PFLOP:-60}" --modes "${MODES:-1,2,3,4,auto-wait,auto}" \
  --sampler "${SAMPLER:-random}"
