#!/usr/bin/python3
"""TPE optimisation quality: tune vs Optuna 5.0, 4.9 and Debian's Optuna 3.1, in one run.

1. Parity: Python copies of the built-in functions (src/objectives/functions.cpp, with the
   model catalog read from configs/models.json) must equal tune's on random points
   (`tune_bench_tpe_quality --eval`) to 1e-9; otherwise this script stops with exit code 1.
2. Startup points: n_startup_trials points per (problem, seed), drawn here (uniformly, seeded by
   problem and seed); every tool enqueues the same ones, so the runs are paired and every tool's
   TPE starts from the same history.
3. tune: `tune_bench_tpe_quality --run` once per sampler setting (--tune-samplers: label=JSON of
   "tpe" options, e.g. tune={"preset": "optuna-5.0"}), independent and multivariate.
4. Optuna: TPESampler(seed=s, n_startup_trials=10, multivariate=...) of each Optuna found, in
   worker processes (at most --jobs at a time) started with that Optuna on PYTHONPATH. Optuna
   5.0 and 4.9 are looked for at $TUNE_OPTUNA50_PATH / $TUNE_OPTUNA49_PATH or
   ../shared/vendor/optuna-5.0 / -4.9 next to the source tree (skipped with a message when
   absent); Optuna 3.1 is Debian's python3-optuna. Optuna 5.0's multivariate mode is its
   default TPESampler() for one objective.
An OOM trial (mixed_oom, mixed_cond_oom) is told PRUNED without reports in every tool (tune also
records user attribute oom=true, as its objectives do) and does not count towards the best
value. Writes the per-trial values of every run to one JSON file; bench/format_results.py
summarises.

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
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBLEMS = ["sphere", "rosenbrock", "branin", "hartmann6", "rosenbrock10", "sphere20", "mixed",
            "mixed_oom", "mixed_cond", "mixed_cond_oom"]
OOM_PROBLEMS = ("mixed_oom", "mixed_cond_oom")
REUSED = {}  # tool -> the file its runs were taken from (--optuna-from)
DEFAULT_TUNE_SAMPLERS = 'tune={"preset": "optuna-5.0"};tune49={"preset": "optuna-4.9"}'


# --- the model catalog (src/trial/model_catalog.cpp) -------------------------------------------------

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


def base_function(problem):
    """The built-in function a problem evaluates."""
    if problem.startswith("mixed"):
        return "mixed"
    return {"rosenbrock10": "rosenbrock", "sphere20": "sphere"}.get(problem, problem)


def evaluate(problem, catalog, params, oom_threshold=None):
    """(value, oom) at the function's parameters; value is None when a mixed problem runs out
    of memory."""
    name = base_function(problem)
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
    raise ValueError(f"unknown problem {problem}")


# --- spaces and sampling ------------------------------------------------------------------------

def read_space(binary, problem):
    """[{name, param, spec, when_heavy}] in suggest order (tune_bench_tpe_quality --space)."""
    out = subprocess.run([binary, "--space", problem], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def active(entry, catalog, chosen):
    """Whether a space entry is suggested, given the trial parameters chosen so far."""
    if entry["when_heavy"] is None:
        return True
    return catalog[chosen["model"]]["heavy"] == entry["when_heavy"]


def function_params(space, trial_params):
    """The function's parameters from a trial's parameters."""
    return {e["param"]: trial_params[e["name"]] for e in space if e["name"] in trial_params}


def random_point(space, catalog, rng):
    p = {}
    for e in space:
        if not active(e, catalog, p):
            continue
        spec = e["spec"]
        t = spec["type"]
        if t == "float":
            if spec.get("log"):
                p[e["name"]] = math.exp(rng.uniform(math.log(spec["low"]), math.log(spec["high"])))
            else:
                p[e["name"]] = rng.uniform(spec["low"], spec["high"])
        elif t == "int":
            step = spec.get("step", 1)
            p[e["name"]] = spec["low"] + step * rng.randrange(
                (spec["high"] - spec["low"]) // step + 1)
        else:
            p[e["name"]] = rng.choice(spec["choices"])
    return p


def suggest(trial, space, catalog):
    p = {}
    for e in space:
        if not active(e, catalog, p):
            continue
        spec, name = e["spec"], e["name"]
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


def random_oom_share(catalog, space, oom_threshold):
    """Exact share of uniformly random configs above the memory threshold: model uniform, then
    the batch sizes and lengths of its branch uniform."""
    def values(e):
        s = e["spec"]
        return s["choices"] if "choices" in s else range(s["low"], s["high"] + 1, s["step"])
    shares = []
    models = next(e for e in space if e["param"] == "model")["spec"]["choices"]
    for model in models:
        chosen = {"model": model}
        entries = {e["param"]: e for e in space if active(e, catalog, chosen)}
        total = over = 0
        for bs in values(entries["batch_size"]):
            for length in values(entries["max_length"]):
                total += 1
                over += mixed_memory_proxy(
                    catalog, {"model": model, "batch_size": bs, "max_length": length}) > oom_threshold
        shares.append(over / total)
    return sum(shares) / len(shares)


# --- 1. parity ----------------------------------------------------------------------------------

def parity_check(binary, catalog, spaces, oom_threshold, n_points, abs_tol=1e-9, rel_tol=1e-12):
    rng = random.Random(12345)
    report = {}
    for problem, space in spaces.items():
        threshold = oom_threshold if problem in OOM_PROBLEMS else None
        points = [function_params(space, random_point(space, catalog, rng))
                  for _ in range(n_points)]
        cmd = [binary, "--eval", problem]
        if threshold is not None:
            cmd += ["--oom-threshold", repr(threshold)]
        out = subprocess.run(cmd, input="".join(json.dumps(p) + "\n" for p in points),
                             check=True, capture_output=True, text=True).stdout
        results = [json.loads(line) for line in out.splitlines() if line.strip()]
        if len(results) != len(points):
            sys.exit(f"PARITY FAILURE: {problem}: {len(points)} points, {len(results)} answers")
        max_diff, n_oom = 0.0, 0
        for p, r in zip(points, results):
            value, oom = evaluate(problem, catalog, p, threshold)
            if oom != bool(r.get("oom", False)):
                sys.exit(f"PARITY FAILURE: {problem}: OOM differs at {json.dumps(p)}: "
                         f"python {oom}, tune {r}")
            n_oom += oom
            pairs = [] if oom else [(value, r["value"])]
            if base_function(problem) == "mixed":
                pairs.append((mixed_memory_proxy(catalog, p), r["proxy"]))
            for a, b in pairs:
                diff = abs(a - b)
                max_diff = max(max_diff, diff)
                if diff > abs_tol and diff > rel_tol * abs(b):
                    sys.exit(f"PARITY FAILURE: {problem} at {json.dumps(p)}: python {a!r}, "
                             f"tune {b!r} (|diff| {diff:.3g})")
        report[problem] = {"points": n_points, "max_abs_diff": max_diff, "oom_points": n_oom}
        print(f"parity {problem}: {n_points} points, max |diff| {max_diff:.3g}, {n_oom} OOM",
              file=sys.stderr)
    return report


# --- 4. Optuna (in worker processes) --------------------------------------------------------------

def optuna_run(job):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")
    sampler = optuna.samplers.TPESampler(seed=job["seed"], n_startup_trials=job["n_startup"],
                                         multivariate=(job["mode"] == "multivariate"))
    study = optuna.create_study(sampler=sampler, direction="minimize")
    for params in job["startup"]:  # the same startup points as tune
        study.enqueue_trial(params)
    threshold = job["oom_threshold"] if job["function"] in OOM_PROBLEMS else None
    catalog, space = job["catalog"], job["space"]
    values, ooms = [], []
    t0 = time.perf_counter()
    for _ in range(job["trials"]):
        trial = study.ask()
        params = function_params(space, suggest(trial, space, catalog))
        value, oom = evaluate(job["function"], catalog, params, threshold)
        if oom:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, value)
        values.append(value)
        ooms.append(int(oom))
    return {"tool": job["tool"], "mode": job["mode"], "function": job["function"],
            "seed": job["seed"], "values": values, "oom": ooms,
            "seconds": time.perf_counter() - t0}


def optuna_worker(jobs_path, out_path, n_jobs):
    """Runs the jobs of one Optuna version (the one on this process's PYTHONPATH)."""
    import optuna

    with open(jobs_path) as f:
        jobs = json.load(f)
    runs = []
    t0 = time.perf_counter()
    with multiprocessing.Pool(n_jobs) as pool:
        for i, run in enumerate(pool.imap(optuna_run, jobs), 1):
            runs.append(run)
            if i % 20 == 0 or i == len(jobs):
                print(f"optuna {optuna.__version__}: {i}/{len(jobs)} runs, "
                      f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
                # Written as it goes: an interrupted run leaves the finished runs behind.
                with open(out_path + ".partial", "w") as f:
                    json.dump({"version": optuna.__version__, "runs": runs}, f)
    with open(out_path, "w") as f:
        json.dump({"version": optuna.__version__, "runs": runs}, f)


def optuna_path(version="4.9"):
    """The vendored Optuna `version`'s source tree, or None (saying that its columns are
    skipped)."""
    env = "TUNE_OPTUNA" + version.replace(".", "") + "_PATH"
    path = os.environ.get(env) or os.path.join(ROOT, "..", "shared", "vendor", "optuna-" + version)
    if os.path.isdir(os.path.join(path, "optuna")):
        return os.path.abspath(path)
    print(f"SKIPPED Optuna {version}: not found at ${env} or ../shared/vendor/optuna-{version} "
          "next to the source tree", file=sys.stderr)
    return None


def optuna49_path():
    return optuna_path("4.9")


def reused_optuna(paths, tool, jobs, subset_ok=False):
    """The runs of `tool` in earlier outputs (--optuna-from, comma-separated) when they are
    exactly `jobs` (same problems, modes, seeds, trials, startup points and threshold); else
    None. With `subset_ok`, the ones they hold, even if not all (peers run piecewise or cut
    short). Returns (runs, version, seconds summed over the files)."""
    have, versions, seconds, files = {}, set(), 0.0, []
    key = lambda r: (r["function"], r["mode"], r["seed"])
    for path in filter(None, (paths or "").split(",")):
        with open(path) as f:
            doc = json.load(f)
        if tool not in doc.get("versions", {}):
            continue
        if doc["settings"]["oom_threshold"] != jobs[0]["oom_threshold"]:
            continue
        startup = doc.get("startup", {})
        for r in doc["runs"]:
            if (r["tool"] == tool and startup.get(r["function"], {}).get(str(r["seed"]))
                    is not None):
                have[key(r)] = (r, startup[r["function"]][str(r["seed"])])
        versions.add(doc["versions"][tool])
        seconds += doc["seconds"][tool]
        files.append(os.path.basename(path))
    if len(versions) != 1:
        return None
    taken = []
    for job in jobs:
        r, start = have.get(key(job), (None, None))
        if r is not None and len(r["values"]) == job["trials"] and start == job["startup"]:
            taken.append(r)
        elif not subset_ok:
            return None
    print(f"{tool}: {len(taken)} of {len(jobs)} runs reused from {', '.join(files)}",
          file=sys.stderr)
    REUSED[tool] = {"files": files, "runs": len(taken), "of": len(jobs)}
    return taken, versions.pop(), seconds


def run_optuna(tool, pythonpath, jobs, n_jobs, out_prefix, reuse_from=None, subset_ok=False):
    """Runs `jobs` in a worker process with `pythonpath` (None: Debian's Optuna), or takes them
    from an earlier output (`reuse_from`) when it holds exactly these runs (or, `subset_ok`,
    some of them)."""
    reused = reused_optuna(reuse_from, tool, jobs, subset_ok)
    if reused is not None:
        return reused
    jobs_path, out_path = f"{out_prefix}.{tool}.jobs.json", f"{out_prefix}.{tool}.json"
    for job in jobs:
        job["tool"] = tool
    with open(jobs_path, "w") as f:
        json.dump(jobs, f)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    t0 = time.perf_counter()
    subprocess.run([sys.executable, os.path.abspath(__file__), "--optuna-worker", jobs_path,
                    "--out", out_path, "--jobs", str(n_jobs)], check=True, env=env)
    with open(out_path) as f:
        result = json.load(f)
    return result["runs"], result["version"], time.perf_counter() - t0


# --- main ---------------------------------------------------------------------------------------

def parse_samplers(text):
    """'label=JSON;label=JSON' -> {label: options}."""
    out = {}
    for item in filter(None, (s.strip() for s in text.split(";"))):
        label, _, options = item.partition("=")
        out[label.strip()] = json.loads(options)
    return out


def run_tune(args, samplers, startup_path, functions):
    runs, seconds = [], {}
    for label, options in samplers.items():
        t0 = time.perf_counter()
        out = subprocess.run([args.tune_binary, "--run", "--startup", startup_path,
                              "--functions", ",".join(functions), "--modes", args.modes,
                              "--seeds", str(args.seeds), "--first-seed", str(args.first_seed),
                              "--trials", str(args.trials), "--oom-threshold",
                              repr(args.oom_threshold), "--n-startup-trials",
                              str(args.n_startup_trials), "--sampler", json.dumps(options),
                              "--label", label],
                             check=True, capture_output=True, text=True).stdout
        runs += [json.loads(line) for line in out.splitlines() if line.strip()]
        seconds[label] = time.perf_counter() - t0
        print(f"{label}: {len(runs)} runs so far, {seconds[label]:.1f} s", file=sys.stderr)
    return runs, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune-binary", default="build/bench/tune_bench_tpe_quality")
    ap.add_argument("--catalog", default=os.path.join(ROOT, "configs", "models.json"))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--n-startup-trials", type=int, default=10)
    ap.add_argument("--oom-threshold", type=float, default=16000.0)
    ap.add_argument("--functions", default=",".join(PROBLEMS))
    ap.add_argument("--modes", default="independent,multivariate")
    ap.add_argument("--tune-samplers", default=DEFAULT_TUNE_SAMPLERS,
                    help="label=JSON;... : the tune columns and their tpe options")
    ap.add_argument("--optuna", default="5.0,4.9", help="Optuna versions to run (5.0, 4.9, 3.1)")
    ap.add_argument("--optuna-from", help="earlier outputs (comma-separated) whose Optuna runs "
                    "are reused when they are the same runs (problems, modes, seeds, trials, "
                    "startup points)")
    ap.add_argument("--optuna-subset-ok", action="store_true",
                    help="with --optuna-from: take the Optuna runs it holds even if not all "
                    "(the missing cells are shown as such)")
    ap.add_argument("--parity-points", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=2, help="parallel Optuna processes")
    ap.add_argument("--optuna-worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.optuna_worker:
        return optuna_worker(args.optuna_worker, args.out, args.jobs)
    functions = args.functions.split(",")

    catalog = load_catalog(args.catalog)
    spaces = {f: read_space(args.tune_binary, f) for f in functions}
    parity = parity_check(args.tune_binary, catalog, spaces, args.oom_threshold,
                          args.parity_points)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    startup = {f: {str(seed): [random_point(spaces[f], catalog,
                                            random.Random(f"startup-{f}-{seed}"))
                               for _ in range(args.n_startup_trials)]
                   for seed in seeds}
               for f in functions}
    startup_path = args.out + ".startup.json"
    with open(startup_path, "w") as f:
        json.dump(startup, f)

    samplers = parse_samplers(args.tune_samplers)
    runs, seconds = run_tune(args, samplers, startup_path, functions)
    versions = {}
    jobs = [{"function": f, "mode": mode, "seed": seed, "trials": args.trials,
             "n_startup": args.n_startup_trials, "oom_threshold": args.oom_threshold,
             "space": spaces[f], "catalog": catalog, "startup": startup[f][str(seed)]}
            for mode in args.modes.split(",") if mode for f in functions for seed in seeds]
    wanted = args.optuna.split(",")
    for version in ("5.0", "4.9"):
        if version not in wanted:
            continue
        path, tool = optuna_path(version), "optuna" + version.replace(".", "")
        if path is not None:
            r, versions[tool], seconds[tool] = run_optuna(
                tool, path, [dict(j) for j in jobs], args.jobs, args.out, args.optuna_from,
                args.optuna_subset_ok)
            runs += r
    if "3.1" in wanted:
        r, versions["optuna31"], seconds["optuna31"] = run_optuna(
            "optuna31", None, [dict(j) for j in jobs], args.jobs, args.out, args.optuna_from,
                args.optuna_subset_ok)
        runs += r

    oom_share = {f: random_oom_share(catalog, spaces[f], args.oom_threshold)
                 for f in functions if f in OOM_PROBLEMS}
    with open(args.out, "w") as f:
        json.dump({"runs": runs, "parity": parity, "random_oom_share": oom_share,
                   "startup": startup, "reused": REUSED,
                   "seconds": seconds, "versions": versions, "samplers": samplers,
                   "jobs": args.jobs, "settings": vars(args)}, f)


if __name__ == "__main__":
    main()
