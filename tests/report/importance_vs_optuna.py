"""Compares the parameter importances `tune report` computes (PED-ANOVA) with Optuna 4.9's
PedAnovaImportanceEvaluator on the same stored study, and with Optuna's default evaluator
(fANOVA) where scikit-learn is installed.

usage: importance_vs_optuna.py TUNE_BINARY STORAGE_URL STUDY [--tolerance T]
Prints both rankings; exits 1 when the rankings differ or a value is off by more than T
(absolute, on importances normalised to sum 1; default 0.02).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import optuna


def tune_importances(tune, url, study):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.html")
        subprocess.run([tune, "report", "--study", study, "--storage", url, "--output", out],
                       check=True, stdout=subprocess.DEVNULL)
        page = open(out, encoding="utf-8").read()
    blob = re.search(r'<script id="tune-data" type="application/json">(.*?)</script>', page, re.S)
    data = json.loads(blob.group(1))
    return {p["name"]: p["importance"] for p in data["importance"]["params"]}


def show(title, importances):
    print(f"{title}:")
    for name, v in importances.items():
        print(f"  {name:<14} {v:.4f}")


def main():
    tune, url, study = sys.argv[1:4]
    tol = float(sys.argv[sys.argv.index("--tolerance") + 1]) if "--tolerance" in sys.argv else 0.02
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    loaded = optuna.load_study(study_name=study, storage=url)
    ours = tune_importances(tune, url, study)
    ped = optuna.importance.get_param_importances(
        loaded, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
    show("tune report (PED-ANOVA)", ours)
    show(f"Optuna {optuna.__version__} PedAnovaImportanceEvaluator", ped)
    try:
        # fANOVA under 4.9 (it needs scikit-learn), PED-ANOVA under 5.0.
        show(f"Optuna {optuna.__version__} default evaluator",
             optuna.importance.get_param_importances(loaded))
    except ImportError as e:
        print(f"Optuna's default evaluator not run: {e}")
    worst = max(abs(ours.get(k, -1) - v) for k, v in ped.items())
    same = list(ours) == list(ped)
    print(f"same ranking: {same}; largest difference: {worst:.2e}")
    return 0 if same and worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
