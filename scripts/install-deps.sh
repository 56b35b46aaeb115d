#!/usr/bin/env bash
# Installs the Debian 12 packages tune needs, only those missing. Idempotent and quick when all
# are present (one dpkg-query, no network). Uses sudo when not root.
#
#   scripts/install-deps.sh            build + test dependencies
#   scripts/install-deps.sh --torch    also LibTorch (training targets)
set -euo pipefail

# libpq-dev: the PostgreSQL storage; postgresql: the throwaway server `make test` starts;
# python3-psycopg2: lets the Optuna compatibility test open tune's PostgreSQL studies.
pkgs=(cmake g++ make libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libgtest-dev
      libsqlite3-dev libpq-dev postgresql python3-optuna python3-psycopg2 fortunes ccache)
for arg in "$@"; do
  case "$arg" in
    --torch) pkgs+=(libtorch-dev) ;;
    *) echo "install-deps.sh: unknown option '$arg' (valid: --torch)" >&2; exit 2 ;;
  esac
done

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
