#!/usr/bin/python3
"""TPE suggest latency, tune vs Optuna 5.0, 4.9 and Debian's Optuna 3.1, in one run.

Runs build/bench/tune_bench_tpe_speed (tune's side; see bench/tpe_speed.cpp), optionally the same
program built from another commit (--baseline-binary, to show that a change kept tune's speed),
then the same method with optuna.samplers.TPESampler of each Optuna, each in its own process
with that Optuna on PYTHONPATH: for each mode (independent, multivariate) and history size N, an
in-memory study gets N COMPLETE trials with uniformly random params (study.add_trials) and the
same synthetic value as the C++ side, then K full trials are timed, each ask + 6 suggest_* +
tell. Writes one JSON document with every tool's rows.

Optuna 5.0 and 4.9 are looked for at $TUNE_OPTUNA50_PATH / $TUNE_OPTUNA49_PATH or
../shared/vendor/optuna-5.0 / -4.9 next to the source tree (skipped with a message when absent);
tune runs with --preset (optuna-5.0 by default, so that its defaults face Optuna 5.0's). Run with
/usr/bin/python3.
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

from format_results import quantile  # bench/ is on sys.path when run as a script

MODELS = ["bert-base-uncased", "bert-large-uncased", "roberta-base", "roberta-large",
          "microsoft/deberta-v3-base", "microsoft/deberta-v3-large", "xlm-roberta-base"]
BATCH_SIZES = [8, 12, 16, 24, 32, 48, 64]
GRAD_ACCUMS = [1, 2, 3, 4, 6, 8]


def synthetic_value(model_index, batch_size, grad_accum, max_length, lr, weight_decay):
    """The same formula as SyntheticValue in bench/tpe_speed.cpp."""
    return ((math.log10(lr) + 4.5) ** 2 + 10 * (weight_decay - 0.01) ** 2
            + 0.1 * abs(math.log2(batch_size * grad_accum / 32.0))
            + ((max_length - 256.0) / 256.0) ** 2 + 0.01 * model_index)


def optuna_rows(sizes, timed, seed, modes, tool):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    D = optuna.distributions
    dists = {
        "model": D.CategoricalDistribution(MODELS),
        "batch_size": D.CategoricalDistribution(BATCH_SIZES),
        "grad_accum": D.CategoricalDistribution(GRAD_ACCUMS),
        "max_length": D.IntDistribution(128, 512, step=32),
        "lr": D.FloatDistribution(1e-6, 1e-3, log=True),
        "weight_decay": D.FloatDistribution(0.0, 0.1),
    }
    rows = []
    for mode in modes:
        for n in sizes:
            rng = random.Random(seed)
            sampler = optuna.samplers.TPESampler(seed=seed, multivariate=(mode == "multivariate"))
            study = optuna.create_study(sampler=sampler, direction="minimize")
            t0 = time.perf_counter()
            prefill = []
            for _ in range(n):
                m = rng.randrange(7)
                p = {"model": MODELS[m], "batch_size": rng.choice(BATCH_SIZES),
                     "grad_accum": rng.choice(GRAD_ACCUMS),
                     "max_length": 128 + 32 * rng.randrange(13),
                     "lr": math.exp(rng.uniform(math.log(1e-6), math.log(1e-3))),
                     "weight_decay": rng.uniform(0.0, 0.1)}
                value = synthetic_value(m, p["batch_size"], p["grad_accum"], p["max_length"],
                                        p["lr"], p["weight_decay"])
                prefill.append(optuna.trial.create_trial(params=p, distributions=dists,
                                                         value=value))
            study.add_trials(prefill)
            prefill_s = time.perf_counter() - t0
            k = timed(n)
            ms = []
            for _ in range(k):
                t0 = time.perf_counter()
                trial = study.ask()
                model = trial.suggest_categorical("model", MODELS)
                bs = trial.suggest_categorical("batch_size", BATCH_SIZES)
                ga = trial.suggest_categorical("grad_accum", GRAD_ACCUMS)
                ml = trial.suggest_int("max_length", 128, 512, step=32)
                lr = trial.suggest_float("lr", 1e-6, 1e-3, log=True)
                wd = trial.suggest_float("weight_decay", 0.0, 0.1)
                study.tell(trial, synthetic_value(MODELS.index(model), bs, ga, ml, lr, wd))
                ms.append((time.perf_counter() - t0) * 1e3)
            row = {"tool": tool, "mode": mode, "n_history": n, "timed_trials": k, "reps": 1,
                   "median_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms),
                   "q1_ms": quantile(ms, 0.25), "q3_ms": quantile(ms, 0.75),
                   "min_ms": min(ms), "max_ms": max(ms), "first_median_ms": ms[0],
                   "prefill_s": prefill_s}
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def tune_rows(binary, args, tool):
    t0 = time.perf_counter()
    out = subprocess.run([binary, "--sizes", args.sizes, "--modes", args.modes,
                          "--timed", str(args.tune_timed), "--reps", str(args.tune_reps),
                          "--seed", str(args.seed)]
                         + (["--preset", args.preset] if tool == "tune" else []),
                         check=True, capture_output=True, text=True).stdout
    rows = [dict(json.loads(line), tool=tool) for line in out.splitlines() if line.strip()]
    for row in rows:
        print(json.dumps(row), file=sys.stderr)
    return rows, time.perf_counter() - t0


def optuna_in_process(tool, pythonpath, argv):
    """Runs this script with --optuna-only under `pythonpath` (None: Debian's Optuna)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--optuna-only", tool] + argv,
                         check=True, stdout=subprocess.PIPE, text=True, env=env).stdout
    doc = json.loads(out)
    return doc["rows"], doc["version"], time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune-binary", default="build/bench/tune_bench_tpe_speed")
    ap.add_argument("--baseline-binary", default="",
                    help="tune_bench_tpe_speed built from another commit (column 'tune before')")
    ap.add_argument("--baseline-label", default="", help="what the baseline is, for the doc")
    ap.add_argument("--sizes", default="100,1000,3000,5000")
    ap.add_argument("--modes", default="independent,multivariate")
    ap.add_argument("--tune-timed", type=int, default=20, help="timed trials per repetition")
    ap.add_argument("--tune-reps", type=int, default=10, help="fresh studies per (mode, N)")
    ap.add_argument("--optuna-timed", type=int, default=20, help="timed Optuna trials per N")
    ap.add_argument("--optuna-timed-large", type=int, default=20,
                    help="timed Optuna trials for N >= --large")
    ap.add_argument("--large", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--optuna", default="5.0,4.9", help="Optuna versions to time (5.0, 4.9, 3.1)")
    ap.add_argument("--preset", default="optuna-5.0", help="tune's TPE preset")
    ap.add_argument("--optuna-only", help=argparse.SUPPRESS)
    ap.add_argument("--out", help="JSON result file")
    args, _ = ap.parse_known_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = args.modes.split(",")
    timed = lambda n: args.optuna_timed_large if n >= args.large else args.optuna_timed
    if args.optuna_only:
        import optuna
        rows = optuna_rows(sizes, timed, args.seed, modes, args.optuna_only)
        print(json.dumps({"rows": rows, "version": optuna.__version__}))
        return
    if not args.out:
        ap.error("--out is required")

    rows, seconds, versions = [], {}, {}
    if args.baseline_binary:
        r, seconds["tune_before"] = tune_rows(args.baseline_binary, args, "tune_before")
        rows += r
    r, seconds["tune"] = tune_rows(args.tune_binary, args, "tune")
    rows += r
    argv = ["--sizes", args.sizes, "--modes", args.modes, "--optuna-timed", str(args.optuna_timed),
            "--optuna-timed-large", str(args.optuna_timed_large), "--large", str(args.large),
            "--seed", str(args.seed)]
    wanted = args.optuna.split(",")
    from tpe_quality import optuna_path
    for version in ("5.0", "4.9"):
        tool = "optuna" + version.replace(".", "")
        path = optuna_path(version) if version in wanted else None
        if path is not None:
            r, versions[tool], seconds[tool] = optuna_in_process(tool, path, argv)
            rows += r
    if "3.1" in wanted:
        r, versions["optuna31"], seconds["optuna31"] = optuna_in_process("optuna31", None, argv)
        rows += r

    with open(args.out, "w") as f:
        json.dump({"rows": rows, "seconds": seconds, "versions": versions,
                   "baseline_label": args.baseline_label, "settings": vars(args)}, f, indent=1)


if __name__ == "__main__":
    main()
