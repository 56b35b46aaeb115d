"""Hugging Face's own code as a test's reference: run the test with tune's Python environment.

A test that checks tune against transformers, tokenizers or PyTorch as users run them (the
model classes, the tokenizers, from_pretrained) calls use() first, before importing any of them:

    import hf_stack
    hf_stack.use("model_parity", VENV_PYTHON, ("torch", "transformers"))
    import torch, transformers

The environment is scripts/install-venv.sh's (`make test` makes it first). Its Python is
$TUNE_VENV_PYTHON when set (`make test` sets it), else the path CMake passes (its cache variable
TUNE_VENV_PYTHON, by default .venv/bin/python at the source root). use() runs the script again
with that Python when another one runs it (ctest starts these tests with /usr/bin/python3), then
imports the modules and prints their versions and places.

- No environment (no such Python): exit 77 (ctest's SKIP_RETURN_CODE) with a banner saying how to
  make it. This is the only skip: under `make test` these tests always run.
- A broken environment: exit 1, not a skip: $TUNE_VENV_PYTHON naming a file that is not there,
  or an environment that does not import a module the test needs.
"""

from __future__ import annotations

import importlib
import os
import sys

SKIP = 77
LINE = "=" * 78


def _banner(kind: str, test: str, reason: str) -> str:
    return f"{LINE}\n{kind} {test}: {reason}\n{LINE}"


def python_of(venv_python: str | None) -> tuple[str | None, bool]:
    """The environment's Python and whether it was asked for explicitly ($TUNE_VENV_PYTHON)."""
    required = os.environ.get("TUNE_VENV_PYTHON")
    if required:
        return os.path.abspath(required), True
    return (os.path.abspath(venv_python) if venv_python else None), False


def use(test: str, venv_python: str | None, modules: tuple[str, ...]) -> dict:
    """Makes this process tune's Python environment (see the module comment) and returns
    {module: (version, location)} of `modules`, imported."""
    python, required = python_of(venv_python)
    if python is None or not os.path.isfile(python):
        if required:
            print(_banner("FAILED", test, f"$TUNE_VENV_PYTHON is {python}, which does not exist "
                          "(run scripts/install-venv.sh)"), flush=True)
            sys.exit(1)
        print(_banner("SKIPPED", test, f"no tune Python environment at {python} (this test "
                      f"runs Hugging Face's {', '.join(modules)} as the reference; "
                      "scripts/install-venv.sh makes the environment, and `make test` runs "
                      "that)"), flush=True)
        sys.exit(SKIP)
    if os.path.abspath(sys.executable) != python and os.environ.get("TUNE_HF_STACK") != python:
        sys.stdout.flush()
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        env["TUNE_HF_STACK"] = python  # once: a venv Python may report its own target path
        os.execve(python, [python, "-B"] + sys.argv, env)
    found = {}
    for name in modules:
        try:
            m = importlib.import_module(name)
        except Exception as e:  # ImportError, or any error while importing
            print(_banner("FAILED", test, f"tune's Python environment ({python}) cannot import "
                          f"{name}: {type(e).__name__}: {e} (run scripts/install-venv.sh)"),
                  flush=True)
            sys.exit(1)
        found[name] = (getattr(m, "__version__", "?"),
                       os.path.dirname(os.path.abspath(m.__file__)))
    print(f"{test}: " + "; ".join(f"{n} {v} from {p}" for n, (v, p) in found.items())
          + f"; run by {sys.executable}", flush=True)
    return found
