#!/usr/bin/env bash
# Regenerates scripts/python-requirements.txt from scripts/python-requirements.in with pip-tools'
# pip-compile (--generate-hashes: the hash of every file PyPI has for each pinned version, so
# the same file installs on Debian 12's Python 3.11 and Debian 13's 3.13). pip-tools runs in a
# throwaway virtual environment. It needs PyPI and takes under a minute when the pins stay,
# about 8 minutes from an empty file.
#
#   scripts/update-python-requirements.sh              keep the pins still allowed, add what is new
#   scripts/update-python-requirements.sh --upgrade    the newest versions the .in allows
#   scripts/update-python-requirements.sh -P NAME      upgrade one package (pip-compile's options)
#
# Then run scripts/install-venv.sh (or make test), which installs the new file.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip \
  pip-tools==7.6.2
# pip-compile writes CUSTOM_COMPILE_COMMAND into the file's header as the command that made it.
CUSTOM_COMPILE_COMMAND=scripts/update-python-requirements.sh "$tmp/venv/bin/pip-compile" --quiet \
  --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links \
  --output-file python-requirements.txt "$@" python-requirements.in
