#!/usr/bin/env bash
# Issues 17 and 32: builds tune and runs the packing benchmark (bench/packing_bench.py): the same
# list of configurations of the criteria space brought to COMPLETE on one simulated 24 GiB card
# that shares compute and fails late, by fixed PAR = 1-4 independent workers (a configuration
# that ran out of memory re-enqueued, at most 5 attempts) and by `tune --jobs auto`; three runs
# (three list seeds), then TPE for --jobs auto and the best PAR. Writes the <!-- packing -->
# section of docs/benchmarks.md: the constants, each run's table, the medians, the verdict.
#
# Usage: bench/run_packing_bench.sh   (about 30 minutes: time runs 150x faster than on the card)
# Environment: BUILD_DIR (default build), JOBS (build jobs, default 2), TRIALS (default 300),
# SEEDS (default 1,2,3), TIME_SCALE (real seconds per simulated second, default 1/150),
# MODES (default 1,2,3,4,auto), VARIANTS (first run only, default
# auto-memory,auto-floor1,auto-noshrink; "" for none), TPE_TRIALS (default 150; 0: none).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" >/dev/null
cmake --build "$BUILD_DIR" -j"${JOBS:-2}" --target tune tune_train
/usr/bin/python3 bench/packing_bench.py --tune "$BUILD_DIR/tune" --trials "${TRIALS:-300}" \
  --seeds "${SEEDS:-1,2,3}" --time-scale "${TIME_SCALE:-0.0066667}" --modes "${MODES:-1,2,3,4,auto}" \
  --variants "${VARIANTS-auto-memory,auto-floor1,auto-noshrink}" --tpe-trials "${TPE_TRIALS:-150}"
