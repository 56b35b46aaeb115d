#!/usr/bin/env bash
# Issues 3 and 19: builds the TPE benchmarks, runs tune beside Optuna 4.9 (the vendored copy,
# when found) and Debian's Optuna 3.1 (suggest latency, then optimisation quality) and writes
# the tables, with the machine and its load, to the <!-- tpe:begin --> ... <!-- tpe:end -->
# section of docs/benchmarks.md. Runs itself under `nice`.
#
# Usage: bench/run_tpe_bench.sh          (from anywhere; about an hour on 2 busy cores)
# Environment:
#   BUILD_DIR  build directory (default build)          JOBS    build jobs (default 1)
#   PYTHON     Debian's Python (default /usr/bin/python3, which must import optuna 3.1)
#   SEEDS      seeds per problem (default 20)           TRIALS  trials per run (default 200)
#   FUNCTIONS  problems (default: all of tpe_quality.py) MODES  independent,multivariate
#   PROCS      parallel Optuna processes (default 2; keep it at most the number of cores)
#   NICE       niceness (default 10)
#   OPTUNA_FROM  earlier tpe_quality.json files, comma-separated (e.g. tpe_quality.py runs with
#              --tune-samplers ""): its Optuna runs are reused when they are the same runs
#              (problems, modes, seeds, trials, startup points), so the peers can run first;
#              OPTUNA_SUBSET_OK=1 takes the ones it holds even if some are missing
#   OPTUNA     Optuna versions of the quality comparison (default 4.9,3.1)
#   SPEED_FROM an earlier tpe_speed.json to report instead of timing again
#   BASELINE_BIN, BASELINE_LABEL  a tune_bench_tpe_speed built from another commit and what it
#              is, to time beside this one ("tune before" column; optional)
# Optuna 4.9 is looked for at $TUNE_OPTUNA49_PATH or ../shared/vendor/optuna-4.9 next to the
# source tree; without it its columns are skipped with a message.
set -euo pipefail

if [ -z "${TUNE_BENCH_NICED:-}" ]; then
  export TUNE_BENCH_NICED=1
  exec nice -n "${NICE:-10}" "$0" "$@"
fi

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-1}
PYTHON=${PYTHON:-/usr/bin/python3}
SEEDS=${SEEDS:-20}
TRIALS=${TRIALS:-200}
PROCS=${PROCS:-2}
MODES=${MODES:-independent,multivariate}
RESULTS="$BUILD_DIR/bench-results"

start=$(date +%s)
loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
"$PYTHON" -c 'import optuna' || { echo "error: $PYTHON cannot import optuna" >&2; exit 1; }

cmake -S . -B "$BUILD_DIR" -DTUNE_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target tune_bench_tpe_speed tune_bench_tpe_quality
mkdir -p "$RESULTS"

echo "== suggest latency (tune, then Optuna 4.9 and 3.1)" >&2
baseline=()
if [ -n "${BASELINE_BIN:-}" ]; then
  baseline=(--baseline-binary "$BASELINE_BIN" --baseline-label "${BASELINE_LABEL:-}")
fi
if [ -n "${SPEED_FROM:-}" ]; then
  echo "(taken from $SPEED_FROM)" >&2
  [ "$SPEED_FROM" -ef "$RESULTS/tpe_speed.json" ] || cp "$SPEED_FROM" "$RESULTS/tpe_speed.json"
else
  "$PYTHON" bench/tpe_speed.py --tune-binary "$BUILD_DIR/bench/tune_bench_tpe_speed" \
    --modes "$MODES" "${baseline[@]}" --out "$RESULTS/tpe_speed.json"
fi

echo "== optimisation quality (parity check, tune, then Optuna 4.9 and 3.1)" >&2
functions=()
if [ -n "${FUNCTIONS:-}" ]; then functions=(--functions "$FUNCTIONS"); fi
if [ -n "${OPTUNA_FROM:-}" ]; then functions+=(--optuna-from "$OPTUNA_FROM"); fi
if [ -n "${OPTUNA_SUBSET_OK:-}" ]; then functions+=(--optuna-subset-ok); fi
"$PYTHON" bench/tpe_quality.py --tune-binary "$BUILD_DIR/bench/tune_bench_tpe_quality" \
  --seeds "$SEEDS" --trials "$TRIALS" --modes "$MODES" --jobs "$PROCS" "${functions[@]}" \
  --optuna "${OPTUNA:-4.9,3.1}" \
  --out "$RESULTS/tpe_quality.json"

end=$(date +%s)
"$PYTHON" bench/format_results.py --speed "$RESULTS/tpe_speed.json" \
  --quality "$RESULTS/tpe_quality.json" --doc docs/benchmarks.md --build-dir "$BUILD_DIR" \
  --total-seconds $((end - start)) --loadavg "$loadavg" --speed-from "${SPEED_FROM:-}" \
  --loadavg-end "$(cut -d' ' -f1-3 /proc/loadavg)" >/dev/null
echo "== wrote docs/benchmarks.md ($((end - start)) s; raw results in $RESULTS)" >&2
