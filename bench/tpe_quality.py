#!/usr/bin/python3
"""TPE optimisation quality, tune vs Debian's Optuna 3.1, in one run (issue 3).

1. Parity: Python copies of the built-in functions (src/objectives/functions.cpp, with the
   model catalog read from configs/models.json) must equal tune's on random points
   (`tune_bench_tpe_quality --eval`) to 1e-9; otherwise this script stops with exit code 1.
2. tune: `tune_bench_tpe_quality --run` (TpeSampler, n_startup_trials=10, independent and
   multivariate), seeds 0..S-1, T trials each.
3. Optuna: TPESampler(seed=s, n_startup_trials=10, multivariate=...) on the same spaces (read
   from `tune_bench_tpe_quality --space`, suggested in the same order) and the same functions.
   Both tools start from the same 10 startup points per (function, seed), drawn here and
   enqueued in each. "mixed_oom" is mixed with an OOM threshold: such a trial is told PRUNED
   without reports (tune also records user attribute oom=true, as its objectives do) and does
   not count towards the best value.
Writes the per-trial values of every run to one JSON file; bench/format_results.py summarises.

Run with /usr/bin/python3 (Debian's python3-optuna).
"""

import argparse
import json
import math
import multiprocessing
import os
import random
import subprocess
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUNCTIONS = ["sphere", "rosenbrock", "branin", "hartmann6", "mixed", "mixed_oom"]


# --- the model catalog (src/model_catalog.cpp) -------------------------------------------------

def encoder_parameter_count(m):
    """EncoderParameterCount: BERT-like and DeBERTa-v2 encoders."""
    h, i = m["hidden_size"], m["intermediate_size"]
    layer = 4 * (h * h + h) + 2 * (2 * h) + (h * i + i) + (i * h + h)
    embeddings = m["vocab_size"] * h + 2 * h
    if m.get("position_buckets", 0) > 0:
        extra = 2 * m["position_buckets"] * h + 2 * h
    else:
        embeddings += (m["max_position_embeddings"] + m.get("type_vocab_size", 0)) * h
        extra = h * h + h
    return embeddings + m["num_hidden_layers"] * layer + extra


def load_catalog(path):
    """name -> {model_type, num_parameters, num_hidden_layers, hidden_size, heavy}.

    heavy: stated per model, else num_parameters >= heavy_threshold_parameters (default 200M);
    num_parameters: stated, else derived from the architecture."""
    with open(path) as f:
        doc = json.load(f)
    threshold = doc.get("heavy_threshold_parameters", 200_000_000)
    catalog = {}
    for name, m in doc["models"].items():
        n = m["num_parameters"] if "num_parameters" in m else encoder_parameter_count(m)
        catalog[name] = {"model_type": m.get("model_type", ""), "num_parameters": n,
                         "num_hidden_layers": m["num_hidden_layers"],
                         "hidden_size": m["hidden_size"],
                         "heavy": bool(m["heavy"]) if "heavy" in m else n >= threshold}
    return catalog


# --- the functions (src/objectives/functions.cpp), same operation order ------------------------

def _number_or(params, name, fallback):
    v = params.get(name)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else fallback


def branin(x1, x2):
    pi = math.pi
    b, c, t = 5.1 / (4 * pi * pi), 5 / pi, 1 / (8 * pi)
    return (x2 - b * x1 * x1 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


HARTMANN_ALPHA = [1.0, 1.2, 3.0, 3.2]
HARTMANN_A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
              [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
HARTMANN_P = [[0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
              [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
              [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
              [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381]]


def hartmann6(x):
    total = 0.0
    for i in range(4):
        inner = 0.0
        for j in range(6):
            inner += HARTMANN_A[i][j] * (x[j] - HARTMANN_P[i][j]) ** 2
        total += HARTMANN_ALPHA[i] * math.exp(-inner)
    return -total


def _model(catalog, params):
    name = params.get("model")
    return catalog.get(name) if isinstance(name, str) else None


def mixed(catalog, params):
    m = _model(catalog, params)
    n_params = float(m["num_parameters"]) if m else 110e6
    quality = 0.80 + 0.03 * math.log2(max(n_params, 1e6) / 110e6)
    if m and m["model_type"] == "deberta-v2":
        quality += 0.03
    if m and m["model_type"] == "roberta":
        quality += 0.015
    if m and m["model_type"] == "xlm-roberta":
        quality -= 0.03
    quality = min(quality, 0.90)
    large = bool(m and m["heavy"])
    lr_opt = 1e-5 if large else 3e-5
    lr = _number_or(params, "lr", lr_opt)
    eff = _number_or(params, "batch_size", 16) * _number_or(params, "grad_accum", 2)
    length = _number_or(params, "max_length", 256)
    err = 1.0 - quality
    err += 0.06 * (math.log10(lr) - math.log10(lr_opt)) ** 2
    err += 0.01 * math.log2(eff / 32.0) ** 2
    err += 0.08 * max(0.0, (256.0 - length) / 128.0) ** 2
    err += 0.5 * (_number_or(params, "weight_decay", 0.01) - 0.01) ** 2
    err += 0.2 * (_number_or(params, "warmup_ratio", 0.06) - 0.06) ** 2
    err += 0.3 * (_number_or(params, "dropout", 0.1) - 0.1) ** 2
    err += 0.004 * abs(_number_or(params, "classifier_layers", 1) - 1)
    return err


def mixed_memory_proxy(catalog, params):
    m = _model(catalog, params)
    scale = (m["num_hidden_layers"] * m["hidden_size"]) / (12.0 * 768.0) if m else 1.0
    return _number_or(params, "batch_size", 16) * _number_or(params, "max_length", 256) * scale


def evaluate(name, catalog, params, oom_threshold=None):
    """(value, oom): value is None when the mixed function runs out of memory."""
    if name in ("sphere", "rosenbrock"):
        x = [float(params[f"x{i}"]) for i in range(len(params))]
        f = 0.0
        if name == "sphere":
            for v in x:
                f += v * v
        else:
            for i in range(len(x) - 1):
                f += 100 * (x[i + 1] - x[i] * x[i]) ** 2 + (1 - x[i]) ** 2
        return f, False
    if name == "branin":
        return branin(float(params["x1"]), float(params["x2"])), False
    if name == "hartmann6":
        return hartmann6([float(params[f"x{i}"]) for i in range(6)]), False
    if name == "mixed":
        if oom_threshold is not None and mixed_memory_proxy(catalog, params) > oom_threshold:
            return None, True
        return mixed(catalog, params), False
    raise ValueError(f"unknown function {name}")


# --- spaces and sampling ------------------------------------------------------------------------

def base_name(function):
    return "mixed" if function == "mixed_oom" else function


def read_space(binary, function):
    out = subprocess.run([binary, "--space", base_name(function)], check=True,
                         capture_output=True, text=True).stdout
    return [(name, spec) for name, spec in json.loads(out)]


def random_point(space, rng):
    p = {}
    for name, spec in space:
        t = spec["type"]
        if t == "float":
            if spec.get("log"):
                p[name] = math.exp(rng.uniform(math.log(spec["low"]), math.log(spec["high"])))
            else:
                p[name] = rng.uniform(spec["low"], spec["high"])
        elif t == "int":
            step = spec.get("step", 1)
            p[name] = spec["low"] + step * rng.randrange((spec["high"] - spec["low"]) // step + 1)
        else:
            p[name] = rng.choice(spec["choices"])
    return p


def suggest(trial, space):
    p = {}
    for name, spec in space:
        t = spec["type"]
        if t == "float":
            p[name] = trial.suggest_float(name, spec["low"], spec["high"],
                                          log=spec.get("log", False), step=spec.get("step"))
        elif t == "int":
            p[name] = trial.suggest_int(name, spec["low"], spec["high"],
                                        step=spec.get("step", 1), log=spec.get("log", False))
        else:
            p[name] = trial.suggest_categorical(name, spec["choices"])
    return p


# --- 1. parity ----------------------------------------------------------------------------------

def parity_check(binary, catalog, spaces, oom_threshold, n_points, abs_tol=1e-9, rel_tol=1e-12):
    rng = random.Random(12345)
    report = {}
    for function in FUNCTIONS:
        name = base_name(function)
        threshold = oom_threshold if function == "mixed_oom" else None
        points = [random_point(spaces[function], rng) for _ in range(n_points)]
        cmd = [binary, "--eval", name]
        if threshold is not None:
            cmd += ["--oom-threshold", repr(threshold)]
        out = subprocess.run(cmd, input="".join(json.dumps(p) + "\n" for p in points),
                             check=True, capture_output=True, text=True).stdout
        results = [json.loads(line) for line in out.splitlines() if line.strip()]
        if len(results) != len(points):
            sys.exit(f"PARITY FAILURE: {function}: {len(points)} points, {len(results)} answers")
        max_diff = 0.0
        n_oom = 0
        for p, r in zip(points, results):
            value, oom = evaluate(name, catalog, p, threshold)
            if oom != bool(r.get("oom", False)):
                sys.exit(f"PARITY FAILURE: {function}: OOM differs at {json.dumps(p)}: "
                         f"python {oom}, tune {r}")
            n_oom += oom
            pairs = [] if oom else [(value, r["value"])]
            if name == "mixed":
                pairs.append((mixed_memory_proxy(catalog, p), r["proxy"]))
            for a, b in pairs:
                diff = abs(a - b)
                max_diff = max(max_diff, diff)
                if diff > abs_tol and diff > rel_tol * abs(b):
                    sys.exit(f"PARITY FAILURE: {function} at {json.dumps(p)}: python {a!r}, "
                             f"tune {b!r} (|diff| {diff:.3g})")
        report[function] = {"points": n_points, "max_abs_diff": max_diff, "oom_points": n_oom}
        print(f"parity {function}: {n_points} points, max |diff| {max_diff:.3g}, "
              f"{n_oom} OOM", file=sys.stderr)
    return report


# --- 3. Optuna ----------------------------------------------------------------------------------

def optuna_run(job):
    function, mode, seed, n_trials, n_startup, oom_threshold, space, catalog, startup = job
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup,
                                         multivariate=(mode == "multivariate"))
    study = optuna.create_study(sampler=sampler, direction="minimize")
    for params in startup:  # the same startup points as tune (issue 3: "same startup trials")
        study.enqueue_trial(params)
    name = base_name(function)
    threshold = oom_threshold if function == "mixed_oom" else None
    values, ooms = [], []
    t0 = time.perf_counter()
    for _ in range(n_trials):
        trial = study.ask()
        params = suggest(trial, space)
        value, oom = evaluate(name, catalog, params, threshold)
        if oom:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, value)
        values.append(value)
        ooms.append(int(oom))
    return {"tool": "optuna", "mode": mode, "function": function, "seed": seed,
            "values": values, "oom": ooms, "seconds": time.perf_counter() - t0}


def random_oom_share(catalog, space, oom_threshold):
    """Exact share of the (discrete) memory-proxy grid above the threshold under uniform
    sampling: model x batch_size x max_length."""
    dims = {name: spec for name, spec in space}
    lengths = range(dims["max_length"]["low"], dims["max_length"]["high"] + 1,
                    dims["max_length"]["step"])
    total = over = 0
    for model in dims["model"]["choices"]:
        for bs in dims["batch_size"]["choices"]:
            for length in lengths:
                total += 1
                over += mixed_memory_proxy(
                    catalog, {"model": model, "batch_size": bs, "max_length": length}) > oom_threshold
    return over / total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune-binary", default="build/bench/tune_bench_tpe_quality")
    ap.add_argument("--catalog", default=os.path.join(ROOT, "configs", "models.json"))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--n-startup-trials", type=int, default=10)
    ap.add_argument("--oom-threshold", type=float, default=16000.0)
    ap.add_argument("--functions", default=",".join(FUNCTIONS))
    ap.add_argument("--tune-modes", default="independent,multivariate")
    ap.add_argument("--optuna-modes", default="independent,multivariate")
    ap.add_argument("--parity-points", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="parallel Optuna processes (quality only; nothing is timed)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    functions = args.functions.split(",")

    catalog = load_catalog(args.catalog)
    spaces = {f: read_space(args.tune_binary, f) for f in FUNCTIONS}
    parity = parity_check(args.tune_binary, catalog, spaces, args.oom_threshold,
                          args.parity_points)

    # Both tools start from the same n_startup_trials points per (function, seed), enqueued
    # before the first ask; TPE then takes over in each.
    startup = {f: {str(seed): [random_point(spaces[f], random.Random(f"startup-{f}-{seed}"))
                               for _ in range(args.n_startup_trials)]
                   for seed in range(args.seeds)}
               for f in functions}
    startup_path = args.out + ".startup.json"
    with open(startup_path, "w") as f:
        json.dump(startup, f)

    t0 = time.perf_counter()
    out = subprocess.run([args.tune_binary, "--run", "--startup", startup_path,
                          "--functions", ",".join(functions),
                          "--modes", args.tune_modes, "--seeds", str(args.seeds),
                          "--trials", str(args.trials), "--oom-threshold",
                          repr(args.oom_threshold), "--n-startup-trials",
                          str(args.n_startup_trials)],
                         check=True, capture_output=True, text=True).stdout
    runs = [json.loads(line) for line in out.splitlines() if line.strip()]
    tune_s = time.perf_counter() - t0
    print(f"tune: {len(runs)} runs in {tune_s:.1f} s", file=sys.stderr)

    t0 = time.perf_counter()
    jobs = [(f, mode, seed, args.trials, args.n_startup_trials, args.oom_threshold, spaces[f],
             catalog, startup[f][str(seed)])
            for mode in args.optuna_modes.split(",") if mode
            for f in functions for seed in range(args.seeds)]
    with multiprocessing.Pool(args.jobs) as pool:
        for i, run in enumerate(pool.imap(optuna_run, jobs), 1):
            runs.append(run)
            if i % 20 == 0 or i == len(jobs):
                print(f"optuna: {i}/{len(jobs)} runs, {time.perf_counter() - t0:.0f} s",
                      file=sys.stderr, flush=True)
    optuna_s = time.perf_counter() - t0

    with open(args.out, "w") as f:
        json.dump({"runs": runs, "parity": parity,
                   "random_oom_share": random_oom_share(catalog, spaces["mixed_oom"],
                                                        args.oom_threshold),
                   "seconds": {"tune": tune_s, "optuna": optuna_s, "optuna_jobs": args.jobs},
                   "settings": vars(args)}, f)


if __name__ == "__main__":
    main()
