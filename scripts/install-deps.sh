#!/usr/bin/env bash
# Installs the Debian 12 packages tune needs, only those missing. Idempotent and quick when all
# are present (one dpkg-query, no network). Uses sudo when not root.
#
#   scripts/install-deps.sh              build + test dependencies, LibTorch included
#   scripts/install-deps.sh --no-torch   without LibTorch (tune then builds without the 'train'
#                                        objective; CMake says so)
#
# LibTorch is Debian's libtorch-dev 1.13 (CPU only): about 160 packages, ~125 MB to download,
# under a minute to install on the CI machine. libopenblas0-openmp replaces the reference BLAS
# that libtorch would otherwise use through libblas.so.3: matrix products get ~15x faster
# (measured: 17 s -> 1.1 s for one epoch of a small model), and it shares LibTorch's OpenMP threads.
set -euo pipefail

# libpq-dev: the PostgreSQL storage; postgresql: the throwaway server `make test` starts;
# python3-psycopg2: lets the Optuna compatibility test open tune's PostgreSQL studies.
# libicu-dev + libsentencepiece-dev: the checkpoints' tokenizers (BERT's Unicode rules, GPT-2's
# pre-tokenizer, SentencePiece models); python3-sentencepiece + python3-regex: their parity tests.
# libjs-chart.js: the charting library `tune report` inlines in its pages; chromium: the headless
# browser the report_browser test loads them in. universal-ctags: scripts/longest-functions.py
# (the memory_functions_short test).
pkgs=(cmake g++ make libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libgtest-dev
      libsqlite3-dev libpq-dev postgresql python3-optuna python3-psycopg2 fortunes ccache
      libicu-dev libsentencepiece-dev python3-sentencepiece python3-regex libjs-chart.js chromium
      universal-ctags)
torch=1
for arg in "$@"; do
  case "$arg" in
    --torch) torch=1 ;;  # the default; kept for old callers
    --no-torch) torch=0 ;;
    *) echo "install-deps.sh: unknown option '$arg' (valid: --no-torch)" >&2; exit 2 ;;
  esac
done
# python3-torch (the same 1.13 build over libtorch1.13): the PyTorch side of bench/run_train_bench.sh.
[ "$torch" = 1 ] && pkgs+=(libtorch-dev libopenblas0-openmp python3-torch)

missing=()
for p in "${pkgs[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps.sh: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps.sh: not root and no sudo; install these by hand: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
