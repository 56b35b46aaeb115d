#!/usr/bin/python3
"""NSGA-II per-trial time at 1,000 trials: tune vs Optuna 4.9 (issue 34).

Runs build/bench/tune_bench_nsgaii_speed (tune's side; see bench/nsgaii_speed.cpp), then the same
method with Optuna 4.9's NSGAIISampler in its own process with Optuna on PYTHONPATH: an in-memory
study with two objectives runs --trials full trials (ask + the 6 suggest_* of tpe_speed's space +
tell) at the sampler's defaults (population 50, uniform crossover); the last --window trials are
timed. Prints one JSON document with both rows and the ratio of the medians.

Optuna 4.9's source tree is given by --optuna or $TUNE_OPTUNA49_PATH. Run with /usr/bin/python3
from the source tree.
"""

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
import warnings

MODELS = ["bert-base-uncased", "bert-large-uncased", "roberta-base", "roberta-large",
          "microsoft/deberta-v3-base", "microsoft/deberta-v3-large", "xlm-roberta-base"]
BATCH_SIZES = [8, 12, 16, 24, 32, 48, 64]
GRAD_ACCUMS = [1, 2, 3, 4, 6, 8]


def objectives(model, bs, ga, length, lr, wd):
    """The same formulas as Objectives in bench/nsgaii_speed.cpp."""
    error = ((math.log10(lr) + 4.5) ** 2 + 10 * (wd - 0.01) ** 2
             + 0.1 * abs(math.log2(bs * ga / 32.0)) + ((length - 256.0) / 256.0) ** 2
             + 0.01 * model)
    return error, bs * length * (1.0 + 0.5 * model) / 1000.0


def quantile(v, q):
    v = sorted(v)
    pos = q * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def optuna_row(trials, window, reps, seed):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore")
    ms, cpu, total = [], [], 0.0
    for rep in range(reps):
        sampler = optuna.samplers.NSGAIISampler(seed=seed + 1000 * rep)
        study = optuna.create_study(sampler=sampler, directions=["minimize", "minimize"])
        s0 = time.perf_counter()
        for k in range(trials):
            t0, c0 = time.perf_counter(), time.thread_time()
            trial = study.ask()
            model = trial.suggest_categorical("model", MODELS)
            bs = trial.suggest_categorical("batch_size", BATCH_SIZES)
            ga = trial.suggest_categorical("grad_accum", GRAD_ACCUMS)
            ml = trial.suggest_int("max_length", 128, 512, step=32)
            lr = trial.suggest_float("lr", 1e-6, 1e-3, log=True)
            wd = trial.suggest_float("weight_decay", 0.0, 0.1)
            study.tell(trial, objectives(MODELS.index(model), bs, ga, ml, lr, wd))
            if k >= trials - window:
                ms.append((time.perf_counter() - t0) * 1e3)
                cpu.append((time.thread_time() - c0) * 1e3)
        total += time.perf_counter() - s0
    return {"tool": f"optuna {optuna.__version__}", "trials": trials, "window": window,
            "reps": reps, "median_ms": statistics.median(ms), "q1_ms": quantile(ms, 0.25),
            "q3_ms": quantile(ms, 0.75), "mean_ms": statistics.fmean(ms), "max_ms": max(ms),
            "cpu_median_ms": statistics.median(cpu), "cpu_mean_ms": statistics.fmean(cpu),
            "study_s": total / reps}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune-binary", default="build/bench/tune_bench_nsgaii_speed")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--tune-reps", type=int, default=5)
    ap.add_argument("--optuna-reps", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--optuna", default=os.environ.get("TUNE_OPTUNA49_PATH", ""),
                    help="directory holding Optuna 4.9's 'optuna' package")
    ap.add_argument("--optuna-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.optuna_only:
        print(json.dumps(optuna_row(args.trials, args.window, args.optuna_reps, args.seed)))
        return 0
    out = subprocess.run([args.tune_binary, "--trials", str(args.trials), "--window",
                          str(args.window), "--reps", str(args.tune_reps), "--seed",
                          str(args.seed)], check=True, capture_output=True, text=True).stdout
    tune = json.loads(out.strip().splitlines()[-1])
    if not os.path.isfile(os.path.join(args.optuna, "optuna", "__init__.py")):
        sys.exit("no Optuna 4.9 source tree: pass --optuna DIR or set TUNE_OPTUNA49_PATH")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(args.optuna))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--optuna-only",
                          "--trials", str(args.trials), "--window", str(args.window),
                          "--optuna-reps", str(args.optuna_reps), "--seed", str(args.seed)],
                         check=True, capture_output=True, text=True, env=env).stdout
    optuna = json.loads(out.strip().splitlines()[-1])
    print(json.dumps({"rows": [tune, optuna],
                      "speedup_median": optuna["median_ms"] / tune["median_ms"],
                      "speedup_mean": optuna["mean_ms"] / tune["mean_ms"],
                      "speedup_study": optuna["study_s"] / tune["study_s"],
                      "speedup_cpu_median": optuna["cpu_median_ms"] / tune["cpu_median_ms"],
                      "speedup_cpu_mean": optuna["cpu_mean_ms"] / tune["cpu_mean_ms"],
                      "machine": f"{os.cpu_count()} CPUs, {os.uname().machine}"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
