"""Which Optuna a test runs beside tune, and with which Python.

A test that checks tune against Optuna as a peer (on the same storage, or on the same trials)
calls find() once, prints Peer.describe(), then runs Optuna's side either in its own process
(run_here()) or in child processes (Peer.python with Peer.env()). For Optuna 5.0 the peer is the
first of:

1. the source tree at $TUNE_OPTUNA50_PATH, when that is set, run by /usr/bin/python3 (an explicit
   choice, as before tune had a Python environment);
2. the released Optuna in tune's Python environment (scripts/install-venv.sh), whose Python is
   $TUNE_VENV_PYTHON when set (`make test` sets it), else the path CMake passes (its cache
   variable TUNE_VENV_PYTHON, by default .venv/bin/python at the source root);
3. the source tree the test names (its vendored fallback), run by /usr/bin/python3.

Optuna 4.9 is not in the environment: for it, 1 ($TUNE_OPTUNA49_PATH) and 3 only.

A missing peer is a skip (exit 77, ctest's SKIP_RETURN_CODE) with a banner. A broken environment
is a failure (exit 1), not a skip: a venv Python that exists but does not import the Optuna
version asked for (or a module the test needs), or $TUNE_VENV_PYTHON naming a file that is not
there. So under `make test`, which makes the environment first, these tests never skip (unless
$TUNE_OPTUNA50_PATH sends them to a source tree of another kind).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

SKIP = 77
SYSTEM_PYTHON = "/usr/bin/python3"

HERE = os.path.dirname(os.path.abspath(__file__))


def _import_all(names: list[str]) -> dict:
    """name -> {"version", "location"} of each module imported, or {"error"}."""
    import importlib
    import warnings

    warnings.simplefilter("ignore")
    found = {}
    for name in names:
        try:
            m = importlib.import_module(name)
            found[name] = {"version": getattr(m, "__version__", "?"),
                           "location": os.path.dirname(os.path.abspath(m.__file__))}
        except Exception as e:  # ImportError, or any error while importing
            found[name] = {"error": f"{type(e).__name__}: {e}"}
    return found


@dataclass
class Peer:
    """An Optuna to run beside tune: the Python that runs it and where its package is."""

    python: str  # the interpreter for Optuna's side
    source_tree: str | None  # a directory for PYTHONPATH, or None (the venv's own package)
    version: str  # optuna.__version__
    location: str  # the directory of the optuna package
    modules: dict = field(default_factory=dict)  # name -> (version, location) of extra modules

    def env(self) -> dict:
        """This process's environment for Peer.python: PYTHONPATH is the source tree, or unset."""
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        if self.source_tree:
            env["PYTHONPATH"] = self.source_tree
        return env

    def describe(self) -> str:
        where = ("released, in tune's Python environment" if self.source_tree is None
                 else "a source tree")
        extra = "".join(f"; {name} {version} from {location}"
                        for name, (version, location) in self.modules.items())
        return (f"Optuna {self.version} ({where}) from {self.location}, run by "
                f"{self.python}{extra}")


def _same_interpreter(python: str) -> bool:
    return os.path.abspath(sys.executable) == os.path.abspath(python)


def _query(python: str, source_tree: str | None, names: list[str]) -> dict:
    """_import_all(names) as `python` (with the source tree on its path) sees it."""
    if _same_interpreter(python):
        if source_tree and source_tree not in sys.path:
            sys.path.insert(0, source_tree)
        return _import_all(names)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if source_tree:
        env["PYTHONPATH"] = source_tree
    code = (f"import json, sys; sys.path.insert(0, {HERE!r}); from optuna_peer import "
            f"_import_all; print(json.dumps(_import_all(sys.argv[1:])))")
    r = subprocess.run([python, "-B", "-c", code] + names, capture_output=True, text=True,
                       env=env, timeout=120)
    if r.returncode != 0:
        return {n: {"error": f"{python} exited {r.returncode}: {r.stderr.strip()[-500:]}"}
                for n in names}
    return json.loads(r.stdout.strip().splitlines()[-1])


def find(test: str, version: str, source_dir: str, venv_python: str | None = None,
         modules: tuple[str, ...] = ()) -> Peer:
    """The Optuna `version` ("4.9" or "5.0") to run beside tune, with `modules` importable
    beside it; exits 77 with a banner when there is none, 1 when tune's environment is broken.
    source_dir is the fallback source tree; venv_python the Python CMake passes (5.0 only)."""
    env_name = "TUNE_OPTUNA49_PATH" if version == "4.9" else "TUNE_OPTUNA50_PATH"
    wanted = ["optuna"] + list(modules)
    line = "=" * 78

    def skip(reason: str):
        needs = " and ".join([f"Optuna {version}"] + list(modules))
        if version == "5.0":
            how = ("tune's Python environment holds what it needs: scripts/install-venv.sh makes "
                   "it, and `make test` runs that")
        else:
            how = f"put Optuna {version}'s source tree at {source_dir} or set {env_name}"
        print(f"{line}\nSKIPPED {test}: {reason}\n(this test runs tune beside {needs}; {how})\n"
              f"{line}", flush=True)
        sys.exit(SKIP)

    def fail(reason: str):
        print(f"{line}\nFAILED {test}: {reason}\n{line}", flush=True)
        sys.exit(1)

    def check(python: str, source_tree: str | None, what: str, broken) -> Peer:
        found = _query(python, source_tree, wanted)
        for name in wanted:
            if "error" in found[name]:
                broken(f"{what}: cannot import {name}: {found[name]['error']}")
        optuna = found["optuna"]
        if not optuna["version"].startswith(version + "."):
            broken(f"{what} holds Optuna {optuna['version']}, not {version}")
        if source_tree and not optuna["location"].startswith(source_tree + os.sep):
            broken(f"{what}: 'import optuna' found {optuna['location']}, not the copy there")
        return Peer(python, source_tree, optuna["version"], optuna["location"],
                    {m: (found[m]["version"], found[m]["location"]) for m in modules})

    explicit = os.environ.get(env_name)
    if explicit:
        tree = os.path.abspath(explicit)
        return check(SYSTEM_PYTHON, tree, f"${env_name} ({tree})", skip)
    if version == "5.0":
        required = os.environ.get("TUNE_VENV_PYTHON")
        python = os.path.abspath(required or venv_python or "")
        if required and not os.path.isfile(python):
            fail(f"$TUNE_VENV_PYTHON is {python}, which does not exist (run "
                 f"scripts/install-venv.sh)")
        if (required or venv_python) and os.path.isfile(python):
            return check(python, None, f"tune's Python environment ({python})",
                         lambda reason: fail(reason + " (run scripts/install-venv.sh)"))
    tree = os.path.abspath(source_dir)
    if not os.path.isfile(os.path.join(tree, "optuna", "__init__.py")):
        missing = [f"no source tree at {tree}"]
        if version == "5.0":
            missing.insert(0, "no tune Python environment"
                           + (f" at {venv_python}" if venv_python else ""))
        skip(f"no Optuna {version}: " + " and ".join(missing))
    return check(SYSTEM_PYTHON, tree, f"the source tree at {tree}", skip)


def run_here(peer: Peer):
    """Makes this process run Optuna's side itself and returns the optuna module: re-executes the
    running script under peer.python when that is another interpreter (the venv's), else puts
    the source tree first on sys.path. Call it before importing optuna."""
    if not _same_interpreter(peer.python):
        sys.stdout.flush()
        os.execve(peer.python, [peer.python] + sys.argv, peer.env())
    if peer.source_tree and sys.path[0] != peer.source_tree:
        sys.path.insert(0, peer.source_tree)
    import optuna

    location = os.path.dirname(os.path.abspath(optuna.__file__))
    if location != peer.location:
        print(f"FAILED: 'import optuna' found {location}, not {peer.location}", flush=True)
        sys.exit(1)
    return optuna
