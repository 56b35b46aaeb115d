#!/usr/bin/python3
"""Multi-objective samplers: tune vs Optuna (4.9, or 5.0 with --optuna), hypervolume and speed.

1. Parity: Python copies of the problems (src/objectives/mo_functions.cpp, functions.cpp's
   mixed) must equal tune's (`tune_bench_mo_quality --eval`) on random points to 1e-9; otherwise
   this script stops with exit code 1.
2. Quality: every sampler (--samplers: tpe = multi-objective TPE, nsgaii) on every problem for
   --seeds seeds and --trials trials, in tune (`tune_bench_mo_quality --run`) and in Optuna 4.9
   (TPESampler(seed=s), NSGAIISampler(seed=s), defaults otherwise; worker processes). Each run's
   hypervolume after 100, 200 and 500 trials is measured the same way for both tools: Optuna's
   compute_hypervolume over the COMPLETE trials inside the problem's fixed reference box
   (REFERENCE). An OOM trial (mixed_memory above the threshold) is told PRUNED without values.
3. Speed: one run of --speed-trials trials per sampler on zdt1 and dtlz2 in both tools; the mean
   wall time per trial (ask, suggest, evaluate, tell) over the last 100 trials.
Optuna 4.9 is looked for at $TUNE_OPTUNA49_PATH or ../shared/vendor/optuna-4.9 next to the
source tree; --optuna ../shared/vendor/optuna-5.0 makes Optuna 5.0 the peer (tune at its
defaults, Optuna 5.0's preset, against Optuna 5.0's). Writes every run to --out (JSON) and, with --doc, the summary into the
<!-- mo:begin --> ... <!-- mo:end --> section of docs/benchmarks.md.

Run with /usr/bin/python3.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "bench"))
import format_results  # noqa: E402  (statistics, machine)
import tpe_quality  # noqa: E402  (the mixed function and the model catalog)

PROBLEMS = ["zdt1", "zdt2", "zdt3", "dtlz2", "wfg4", "mixed_memory"]
# Reference points: about 1.1 x the largest value each objective takes on the problem's domain
# (mixed_memory: its largest error, and 1.1 x the OOM threshold), so every trial counts.
REFERENCE = {"zdt1": [1.1, 11.0], "zdt2": [1.1, 11.0], "zdt3": [1.1, 11.0],
             "dtlz2": [3.85, 3.85, 3.85], "wfg4": [3.3, 5.5], "mixed_memory": [1.0, 17600.0]}
CHECKPOINTS = [100, 200, 500]
OOM_THRESHOLD = 16000.0


# --- the problems (src/objectives/mo_functions.cpp) ---------------------------------------------

def zdt(name, x):
    f1 = x[0]
    g = 1.0 + 9.0 * sum(x[1:]) / (len(x) - 1)
    r = f1 / g
    h = 1.0 - math.sqrt(r)
    if name == "zdt2":
        h = 1.0 - r * r
    if name == "zdt3":
        h = 1.0 - math.sqrt(r) - r * math.sin(10.0 * math.pi * f1)
    return [f1, g * h]


def dtlz2(x):
    g = sum((v - 0.5) ** 2 for v in x[2:])
    a, b = x[0] * math.pi / 2, x[1] * math.pi / 2
    return [(1 + g) * math.cos(a) * math.cos(b), (1 + g) * math.cos(a) * math.sin(b),
            (1 + g) * math.sin(a)]


def s_multi(y, a, b, c):
    t = abs(y - c) / (2.0 * (math.floor(c - y) + c))
    return (1.0 + math.cos((4.0 * a + 2.0) * math.pi * (0.5 - t)) + 4.0 * b * t * t) / (b + 2.0)


def wfg4(z):
    y = [s_multi(v / (2.0 * (i + 1)), 30, 10, 0.35) for i, v in enumerate(z)]
    position = sum(y[:4]) / 4
    distance = sum(y[4:]) / (len(z) - 4)
    return [distance + 2.0 * math.sin(position * math.pi / 2),
            distance + 4.0 * math.cos(position * math.pi / 2)]


def evaluate(problem, catalog, params):
    """The values at params, or None when mixed_memory runs out of memory."""
    if problem == "mixed_memory":
        if tpe_quality.mixed_memory_proxy(catalog, params) > OOM_THRESHOLD:
            return None
        return [tpe_quality.mixed(catalog, params), tpe_quality.mixed_memory_proxy(catalog, params)]
    x = [float(params[f"x{i}"]) for i in range(len(params))]
    if problem == "dtlz2":
        return dtlz2(x)
    if problem == "wfg4":
        return wfg4(x)
    return zdt(problem, x)


def suggest(trial, name, spec):
    t = spec["type"]
    if t == "float":
        return trial.suggest_float(name, spec["low"], spec["high"], log=spec.get("log", False),
                                   step=spec.get("step"))
    if t == "int":
        return trial.suggest_int(name, spec["low"], spec["high"], log=spec.get("log", False),
                                 step=spec.get("step", 1))
    return trial.suggest_categorical(name, spec["choices"])


def random_params(rng, space):
    out = {}
    for e in space:
        s = e["spec"]
        if s["type"] == "float":
            out[e["name"]] = (math.exp(rng.uniform(math.log(s["low"]), math.log(s["high"])))
                              if s.get("log") else rng.uniform(s["low"], s["high"]))
        elif s["type"] == "int":
            out[e["name"]] = rng.randrange(s["low"], s["high"] + 1, s.get("step", 1))
        else:
            out[e["name"]] = rng.choice(s["choices"])
    return out


# --- tune ---------------------------------------------------------------------------------------

def spaces(binary):
    return {p: json.loads(subprocess.run([binary, "--space", p], capture_output=True, text=True,
                                         check=True).stdout) for p in PROBLEMS}


def check_parity(binary, space, catalog):
    rng = random.Random(7)
    for problem in PROBLEMS:
        points = [random_params(rng, space[problem]) for _ in range(200)]
        out = subprocess.run([binary, "--eval", problem], capture_output=True, text=True,
                             check=True, input="\n".join(json.dumps(p) for p in points))
        for p, line in zip(points, out.stdout.splitlines()):
            got = json.loads(line)
            want = evaluate(problem, catalog, p)
            if want is None or "oom" in got:
                if not (want is None and "oom" in got):
                    raise SystemExit(f"parity: {problem} at {p}: tune {got}, Python {want}")
                continue
            if any(abs(a - b) > 1e-9 * max(1.0, abs(b)) for a, b in zip(got["values"], want)):
                raise SystemExit(f"parity: {problem} at {p}: tune {got}, Python {want}")
    print("parity: the Python problems equal tune's on 200 random points each", file=sys.stderr)


def run_tune(binary, samplers, problems, seeds, trials, options=None):
    out = subprocess.run([binary, "--run", "--samplers", ",".join(samplers), "--problems",
                          ",".join(problems), "--seeds", str(seeds), "--trials", str(trials),
                          "--oom-threshold", str(OOM_THRESHOLD),
                          "--sampler-options", json.dumps(options or {})],
                         capture_output=True, text=True, check=True)
    runs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    for run in runs:
        if options:
            run["options"] = options
    return runs


# --- Optuna -------------------------------------------------------------------------------------

def optuna_worker(job):
    optuna_path, sampler_name, problem, seed, trials, space = job
    sys.path.insert(0, optuna_path)
    import warnings
    warnings.simplefilter("ignore")
    import optuna
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    catalog = tpe_quality.load_catalog(os.path.join(ROOT, "configs", "models.json"))
    sampler = (optuna.samplers.TPESampler(seed=seed) if sampler_name == "tpe"
               else optuna.samplers.NSGAIISampler(seed=seed))
    n_obj = len(REFERENCE[problem])
    study = optuna.create_study(directions=["minimize"] * n_obj, sampler=sampler)
    values, ms = [], []
    for _ in range(trials):
        t0 = time.perf_counter()
        trial = study.ask()
        params = {e["name"]: suggest(trial, e["name"], e["spec"]) for e in space}
        v = evaluate(problem, catalog, params)
        if v is None:
            trial.set_user_attr("oom", True)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, v)
        values.append(v)
        ms.append((time.perf_counter() - t0) * 1000)
    return {"tool": "optuna-" + optuna.__version__, "sampler": sampler_name, "problem": problem,
            "seed": seed, "values": values, "ms": ms}


def run_optuna(optuna_path, samplers, problems, seeds, trials, space, procs):
    jobs = [(optuna_path, s, p, seed, trials, space[p])
            for s in samplers for p in problems for seed in range(seeds)]
    with multiprocessing.Pool(procs) as pool:
        return list(pool.imap_unordered(optuna_worker, jobs))


# --- hypervolume --------------------------------------------------------------------------------

def hypervolume_after(run, k):
    import numpy as np
    from optuna._hypervolume import compute_hypervolume
    ref = np.array(REFERENCE[run["problem"]])
    pts = [v for v in run["values"][:k] if v is not None and all(a <= r for a, r in zip(v, ref))]
    return float(compute_hypervolume(np.array(pts), ref)) if pts else 0.0


# --- main ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune-binary", required=True)
    ap.add_argument("--optuna", default=os.environ.get(
        "TUNE_OPTUNA49_PATH", os.path.join(ROOT, "..", "shared", "vendor", "optuna-4.9")))
    ap.add_argument("--samplers", default="tpe,nsgaii")
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--speed-trials", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sampler-options", type=json.loads, default={},
                    help="JSON options for tune's samplers (a variant), e.g. "
                    "'{\"oom_feasibility\": false}'")
    ap.add_argument("--no-optuna", action="store_true",
                    help="tune's runs only (a variant compared with another file's Optuna runs)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    optuna_path = os.path.abspath(args.optuna)
    if not os.path.isfile(os.path.join(optuna_path, "optuna", "__init__.py")):
        raise SystemExit(f"no Optuna at {optuna_path} (--optuna, or set TUNE_OPTUNA49_PATH)")
    sys.path.insert(0, optuna_path)
    samplers, problems = args.samplers.split(","), args.problems.split(",")
    catalog = tpe_quality.load_catalog(os.path.join(ROOT, "configs", "models.json"))
    space = spaces(args.tune_binary)
    check_parity(args.tune_binary, space, catalog)
    start = time.monotonic()
    runs = run_tune(args.tune_binary, samplers, problems, args.seeds, args.trials,
                    args.sampler_options)
    tune_s = time.monotonic() - start
    print(f"tune: {len(runs)} runs in {tune_s:.0f} s", file=sys.stderr)
    if not args.no_optuna:
        start = time.monotonic()
        runs += run_optuna(optuna_path, samplers, problems, args.seeds, args.trials, space,
                           args.jobs)
        print(f"Optuna: {time.monotonic() - start:.0f} s", file=sys.stderr)
    speed = []
    if args.speed_trials:
        speed = run_tune(args.tune_binary, samplers, ["zdt1", "dtlz2"], 1, args.speed_trials)
        speed += run_optuna(optuna_path, samplers, ["zdt1", "dtlz2"], 1, args.speed_trials,
                            space, args.jobs)
    for run in runs:
        run["hv"] = {str(k): hypervolume_after(run, k) for k in CHECKPOINTS if k <= args.trials}
    for run in speed:
        run["ms_last_100"] = sum(run["ms"][-100:]) / len(run["ms"][-100:])
        del run["values"], run["ms"]
    for run in runs:
        del run["ms"]
    with open(args.out, "w") as f:
        json.dump({"runs": runs, "speed": speed, "trials": args.trials, "seeds": args.seeds,
                   "reference": REFERENCE, "machine": format_results.machine(
                       os.path.dirname(os.path.dirname(args.tune_binary)))}, f)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
