#!/usr/bin/env bash
# Installs the Debian packages tune needs, only those missing, on Debian 12 (bookworm) and Debian 13
# (trixie). Idempotent and quick when all are present (one dpkg-query, no network). Uses sudo when
# not root.
#
#   scripts/install-deps.sh              build + test dependencies, LibTorch included
#   scripts/install-deps.sh --no-torch   without LibTorch (tune then builds without the 'train'
#                                        objective; CMake says so)
#   scripts/install-deps.sh --cuda       Debian 13 only: the CUDA LibTorch (libtorch-cuda-dev,
#                                        contrib, instead of libtorch-dev) and the CUDA Toolkit
#                                        (nvidia-cuda-toolkit, non-free); those components must
#                                        be in the apt sources. See docs/gpu.md.
#
# LibTorch is Debian's libtorch-dev: 1.13 on Debian 12, 2.6 on Debian 13 (CPU only): about 160
# packages, ~125 MB to download, under a minute to install on the CI machine. The other package
# names are the same in both releases (scripts/check-debian13.sh runs `make test` on Debian 13). libopenblas0-openmp replaces the reference BLAS
# that libtorch would otherwise use through libblas.so.3: matrix products get ~15x faster
# (measured: 17 s -> 1.1 s for one epoch of a small model), and it shares LibTorch's OpenMP threads.
set -euo pipefail

# libpq-dev: the PostgreSQL storage; postgresql: the throwaway server `make test` starts;
# python3-psycopg2: lets the Optuna compatibility test open tune's PostgreSQL studies.
# libicu-dev + libsentencepiece-dev: the checkpoints' tokenizers (BERT's Unicode rules, GPT-2's
# pre-tokenizer, SentencePiece models); python3-sentencepiece: the SentencePiece models the tests
# train.
# libjs-chart.js: the charting library `tune report` inlines in its pages; chromium: the headless
# browser the report_browser test loads them in. universal-ctags: scripts/longest-functions.py
# (the memory_functions_short test). clang-format: scripts/check-format.sh, which .ci/run runs.
# libminizip-dev: the zip archive of pytorch_model.bin (torch.save). python3-sklearn: the
# reference the metrics test (tests/metrics) compares tune's metrics with. dpkg-dev + file:
# `make package` (cpack -G DEB finds the package's Depends with dpkg-shlibdeps). slurmctld +
# slurmd + slurm-client + munge: the private one-node Slurm of tests/slurm (docs/cluster.md),
# whose daemons the test starts itself with their own config, socket and ports (beside any
# munge or Slurm service of the machine, which it does not use). python3-venv: tune's Python
# environment (scripts/install-venv.sh), which `make test` makes. libcurl4-openssl-dev: MLflow's
# REST API, where studies are tracked (src/tracking/).
pkgs=(cmake g++ make libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libgtest-dev
      libsqlite3-dev libpq-dev postgresql python3-optuna python3-psycopg2 fortunes ccache
      libicu-dev libsentencepiece-dev python3-sentencepiece libjs-chart.js chromium
      universal-ctags clang-format libminizip-dev python3-sklearn dpkg-dev file
      slurmctld slurmd slurm-client munge python3-venv libcurl4-openssl-dev)
torch=1
for arg in "$@"; do
  case "$arg" in
    --torch) torch=1 ;;  # the default; kept for old callers
    --no-torch) torch=0 ;;
    --cuda) torch=cuda ;;
    *) echo "install-deps.sh: unknown option '$arg' (valid: --no-torch, --cuda)" >&2; exit 2 ;;
  esac
done
codename=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)
case "$codename" in
  bookworm | trixie) ;;
  *) echo "install-deps.sh: note: tested on Debian 12 (bookworm) and 13 (trixie), this is" \
          "'${codename:-unknown}'; trying the same package names" >&2 ;;
esac
if [ "$torch" = cuda ] && [ "$codename" != trixie ]; then
  echo "install-deps.sh: --cuda needs Debian 13 (trixie): Debian 12 has no CUDA LibTorch" >&2
  exit 2
fi
# python3-torch (the same build over libtorch): the PyTorch side of bench/run_train_bench.sh.
[ "$torch" = 1 ] && pkgs+=(libtorch-dev libopenblas0-openmp python3-torch)
# libtorch-cuda-dev conflicts with libtorch-dev (the same files); it needs nvidia-cudnn, an
# installer package that downloads cuDNN from NVIDIA's site while it is being configured.
[ "$torch" = cuda ] && pkgs+=(libtorch-cuda-dev nvidia-cuda-toolkit libopenblas0-openmp)

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
