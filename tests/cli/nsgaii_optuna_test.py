#!/usr/bin/env python3
"""NSGA-II studies that tune and Optuna 4.9 (or 5.0) continue from each other (issues 34, 44).

  nsgaii_optuna_test.py TUNE_BINARY OPTUNA_DIR [VERSION [VENV_PYTHON]]

VERSION is the Optuna to run beside tune, 4.9 (the default) or 5.0: Optuna 5.0's NSGAIISampler()
keeps 4.9's generations and parent caches, and tune's default ("constraints": "auto") is its rule.
Optuna 5.0 is the released one in tune's Python environment (VENV_PYTHON, or $TUNE_VENV_PYTHON),
else the source tree OPTUNA_DIR; 4.9 is the source tree OPTUNA_DIR. $TUNE_OPTUNA49_PATH and
$TUNE_OPTUNA50_PATH name another source tree (tests/testing/optuna_peer.py). The steps, for 4.9:

1. tune begins: 30 trials of a two-objective study on SQLite, each asked by its own
   `tune ask --sampler NSGAIISampler` process (population_size 6) and told by `tune tell`; then
   Optuna 4.9's NSGAIISampler continues it for 18 trials. The generations go on from where tune
   stopped (Optuna's first trial is in the generation tune's trials call for), Optuna keeps the
   parent lists tune cached, and every list tune cached is the one Optuna's own selection makes.
2. Optuna begins: 30 trials with NSGAIISampler; then `tune ask`/`tune tell` continue for 18. The
   generations go on, tune keeps Optuna's cached parents, and the parents tune selects for the
   new generations are the ones Optuna's selection makes on the same trials.
3. A single-objective study that `tune` runs itself with two trials at once (jobs 2, a command
   objective that sleeps, so that trials overlap): every
   trial has a generation, each cached parent list comes from the previous generation and its
   parents, and Optuna 4.9 continues it.

Each Optuna step runs in its own process: the environment's Python, or /usr/bin/python3 with the
source tree on PYTHONPATH. Without either: SKIPPED (exit 77) with a banner.
"""
import json
import os
import subprocess
import sys
import tempfile

TUNE = os.path.abspath(sys.argv[1])
VERSION = sys.argv[3] if len(sys.argv) > 3 else "4.9"
VENV_PYTHON = sys.argv[4] if len(sys.argv) > 4 else None
NAME = "nsgaii_optuna" if VERSION == "4.9" else "nsgaii_optuna50"
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
import optuna_peer  # noqa: E402

PEER = None  # the Optuna beside tune: optuna_peer.Peer, found in main()
POP = 6
GEN = "NSGAIISampler:generation"
PARENT = "NSGAIISampler:parent:"
checks = 0

SPACE = {
    "x": {"name": "FloatDistribution",
          "attributes": {"step": None, "low": -5.0, "high": 5.0, "log": False}},
    "lr": {"name": "FloatDistribution",
           "attributes": {"step": None, "low": 1e-4, "high": 1e-1, "log": True}},
    "n": {"name": "IntDistribution", "attributes": {"log": False, "step": 1, "low": 1, "high": 8}},
    "opt": {"name": "CategoricalDistribution", "attributes": {"choices": ["adam", "sgd"]}},
}

# Optuna's side: the objective, a continuation with NSGAIISampler, and a report of the study.
OPTUNA = r"""
import json, math, sys, warnings
warnings.simplefilter("ignore")
import optuna
from optuna.samplers import NSGAIISampler
optuna.logging.set_verbosity(optuna.logging.ERROR)
mode, url, name, n, pop = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
GEN, PARENT = "NSGAIISampler:generation", "NSGAIISampler:parent:"

def objective(trial):
    x = trial.suggest_float("x", -5.0, 5.0)
    lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    k = trial.suggest_int("n", 1, 8)
    opt = trial.suggest_categorical("opt", ["adam", "sgd"])
    f1 = (x - 2) ** 2 + 0.1 * (k - 3) ** 2 + 0.5 * (opt == "sgd") + abs(math.log10(lr) + 2)
    return f1, k - abs(x)

def sphere(trial):
    return sum(trial.suggest_float(f"x{i}", -5.0, 5.0) ** 2 for i in range(2))

sampler = NSGAIISampler(population_size=pop, seed=5)
if mode == "begin":
    study = optuna.create_study(study_name=name, storage=url, sampler=sampler,
                                directions=["minimize", "maximize"])
    study.optimize(objective, n_trials=n)
elif mode in ("continue", "continue_single"):
    study = optuna.load_study(study_name=name, storage=url, sampler=sampler)
    study.optimize(objective if mode == "continue" else sphere, n_trials=n)
study = optuna.load_study(study_name=name, storage=url, sampler=sampler)
attrs = study._storage.get_study_system_attrs(study._study_id)
gens = [t.system_attrs.get(GEN) for t in study.trials]
top = max(g for g in gens if g is not None)
# What Optuna's own selection makes of each generation's parents on these trials (not cached).
selected = {str(g): sorted(t._trial_id for t in sampler.select_parent(study, g))
            for g in range(1, top + 1)}
print(json.dumps({
    "trials": [{"number": t.number, "id": t._trial_id, "state": t.state.name,
                "generation": t.system_attrs.get(GEN), "params": t.params} for t in study.trials],
    "parents": {k[len(PARENT):]: v for k, v in attrs.items() if k.startswith(PARENT)},
    "selected": selected}))
"""


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1


def run(args, cwd, env=None):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise AssertionError(f"{' '.join(args)}: exit {r.returncode}")
    return r


def optuna(mode, url, name, n, cwd):
    return json.loads(run([PEER.python, "-c", OPTUNA, mode, url, name, str(n), str(POP)], cwd,
                          PEER.env()).stdout.strip().splitlines()[-1])


def objective(p):
    import math
    f1 = ((p["x"] - 2) ** 2 + 0.1 * (p["n"] - 3) ** 2 + 0.5 * (p["opt"] == "sgd")
          + abs(math.log10(p["lr"]) + 2))
    return [f1, p["n"] - abs(p["x"])]


def tune_ask_tell(url, name, n, cwd):
    for _ in range(n):
        asked = json.loads(run([TUNE, "ask", "--study", name, "--storage", url,
                                "--search-space", json.dumps(SPACE), "--sampler",
                                "NSGAIISampler", "--sampler-kwargs",
                                json.dumps({"population_size": POP}), "--format", "json",
                                "--log-level", "warn"], cwd).stdout)
        values = [repr(v) for v in objective(asked["params"])]
        run([TUNE, "tell", "--study", name, "--storage", url, "--trial-number",
             str(asked["number"]), "--values", *values, "--log-level", "warn"], cwd)


def generations(report):
    return [t["generation"] for t in report["trials"]]


def check_continued(report, first_new, who):
    """Trials from `first_new` on were added by the continuing side."""
    gens = generations(report)
    old, new = gens[:first_new], gens[first_new:]
    # The generation the first new trial belongs to, by the rule both sides apply.
    top = max(old)
    expected = top + 1 if old.count(top) >= POP else top
    print(f"  {who} continues: generations before {old}, after {new}")
    check(new[0] == expected, f"{who}'s first trial is in generation {new[0]}, not {expected}")
    check(all(b >= a for a, b in zip(new, new[1:])), f"{who}'s generations go back: {new}")
    check(max(new) > top, f"{who} reached no new generation: {new}")


def check_parents(report, who, generations_range):
    """The cached parents equal Optuna's selection on the same trials."""
    for g in generations_range:
        cached = sorted(report["parents"][str(g)])
        check(cached == report["selected"][str(g)],
              f"generation {g}: parents cached {cached}, Optuna selects "
              f"{report['selected'][str(g)]} ({who})")
    print(f"  parents of generations {list(generations_range)} equal Optuna {VERSION}'s "
          f"selection ({who})")


def tune_begins(tmp):
    url, name = f"sqlite:///{tmp}/a.db", "tune-began"
    run([TUNE, "create-study", "--study", name, "--storage", url, "--directions", "minimize",
         "maximize", "--log-level", "warn"], tmp)
    tune_ask_tell(url, name, 30, tmp)
    before = optuna("report", url, name, 0, tmp)
    tune_gens = generations(before)
    print(f"1. tune began: 30 trials, generations {tune_gens}")
    check(tune_gens == [i // POP for i in range(30)], f"tune's generations: {tune_gens}")
    check_parents(before, "written by tune", range(1, max(tune_gens) + 1))
    after = optuna("continue", url, name, 18, tmp)
    check_continued(after, 30, f"Optuna {VERSION}")
    for g, ids in before["parents"].items():
        check(after["parents"][g] == ids, f"Optuna rewrote tune's parents of generation {g}")
    new_parents = sorted(set(after["parents"]) - set(before["parents"]), key=int)
    print(f"  Optuna kept tune's parent lists and added generations {new_parents}")


def optuna_begins(tmp):
    url, name = f"sqlite:///{tmp}/b.db", "optuna-began"
    before = optuna("begin", url, name, 30, tmp)
    print(f"2. Optuna {VERSION} began: 30 trials, generations {generations(before)}")
    tune_ask_tell(url, name, 18, tmp)
    after = optuna("report", url, name, 0, tmp)
    check_continued(after, 30, "tune")
    for g, ids in before["parents"].items():
        check(after["parents"][g] == ids, f"tune rewrote Optuna's parents of generation {g}")
    new = sorted((int(g) for g in set(after["parents"]) - set(before["parents"])))
    check(new, "tune cached no parents of a new generation")
    check_parents(after, "written by tune", new)


def overlaps(url):
    import sqlite3
    db = sqlite3.connect(url[len("sqlite:///"):])
    spans = db.execute("SELECT datetime_start, datetime_complete FROM trials").fetchall()
    db.close()
    return sum(any(s2 < s1 < e2 for j, (s2, e2) in enumerate(spans) if j != i)
               for i, (s1, _) in enumerate(spans))


def tune_runs_jobs(tmp):
    url, name = f"sqlite:///{tmp}/c.db", "jobs"
    # A command that takes a moment, so that the two trials at once overlap.
    with open(os.path.join(tmp, "sphere.sh"), "w") as f:
        f.write("sleep 0.2\nawk -v a=$TUNE_PARAM_X0 -v b=$TUNE_PARAM_X1 "
                "'BEGIN { printf \"{\\\"value\\\": %.17g}\\n\", a * a + b * b }'\n")
    config = {"direction": "minimize", "n_trials": 36, "jobs": 2,
              "sampler": {"name": "nsgaii", "population_size": POP, "seed": 3},
              "search_space": {f"x{i}": {"type": "float", "low": -5.0, "high": 5.0}
                               for i in range(2)},
              "objective": {"type": "command", "argv": ["/bin/sh", "sphere.sh"]}}
    with open(os.path.join(tmp, "jobs.json"), "w") as f:
        json.dump(config, f)
    run([TUNE, "--study", name, "--config", "jobs.json", "--storage", url, "--log-level",
         "warn", "--progress", "off"], tmp)
    report = optuna("report", url, name, 0, tmp)
    gens = generations(report)
    print(f"3. tune with jobs 2: generations {gens}; {overlaps(url)} trials started while "
          "another ran")
    check(all(g is not None for g in gens), "a trial without a generation")
    by_id = {t["id"]: t for t in report["trials"]}
    for g in range(1, max(gens) + 1):
        allowed = {t["id"] for t in report["trials"] if t["generation"] == g - 1}
        allowed |= set(report["parents"].get(str(g - 1), []))
        ids = report["parents"][str(g)]
        check(len(ids) == POP and set(ids) <= allowed,
              f"generation {g}'s parents {ids} are not from generation {g - 1} and its parents")
        check(all(by_id[i]["state"] == "COMPLETE" for i in ids), f"generation {g}: a parent "
              "that is not COMPLETE")
    after = optuna("continue_single", url, name, 12, tmp)
    check_continued(after, len(gens), f"Optuna {VERSION}")


def main():
    global PEER
    PEER = optuna_peer.find(NAME, VERSION, sys.argv[2], VENV_PYTHON)
    print(f"{NAME}: {PEER.describe()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tune_begins(tmp)
        optuna_begins(tmp)
        tune_runs_jobs(tmp)
    print(f"{NAME}: {checks} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
