#!/usr/bin/env bash
# Issue 3: builds the TPE benchmarks, runs tune and Debian's Optuna 3.1 side by side (suggest
# latency, then optimisation quality) and writes the tables, with the machine, to the
# <!-- tpe:begin --> ... <!-- tpe:end --> section of docs/benchmarks.md.
#
# Usage: bench/run_tpe_bench.sh          (from anywhere; about 10 minutes on 2 cores)
# Environment: BUILD_DIR (default build), JOBS (build jobs, default 2), PYTHON (default
# /usr/bin/python3, which must import optuna), SEEDS (default 20), TRIALS (default 200).
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
SEEDS=${SEEDS:-20}
TRIALS=${TRIALS:-200}
RESULTS="$BUILD_DIR/bench-results"

start=$(date +%s)
loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
"$PYTHON" -c 'import optuna' || { echo "error: $PYTHON cannot import optuna" >&2; exit 1; }

cmake -S . -B "$BUILD_DIR" -DTUNE_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target tune_bench_tpe_speed tune_bench_tpe_quality
mkdir -p "$RESULTS"

echo "== suggest latency (tune, then Optuna)" >&2
"$PYTHON" bench/tpe_speed.py --tune-binary "$BUILD_DIR/bench/tune_bench_tpe_speed" \
  --out "$RESULTS/tpe_speed.json"

echo "== optimisation quality (parity check, tune, then Optuna)" >&2
"$PYTHON" bench/tpe_quality.py --tune-binary "$BUILD_DIR/bench/tune_bench_tpe_quality" \
  --seeds "$SEEDS" --trials "$TRIALS" --out "$RESULTS/tpe_quality.json"

end=$(date +%s)
"$PYTHON" bench/format_results.py --speed "$RESULTS/tpe_speed.json" \
  --quality "$RESULTS/tpe_quality.json" --doc docs/benchmarks.md --build-dir "$BUILD_DIR" \
  --total-seconds $((end - start)) --loadavg "$loadavg" >/dev/null
echo "== wrote docs/benchmarks.md ($((end - start)) s; raw results in $RESULTS)" >&2
