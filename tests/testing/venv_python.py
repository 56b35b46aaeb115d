"""The Python of tune's environment (scripts/install-venv.sh) for a test that needs its packages
(PyTorch, transformers, ...) rather than Optuna (for Optuna, optuna_peer.py).

find() returns that Python, by the rule optuna_peer.py follows: $TUNE_VENV_PYTHON when set (`make
test` sets it), else the path CMake passes. No environment there is a skip (exit 77, ctest's
SKIP_RETURN_CODE) with a banner; a broken one is a failure (exit 1): $TUNE_VENV_PYTHON naming a
file that is not there, or a Python that cannot import a module the test names. run_here() then
runs the calling script again under that Python, unless it already runs there.
"""

from __future__ import annotations

import os
import subprocess
import sys

SKIP = 77
LINE = "=" * 78


def _skip(test: str, reason: str):
    print(f"{LINE}\nSKIPPED {test}: {reason}\n(this test needs tune's Python environment: "
          f"scripts/install-venv.sh makes it, and `make test` runs that)\n{LINE}", flush=True)
    sys.exit(SKIP)


def _fail(test: str, reason: str):
    print(f"{LINE}\nFAILED {test}: {reason} (run scripts/install-venv.sh)\n{LINE}", flush=True)
    sys.exit(1)


def find(test: str, cmake_python: str | None, modules: tuple[str, ...]) -> str:
    """The environment's Python, which imports every one of `modules`; exits 77 or 1 otherwise."""
    required = os.environ.get("TUNE_VENV_PYTHON")
    python = os.path.abspath(required or cmake_python or "")
    if required and not os.path.isfile(python):
        _fail(test, f"$TUNE_VENV_PYTHON is {python}, which does not exist")
    if not (required or cmake_python) or not os.path.isfile(python):
        _skip(test, "no tune Python environment" + (f" at {python}" if cmake_python else ""))
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)"
    r = subprocess.run([python, "-B", "-c", code] + list(modules), capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        _fail(test, f"{python} cannot import all of {', '.join(modules)}: "
                    f"{r.stderr.strip()[-500:]}")
    return python


def run_here(python: str):
    """Runs this script again under `python` (same arguments), unless it already runs there."""
    # Marked in the environment: sys.executable cannot tell (a venv's python is a link).
    if os.environ.get("TUNE_VENV_PYTHON_RUNNING") != python:
        sys.stdout.flush()
        os.execve(python, [python] + sys.argv, dict(os.environ, TUNE_VENV_PYTHON_RUNNING=python))
