#!/usr/bin/env bash
# Issue 5: training throughput (samples/s) of tune's LibTorch trainer vs the same model in PyTorch
# eager (Debian's python3-torch), side by side in one run, for a small encoder and a
# bert-base-sized one, and writes the table, with the machine, to the
# <!-- train:begin --> ... <!-- train:end --> section of docs/benchmarks.md.
#
# Usage: bench/run_train_bench.sh        (from anywhere; about 5 minutes on 2 cores)
# Environment: BUILD_DIR (default build), JOBS (build jobs, default 2), PYTHON (default
# /usr/bin/python3, which must import torch), THREADS (default "1 2"), REPEATS (default 3: each
# side runs this many times, alternating, and the best run counts).
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-1 2}
REPEATS=${REPEATS:-3}
RESULTS="$BUILD_DIR/bench-results"
OUT="$RESULTS/train_throughput.jsonl"

"$PYTHON" -c 'import torch' ||
  { echo "error: $PYTHON cannot import torch (apt-get install python3-torch)" >&2; exit 1; }
start=$(date +%s)
loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
cmake -S . -B "$BUILD_DIR" -DTUNE_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target tune_bench_train_throughput
mkdir -p "$RESULTS"
: > "$OUT"

# name, then the model and the run: layers hidden heads intermediate vocab batch length steps
CONFIGS=(
  "small 4 256 4 1024 16384 16 64 8"
  "bert-base 12 768 12 3072 30522 8 64 3"
)
for config in "${CONFIGS[@]}"; do
  read -r name layers hidden heads inter vocab batch length steps <<<"$config"
  args=(--name "$name" --layers "$layers" --hidden "$hidden" --heads "$heads"
        --intermediate "$inter" --vocab "$vocab" --batch "$batch" --length "$length"
        --steps "$steps")
  for threads in $THREADS; do
    for ((r = 1; r <= REPEATS; r++)); do
      echo "== $name, $threads thread(s), run $r: tune, then PyTorch" >&2
      # The trainer logs its memory at the start and end of a run on stdout (spdlog's default
      # logger); keep the JSON line only.
      "$BUILD_DIR/bench/tune_bench_train_throughput" "${args[@]}" --threads "$threads" |
        grep '^{' >>"$OUT"
      "$PYTHON" bench/train_throughput.py "${args[@]}" --threads "$threads" >>"$OUT"
    done
  done
done

end=$(date +%s)
"$PYTHON" bench/format_train_results.py --results "$OUT" --doc docs/benchmarks.md \
  --python "$PYTHON" --total-seconds $((end - start)) --loadavg "$loadavg"
echo "== wrote docs/benchmarks.md ($((end - start)) s; raw results in $OUT)" >&2
