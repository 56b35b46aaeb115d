#!/usr/bin/python3
"""tune and Optuna 5.0 on the same SQLite studies, both ways (docs/config.md#defaults-and-presets).

  optuna50_interop_test.py TUNE_BINARY OPTUNA50_DIR [VENV_PYTHON]

Optuna 5.0 is the released one in tune's Python environment: the test runs itself again with
VENV_PYTHON (or $TUNE_VENV_PYTHON) when that exists; else the source tree OPTUNA50_DIR, or
$TUNE_OPTUNA50_PATH's (tests/testing/optuna_peer.py). It prints which.

1. Times: tune, run with TZ=Asia/Tokyo (UTC+9), stores datetime_start/datetime_complete as naive
   UTC, as Optuna 5.0 does: the raw columns lie within the run's wall-clock window read as UTC,
   and Optuna 5.0 (also in Tokyo) reads the right instants; tune reads the times Optuna wrote
   at the right instants too (`tune trials` shows local time, here Tokyo's).
2. tune -> Optuna 5.0: a single-objective study tune writes with its default sampler (TPE,
   preset optuna-5.0) and named constraints (a command objective's {"constraints": ...} line)
   opens in Optuna 5.0 with the same trials, values and `trial.constraints`; Optuna's default
   TPESampler() continues it (set_constraint), and tune continues Optuna's trials again.
3. Optuna 5.0 -> tune: a two-objective study Optuna 5.0 writes (default sampler, constraints)
   is continued by tune's TPE and NSGA-II ("constraints": true), then by Optuna again.

Exit 77 (ctest SKIP_RETURN_CODE), with a banner, without any Optuna 5.0; exit 1 when tune's Python
environment exists but is broken.
"""
import datetime
import json
import os
import sqlite3
import sys
import tempfile
import time

TUNE = os.path.abspath(sys.argv[1])
os.environ["TZ"] = "Asia/Tokyo"  # this process (Optuna) and every tune it starts
time.tzset()
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing"))
sys.path.insert(0, HERE)
import optuna_peer  # noqa: E402
from study_checks import (CONSTRAINED_PROGRAM, CONSTRAINED_SPACE, Checks,  # noqa: E402
                          optuna_objective, run_tune)

PEER = optuna_peer.find("optuna50_interop", "5.0", sys.argv[2],
                        sys.argv[3] if len(sys.argv) > 3 else None)
optuna = optuna_peer.run_here(PEER)  # may run this script again with the environment's Python
print(f"optuna50_interop: {PEER.describe()}", flush=True)
import warnings  # noqa: E402

warnings.simplefilter("ignore")
optuna.logging.set_verbosity(optuna.logging.WARNING)
check = Checks()


def tune(args, cwd):
    return run_tune(TUNE, args, cwd)


def tune_trials(cwd, study, url):
    return json.loads(tune(["trials", "--study", study, "--storage", url, "--format", "json"],
                           cwd).stdout)


def local(text):
    """tune's local-time text ("YYYY-MM-DD HH:MM:SS.ffffff") as an instant (this process's TZ)."""
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").timestamp()


def times_and_tune_to_optuna(tmp):
    url = "sqlite:///" + os.path.join(tmp, "tz.db")
    with open(os.path.join(tmp, "objective.py"), "w") as f:
        f.write(CONSTRAINED_PROGRAM)
    cfg = os.path.join(tmp, "tz.json")
    with open(cfg, "w") as f:  # no "sampler": TPE, preset optuna-5.0
        json.dump({"direction": "minimize", "search_space": CONSTRAINED_SPACE,
                   "objective": {"type": "command",
                                 "argv": ["/usr/bin/python3", "objective.py"]}}, f)
    before = time.time()
    run = tune(["--study", "tz", "--config", cfg, "--n-trials", "12", "--storage", url], tmp)
    after = time.time()
    check("sampler tpe (preset optuna-5.0, multivariate, constant liar)" in run.stderr,
          "tune's default sampler is TPE under Optuna 5.0's rules")

    # The raw columns: naive UTC.
    con = sqlite3.connect(os.path.join(tmp, "tz.db"))
    rows = con.execute("SELECT datetime_start, datetime_complete FROM trials").fetchall()
    con.close()
    for start, complete in rows:
        for text in (start, complete):
            t = datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(
                tzinfo=datetime.timezone.utc).timestamp()
            check(before - 1 <= t <= after + 1,
                  f"stored time {text} is not UTC within the run ({before:.0f}..{after:.0f})")

    # Optuna 5.0 reads the same instants, trials, values and constraints.
    study = optuna.load_study(study_name="tz", storage=url)
    listed = tune_trials(tmp, "tz", url)
    check(len(study.trials) == 12 == len(listed), "12 trials on both sides")
    for t, ours in zip(study.trials, listed):
        check(before - 1 <= t.datetime_start.timestamp() <= after + 1,
              f"Optuna 5.0 reads trial {t.number}'s start {t.datetime_start} at another instant")
        check(abs(local(ours["datetime_start"]) - t.datetime_start.timestamp()) < 1e-3,
              f"tune shows trial {t.number} started at {ours['datetime_start']} (Tokyo), "
              f"Optuna {t.datetime_start}")
        check(t.state.name == "COMPLETE" and abs(t.value - ours["value"]) < 1e-12,
              f"trial {t.number}: value")
        x, y = t.params["x"], t.params["y"]
        check(set(t.constraints) == {"budget"} and abs(t.constraints["budget"] - (x + y - 1.0))
              < 1e-12, f"trial {t.number}: constraints {t.constraints}")
    print(f"times: 24 stored times are UTC within the run under TZ=Asia/Tokyo; Optuna 5.0 and "
          f"tune read the same instants")

    # Optuna 5.0 continues tune's study with its defaults, then tune continues Optuna's trials.
    study = optuna.load_study(study_name="tz", storage=url, sampler=optuna.samplers.TPESampler(
        seed=1))
    before_optuna = time.time()
    study.optimize(optuna_objective, n_trials=6)
    after_optuna = time.time()
    run = tune(["--study", "tz", "--config", cfg, "--n-trials", "24", "--storage", url], tmp)
    check("Resuming study 'tz' (18 trials stored)" in run.stderr, "tune resumed Optuna's trials")
    check("begun before" not in run.stderr, "a study tune created keeps 5.0's rules")
    listed = tune_trials(tmp, "tz", url)
    check(len(listed) == 24 and all(t["state"] == "COMPLETE" for t in listed),
          "24 COMPLETE trials")
    for ours in listed[12:18]:
        check(before_optuna - 1 <= local(ours["datetime_start"]) <= after_optuna + 1,
              f"tune reads Optuna's trial {ours['number']} at {ours['datetime_start']}")
    study = optuna.load_study(study_name="tz", storage=url)
    feasible = [t for t in study.trials if t.constraints["budget"] <= 0]
    check(len(study.trials) == 24 and len(feasible) >= 12,
          f"Optuna reads 24 trials with constraints ({len(feasible)} feasible)")
    print(f"tune -> Optuna 5.0 -> tune: 24 trials, constraints read both ways "
          f"({len(feasible)} feasible); best {study.best_value:.4f}")


def optuna_to_tune(tmp):
    url = "sqlite:///" + os.path.join(tmp, "mo.db")
    study = optuna.create_study(study_name="mo", storage=url, directions=["minimize", "minimize"],
                                sampler=optuna.samplers.TPESampler(seed=2))

    def objective(trial):
        x = trial.suggest_float("x0", 0.0, 1.0)
        y = trial.suggest_float("x1", 0.0, 1.0)
        trial.set_constraint("c", 0.2 - x)
        return x, y + (1 - x) ** 2

    study.optimize(objective, n_trials=15)
    with open(os.path.join(tmp, "mo_objective.py"), "w") as f:
        f.write("import json, os\n"
                "p = json.load(open(os.environ['TUNE_PARAMS_FILE']))\n"
                "x, y = p['x0'], p['x1']\n"
                "print(json.dumps({'constraints': {'c': 0.2 - x}, 'values': [x, y + (1 - x) ** 2]}))\n")
    space = {"x0": {"type": "float", "low": 0.0, "high": 1.0},
             "x1": {"type": "float", "low": 0.0, "high": 1.0}}
    total = 15
    for sampler in ({"name": "tpe", "preset": "optuna-5.0"},
                    {"name": "nsgaii", "population_size": 4, "constraints": True}):
        cfg = os.path.join(tmp, f"mo_{sampler['name']}.json")
        with open(cfg, "w") as f:
            json.dump({"directions": ["minimize", "minimize"], "search_space": space,
                       "sampler": sampler,
                       "objective": {"type": "command",
                                     "argv": ["/usr/bin/python3", "mo_objective.py"]}}, f)
        total += 5
        run = tune(["--study", "mo", "--config", cfg, "--n-trials", str(total), "--storage", url],
                   tmp)
        check(f"sampler {sampler['name']}" in run.stderr, f"tune's {sampler['name']} continued")
    study = optuna.load_study(study_name="mo", storage=url)
    check(len(study.trials) == 25 and all(t.state.name == "COMPLETE" for t in study.trials),
          "Optuna reads 25 COMPLETE trials")
    check(all(set(t.constraints) == {"c"} for t in study.trials), "every trial has constraint c")
    study.sampler = optuna.samplers.TPESampler(seed=3)
    study.optimize(objective, n_trials=5)
    front = study.best_trials  # Optuna 5.0: feasible trials only
    check(front and all(t.constraints["c"] <= 0 for t in front),
          "Optuna's Pareto front is feasible")
    print(f"Optuna 5.0 -> tune (TPE, NSGA-II) -> Optuna 5.0: 30 trials, a Pareto front of "
          f"{len(front)} feasible trials")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        times_and_tune_to_optuna(tmp)
        optuna_to_tune(tmp)
    print(f"optuna50_interop: {check.count} checks passed")


if __name__ == "__main__":
    main()
