#!/usr/bin/env bash
# Creates or refreshes tune's Python environment: a virtual environment of Debian's
# /usr/bin/python3 holding exactly the packages of scripts/python-requirements.txt, each pinned and
# hash-checked. The tests that run beside the released Optuna 5.0 and optuna-dashboard use its
# Python; it also holds the users' stack (PyTorch with CUDA 13, Hugging Face's transformers,
# tokenizers, safetensors, accelerate, SentencePiece) and a real all-MiniLM-L6-v2 checkpoint.
# `make test` runs this first (its `venv` target).
#
#   scripts/install-venv.sh [--venv DIR] [--fresh]
#
#   --venv DIR   where the environment goes; default $TUNE_VENV, else .venv at the source root
#   --fresh      delete DIR first and install everything again
#
# Quick when nothing changed: DIR/tune-requirements.stamp holds the sha256 of the requirements
# file and the Python version it was installed with; when both match, the script exits 0 at once
# (no network). Otherwise it creates DIR with `/usr/bin/python3 -m venv` (Debian's python3-venv,
# which scripts/install-deps.sh installs) if it is missing, runs `pip install --require-hashes
# --no-deps --only-binary=:all:` on the requirements file (every package and version is listed
# there, every file's hash is checked, nothing is built from source), removes the packages the
# file no longer lists, runs `pip check`, then writes the stamp. A fresh install downloads 3.2 GB
# (PyPI's torch brings CUDA 13's libraries) and takes 6.5 GiB of disk, 2 to 7 minutes on the
# 2-core test machine: docs/overview.md, "The Python environment".
#
# scripts/python-requirements.in is the short list written by hand; python-requirements.txt is
# generated from it (its header says how).
set -euo pipefail

src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
requirements="$src_dir/scripts/python-requirements.txt"
python=/usr/bin/python3
venv="${TUNE_VENV:-$src_dir/.venv}"
fresh=0
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) [ $# -ge 2 ] || { echo "install-venv.sh: --venv needs a directory" >&2; exit 2; }
            venv="$2"; shift ;;
    --venv=*) venv="${1#--venv=}" ;;
    --fresh) fresh=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-venv.sh: unknown option '$1' (valid: --venv DIR, --fresh)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$venv" ]; then
  echo "install-venv.sh: the venv directory is empty (--venv, TUNE_VENV)" >&2
  exit 2
fi
case "$venv" in /*) ;; *) venv="$PWD/$venv" ;; esac
[ -x "$python" ] || { echo "install-venv.sh: $python is missing (Debian's python3)" >&2; exit 1; }
[ -f "$requirements" ] || { echo "install-venv.sh: $requirements is missing" >&2; exit 1; }

py_version=$("$python" -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
read -r req_sha _ < <(sha256sum "$requirements")
want="$req_sha $py_version"
stamp="$venv/tune-requirements.stamp"
if [ "$fresh" = 0 ] && [ -x "$venv/bin/python" ] && [ -f "$stamp" ] &&
   [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

start=$SECONDS
if [ "$fresh" = 1 ] && [ -e "$venv" ]; then
  echo "install-venv.sh: --fresh: deleting $venv" >&2
  rm -rf "$venv"
fi
# A venv made by another Python (Debian 12's 3.11 after an upgrade to 13's 3.13) cannot be
# reused: its site-packages are for that version.
if [ -f "$venv/pyvenv.cfg" ] && ! [ -d "$venv/lib/$py_version" ]; then
  echo "install-venv.sh: $venv was made by another Python; making it again with $py_version" >&2
  rm -rf "$venv"
fi
if ! [ -x "$venv/bin/python" ]; then
  if [ -e "$venv" ] && [ -n "$(ls -A "$venv" 2>/dev/null)" ]; then
    echo "install-venv.sh: $venv exists and is not a virtual environment; move it away or" \
         "choose another directory (--venv DIR, TUNE_VENV)" >&2
    exit 1
  fi
  if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
    echo "install-venv.sh: $python cannot make virtual environments: install Debian's" \
         "python3-venv (scripts/install-deps.sh does)" >&2
    exit 1
  fi
  echo "install-venv.sh: creating $venv ($py_version)" >&2
  "$python" -m venv "$venv"
fi

echo "install-venv.sh: installing scripts/python-requirements.txt into $venv" \
     "(a fresh install downloads about 3.2 GB)" >&2
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
if ! "${pip[@]}" install --quiet --require-hashes --no-deps --only-binary=:all: \
       -r "$requirements"; then
  echo "install-venv.sh: pip could not install scripts/python-requirements.txt into $venv" \
       "(its message is above: no network to PyPI, a file whose hash differs, no wheel for" \
       "$py_version); nothing was stamped, the next run tries again" >&2
  exit 1
fi

# Packages the requirements file no longer lists (an earlier version of it installed them).
extra=$("$venv/bin/python" - "$requirements" <<'EOF'
import importlib.metadata, re, sys
listed = {re.sub(r"[-_.]+", "-", m.group(1)).lower()
          for m in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", open(sys.argv[1]).read(), re.M)}
keep = listed | {"pip"}
installed = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower()
             for d in importlib.metadata.distributions()}
print(" ".join(sorted(installed - keep)))
EOF
)
if [ -n "$extra" ]; then
  echo "install-venv.sh: removing what the requirements no longer list: $extra" >&2
  # shellcheck disable=SC2086
  "${pip[@]}" uninstall --quiet --yes $extra
fi
if ! "${pip[@]}" check >&2; then
  echo "install-venv.sh: pip check found a requirement scripts/python-requirements.txt does" \
       "not satisfy (above); regenerate it from scripts/python-requirements.in" >&2
  exit 1
fi

echo "$want" >"$stamp"
echo "install-venv.sh: $venv is ready ($(du -sh "$venv" 2>/dev/null | cut -f1) on disk," \
     "$((SECONDS - start)) s)" >&2
