"""Shared helpers of the differential tests against Optuna 4.9 and 5.0 (see README.md here)."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

SKIP = 77
OPTUNA_VERSION = "4.9"


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--driver", required=True, help="the tune_diff_driver binary")
    parser.add_argument(
        "--optuna",
        default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "vendor",
                             "optuna-4.9"),
        help="directory holding Optuna 4.9's 'optuna' package (the vendored copy next to the "
        "source tree by default; $TUNE_OPTUNA49_PATH overrides)")
    parser.add_argument("--optuna-version", default="4.9", choices=["4.9", "5.0"],
                        help="the Optuna the --optuna directory holds (and the rules compared)")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--dump", help="write cases and both sides' results to this JSON file")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args()


def import_optuna(path: str, test_name: str, version: str = "4.9"):
    """Imports the vendored Optuna `version`, or exits with SKIP and a banner saying why."""
    global OPTUNA_VERSION
    OPTUNA_VERSION = version
    env = "TUNE_OPTUNA49_PATH" if version == "4.9" else "TUNE_OPTUNA50_PATH"
    path = os.environ.get(env, path)
    path = os.path.abspath(path)

    def skip(reason: str) -> None:
        line = "=" * 78
        print(f"{line}\nSKIPPED {test_name}: {reason}\n"
              f"(this test compares tune with Optuna {OPTUNA_VERSION}; put Optuna "
              f"{OPTUNA_VERSION}'s source tree there or set {env})\n{line}",
              flush=True)
        sys.exit(SKIP)

    if not os.path.isfile(os.path.join(path, "optuna", "__init__.py")):
        skip(f"no Optuna at {path}")
    sys.path.insert(0, path)
    try:
        import numpy  # noqa: F401
        import optuna
    except ImportError as e:
        skip(f"cannot import Optuna from {path}: {e}")
    if not optuna.__version__.startswith(OPTUNA_VERSION + "."):
        skip(f"{path} holds Optuna {optuna.__version__}, not {OPTUNA_VERSION}")
    if not os.path.abspath(optuna.__file__).startswith(path):
        skip(f"'import optuna' found {optuna.__file__}, not the copy at {path}")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    import warnings
    warnings.simplefilter("ignore")
    return optuna


def encode(v):
    """JSON-safe copy: non-finite floats become "nan", "inf", "-inf"."""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    if isinstance(v, dict):
        return {k: encode(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [encode(x) for x in v]
    if hasattr(v, "item"):  # numpy scalar
        return encode(v.item())
    return v


def decode(v):
    if v == "nan":
        return math.nan
    if v == "inf":
        return math.inf
    if v == "-inf":
        return -math.inf
    return v


def run_driver(driver: str, mode: str, cases: list) -> tuple[list, float]:
    text = json.dumps({"cases": encode(cases)}, allow_nan=False)
    start = time.monotonic()
    proc = subprocess.run([driver, mode], input=text.encode(), capture_output=True)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr.decode(errors="replace"))
        raise SystemExit(f"{driver} {mode} failed with exit code {proc.returncode}")
    # tune's log lines (spdlog writes to stdout) come before the result, the last line.
    lines = proc.stdout.decode().strip().splitlines()
    return json.loads(lines[-1])["results"], elapsed


def rel_diff(a: float, b: float, floor: float = 0.0) -> float:
    """|a - b| / max(|a|, |b|, floor); 0 when equal (infinities included), inf on NaN mismatch."""
    a, b = float(decode(a)), float(decode(b))
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return math.inf
    den = max(abs(a), abs(b), floor)
    return abs(a - b) / den if den > 0 else 0.0
