#!/usr/bin/env bash
# Installs the system packages tune needs, only those missing, on Debian 12 (bookworm) and 13
# (trixie), and Ubuntu 22.04 (jammy) and 24.04 (noble). Idempotent and quick when all are present
# (one dpkg-query, no network). Uses sudo when not root; without root, see README "Platforms":
# `cmake -DTUNE_FETCH_DEPS=ON` builds the small libraries itself.
#
#   scripts/install-deps.sh              what building and `make test` need (the default)
#   scripts/install-deps.sh --build      only what building tune needs: the compiler, CMake and
#                                        the libraries' -dev packages (no test servers, browser,
#                                        Slurm or Python test tools)
#   scripts/install-deps.sh --no-torch   without LibTorch (tune then builds without the 'train'
#                                        objective; CMake says so)
#   scripts/install-deps.sh --cuda       Debian 13 only: the CUDA LibTorch (libtorch-cuda-dev,
#                                        contrib, instead of libtorch-dev) and the CUDA Toolkit
#                                        (nvidia-cuda-toolkit, non-free); those components must
#                                        be in the apt sources. See docs/gpu.md.
#   scripts/install-deps.sh --print      print the packages it would install (for one
#                                        `apt-get install` line) and exit
#
# LibTorch is Debian's libtorch-dev: 1.13 on Debian 12, 2.6 on Debian 13 (CPU only): about 160
# packages, ~125 MB to download, under a minute to install on the CI machine. On Ubuntu no
# LibTorch package is installed: build against your pip or conda torch with
# scripts/build-with-torch.sh. The other package names are the same in all four releases
# (scripts/check-debian13.sh runs `make test` on Debian 13). libopenblas0-openmp replaces the
# reference BLAS that libtorch would otherwise use through libblas.so.3: matrix products get ~15x
# faster (measured: 17 s -> 1.1 s for one epoch of a small model), and it shares LibTorch's OpenMP
# threads.
set -euo pipefail

# Building: CLI11, nlohmann-json, spdlog, fmt, SQLite, GoogleTest (the test binaries, built by
# default); libpq-dev: the PostgreSQL storage; libsentencepiece-dev: the SentencePiece models of
# DeBERTa-v3 and XLM-RoBERTa (the tokenizers' Unicode data is tune's own, no ICU);
# libminizip-dev (and zlib1g-dev, which its headers include but which Ubuntu 22.04's does not
# pull in): the zip archive of pytorch_model.bin (torch.save); libcurl4-openssl-dev:
# MLflow's REST API, where studies are tracked (src/tracking/); libjs-chart.js: the charting
# library `tune report` inlines in its pages; ccache: faster rebuilds.
build_pkgs=(cmake g++ make ccache libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
            libgtest-dev libsqlite3-dev libpq-dev libsentencepiece-dev libminizip-dev zlib1g-dev
            libcurl4-openssl-dev libjs-chart.js)
# The test suite: postgresql: the throwaway server `make test` starts; python3-psycopg2: lets
# the Optuna compatibility test open tune's PostgreSQL studies; python3-sentencepiece: the
# SentencePiece models the tests train; chromium: the headless browser the report_browser test
# loads pages in; universal-ctags: scripts/longest-functions.py (the memory_functions_short
# test); clang-format: scripts/check-format.sh, which .ci/run runs; python3-sklearn: the
# reference the metrics test (tests/metrics) compares tune's metrics with; dpkg-dev + file:
# `make package` (cpack -G DEB finds the package's Depends with dpkg-shlibdeps); slurmctld +
# slurmd + slurm-client + munge: the private one-node Slurm of tests/slurm (docs/cluster.md),
# whose daemons the test starts itself with their own config, socket and ports (beside any munge
# or Slurm service of the machine, which it does not use); python3-venv: tune's Python
# environment (scripts/install-venv.sh), which `make test` makes; fortunes: the demo's data.
test_pkgs=(postgresql python3-optuna python3-psycopg2 fortunes python3-sentencepiece chromium
           universal-ctags clang-format python3-sklearn dpkg-dev file slurmctld slurmd
           slurm-client munge python3-venv)
torch=1
tests=1
print_only=0
for arg in "$@"; do
  case "$arg" in
    --torch) torch=1 ;;  # the default; kept for old callers
    --no-torch) torch=0 ;;
    --cuda) torch=cuda ;;
    --build) tests=0 ;;
    --print) print_only=1 ;;
    *) echo "install-deps.sh: unknown option '$arg' (valid: --build, --no-torch, --cuda, --print)" >&2
       exit 2 ;;
  esac
done
distro=$( (. /etc/os-release && echo "${ID:-}") 2>/dev/null || true)
codename=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)
case "$codename" in
  bookworm | trixie | jammy | noble) ;;
  *) echo "install-deps.sh: note: tested on Debian 12/13 and Ubuntu 22.04/24.04 package names;" \
          "this is '${codename:-unknown}': trying the same names" >&2 ;;
esac
if [ "$torch" = cuda ] && [ "$codename" != trixie ]; then
  echo "install-deps.sh: --cuda needs Debian 13 (trixie): other releases have no CUDA LibTorch" \
       "package; build against a pip torch instead (scripts/build-with-torch.sh)" >&2
  exit 2
fi
if [ "$distro" = ubuntu ] && [ "$torch" = 1 ]; then
  echo "install-deps.sh: Ubuntu: no LibTorch package is installed; for the 'train' objective build" \
       "against your pip or conda torch: scripts/build-with-torch.sh --python PY" >&2
  torch=0
fi
pkgs=("${build_pkgs[@]}")
[ "$tests" = 1 ] && pkgs+=("${test_pkgs[@]}")
# python3-torch (the same build over libtorch): the PyTorch side of bench/run_train_bench.sh.
[ "$torch" = 1 ] && pkgs+=(libtorch-dev libopenblas0-openmp)
[ "$torch" = 1 ] && [ "$tests" = 1 ] && pkgs+=(python3-torch)
# libtorch-cuda-dev conflicts with libtorch-dev (the same files); it needs nvidia-cudnn, an
# installer package that downloads cuDNN from NVIDIA's site while it is being configured.
[ "$torch" = cuda ] && pkgs+=(libtorch-cuda-dev nvidia-cuda-toolkit libopenblas0-openmp)
if [ "$print_only" = 1 ]; then echo "${pkgs[*]}"; exit 0; fi

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
