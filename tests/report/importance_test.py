#!/usr/bin/env python3
"""tune report's PED-ANOVA importances against Optuna 4.9's PedAnovaImportanceEvaluator.

  importance_test.py TUNE_BINARY OPTUNA_DIR [VERSION [VENV_PYTHON]]

VERSION (4.9 by default, or 5.0) is the Optuna compared: 5.0's PedAnovaImportanceEvaluator, its
default evaluator, was rewritten (multi-objective support) and must give the same values. Optuna
5.0 is the released one in tune's Python environment (VENV_PYTHON, or $TUNE_VENV_PYTHON), else the
source tree OPTUNA_DIR; 4.9 is the source tree OPTUNA_DIR; $TUNE_OPTUNA49_PATH and
$TUNE_OPTUNA50_PATH name another source tree (tests/testing/optuna_peer.py). For 4.9:

Studies written by Optuna 4.9 (make_optuna_study.py: categorical, int-with-step, log-float and
float parameters; 40, 150 and 600 trials) and one written by tune (the 'mixed' function, random
sampler); importance_vs_optuna.py must find the same ranking and values within 1e-6 on each.
Exit 77 (skipped), with a banner, without that Optuna.
"""
import json
import os
import subprocess
import sys
import tempfile

TUNE = os.path.abspath(sys.argv[1])
VERSION = sys.argv[3] if len(sys.argv) > 3 else "4.9"
VENV_PYTHON = sys.argv[4] if len(sys.argv) > 4 else None
NAME = "report_importance_optuna49" if VERSION == "4.9" else "report_importance_optuna50"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "testing"))
import optuna_peer  # noqa: E402

SPACE = {"model": {"type": "model", "choices": ["bert-base-uncased", "roberta-base", "bert-large-uncased"]},
         "batch_size": {"type": "categorical", "choices": [8, 16, 32, 64]},
         "max_length": {"type": "int", "low": 64, "high": 512, "step": 64},
         "lr": {"type": "float", "low": 1e-6, "high": 1e-3, "log": True},
         "weight_decay": {"type": "float", "low": 0.0, "high": 0.2}}


def main():
    peer = optuna_peer.find(NAME, VERSION, sys.argv[2], VENV_PYTHON)
    print(f"{NAME}: {peer.describe()}", flush=True)
    env = peer.env()
    env["PYTHONWARNINGS"] = "ignore"
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        url = "sqlite:///" + os.path.join(tmp, "s.db")
        for n in (40, 150, 600):
            subprocess.run([peer.python, os.path.join(HERE, "make_optuna_study.py"), url,
                            f"optuna{n}", str(n)], env=env, check=True)
        doc = {"direction": "minimize", "sampler": {"name": "random", "seed": 11},
               "search_space": SPACE, "objective": {"type": "function", "name": "mixed"}}
        with open(os.path.join(tmp, "t.json"), "w") as f:
            json.dump(doc, f)
        subprocess.run([TUNE, "--study", "tune300", "--config", "t.json", "--n-trials", "300",
                        "--log-level", "warn", "--storage", url], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL)
        for study in ("optuna40", "optuna150", "optuna600", "tune300"):
            print(f"== study {study}", flush=True)
            r = subprocess.run([peer.python, os.path.join(HERE, "importance_vs_optuna.py"),
                                TUNE, url, study, "--tolerance", "1e-6"], env=env)
            failed += r.returncode != 0
    print("OK" if not failed else f"{failed} study(ies) differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
