"""Helpers shared by the Python tests that put tune and Optuna on the same storages."""
import subprocess
import sys


class Checks:
    """Counts the checks that held; the first that does not raises AssertionError(what)."""

    def __init__(self):
        self.count = 0

    def __call__(self, cond, what):
        if not cond:
            raise AssertionError(what)
        self.count += 1


def run_tune(binary, args, cwd, timeout=300):
    """Runs `binary args` in `cwd`; a non-zero exit prints its output and raises."""
    r = subprocess.run([binary] + args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise AssertionError(f"tune {' '.join(args)}: exit {r.returncode}")
    return r


# A constrained study both tools run: a command objective for tune (this program, with
# TUNE_PARAMS_FILE) and the same function for Optuna (optuna_objective, Trial.set_constraint).
CONSTRAINED_PROGRAM = """
import json, os
p = json.load(open(os.environ["TUNE_PARAMS_FILE"]))
print(json.dumps({"constraints": {"budget": p["x"] + p["y"] - 1.0}}), flush=True)
print(json.dumps({"value": (p["x"] - 0.3) ** 2 + (p["y"] - 0.6) ** 2}), flush=True)
"""
CONSTRAINED_SPACE = {"x": {"type": "float", "low": 0.0, "high": 1.0},
                     "y": {"type": "float", "low": 0.0, "high": 1.0}}


def optuna_objective(trial):
    x, y = trial.suggest_float("x", 0.0, 1.0), trial.suggest_float("y", 0.0, 1.0)
    trial.set_constraint("budget", x + y - 1.0)
    return (x - 0.3) ** 2 + (y - 0.6) ** 2
