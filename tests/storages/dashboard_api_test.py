#!/usr/bin/python3
"""optuna-dashboard's API reads the studies tune writes (issue 44, item 6).

  dashboard_api_test.py TUNE_BINARY OPTUNA50_DIR [VENV_PYTHON]

optuna-dashboard is not a Debian package: it comes with tune's Python environment
(scripts/install-venv.sh, which `make test` runs), beside the released Optuna 5.0. The test runs
itself again with that environment's Python, VENV_PYTHON (or $TUNE_VENV_PYTHON), and prints the
versions and places of both. Without the environment it looks for both in OPTUNA50_DIR's source
tree (or $TUNE_OPTUNA50_PATH's; tests/testing/optuna_peer.py), which holds no optuna-dashboard,
and exits 77 (ctest SKIP_RETURN_CODE) with a banner; an environment that exists but lacks either
is a failure.

tune, run with TZ=Asia/Tokyo, writes three SQLite studies: one objective with named constraints
(a command objective, tune's default sampler), two objectives (zdt1) and the `mixed` function with
an out-of-memory region (PRUNED trials with user attribute oom=true). Optuna 5.0 writes a fourth
with Trial.set_constraint. The dashboard's WSGI app, over Optuna 5.0's RDBStorage, must list the
studies and, per study, return every trial with tune's number, state, values, params, user
attributes and local start time, the best trial or Pareto front tune reports, the parameter
importances and the CSV export. The dashboard reads constraints only from the old list
("constraints"); a study with named constraints ("constraints:<name>", as Optuna 5.0 and tune
write them) shows none there, for Optuna's study and tune's alike, and the test checks that the
two agree.
"""
import csv
import io
import json
import os
import sys
import tempfile
import time
from wsgiref.util import setup_testing_defaults

TUNE = os.path.abspath(sys.argv[1])
os.environ["TZ"] = "Asia/Tokyo"  # this process and every tune it starts
time.tzset()
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing"))
sys.path.insert(0, HERE)
import optuna_peer  # noqa: E402
from study_checks import (CONSTRAINED_PROGRAM, CONSTRAINED_SPACE, Checks,  # noqa: E402
                          optuna_objective, run_tune)

PEER = optuna_peer.find("dashboard_api", "5.0", sys.argv[2],
                        sys.argv[3] if len(sys.argv) > 3 else None, modules=("optuna_dashboard",))
optuna = optuna_peer.run_here(PEER)  # may run this script again with the environment's Python
import optuna_dashboard  # noqa: E402

print(f"dashboard_api: {PEER.describe()}", flush=True)
import warnings  # noqa: E402

warnings.simplefilter("ignore")
optuna.logging.set_verbosity(optuna.logging.WARNING)
check = Checks()


def tune(args, cwd):
    return run_tune(TUNE, args, cwd)


ZDT1 = {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(10)}
MIXED = {
    "model": {"type": "categorical", "choices": ["bert-base-uncased", "bert-large-uncased"]},
    "batch_size": {"type": "categorical", "choices": [8, 16, 32, 64]},
    "max_length": {"type": "int", "low": 128, "high": 512, "step": 64},
    "lr": {"type": "float", "low": 1e-6, "high": 1e-3, "log": True},
}


def write_studies(tmp, url):
    with open(os.path.join(tmp, "objective.py"), "w") as f:
        f.write(CONSTRAINED_PROGRAM)
    configs = {
        "constrained": ({"direction": "minimize", "search_space": CONSTRAINED_SPACE,
                         "objective": {"type": "command",
                                       "argv": ["/usr/bin/python3", "objective.py"]}}, 12),
        "pareto": ({"directions": ["minimize", "minimize"], "search_space": ZDT1,
                    "objective": {"type": "function", "name": "zdt1"}}, 30),
        "oom": ({"direction": "minimize", "search_space": MIXED,
                 "objective": {"type": "function", "name": "mixed", "oom_threshold": 12000}},
                30),
    }
    for name, (cfg, n) in configs.items():
        path = os.path.join(tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        tune(["--study", name, "--config", path, "--n-trials", str(n), "--storage", url,
              "--seed", "7"], tmp)

    study = optuna.create_study(study_name="optuna-constrained", storage=url,
                                sampler=optuna.samplers.TPESampler(seed=7))
    study.optimize(optuna_objective, n_trials=12)


def call(app, path, query=""):
    environ = {"PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": "GET"}
    setup_testing_defaults(environ)
    status = []
    body = b"".join(app(environ, lambda s, headers, exc=None: status.append(s)))
    check(status and status[0].startswith("200"), f"GET {path}: {status}")
    return body.decode()


def tune_json(args, tmp):
    return json.loads(tune(args + ["--format", "json"], tmp).stdout)


STATES = {"COMPLETE": "Complete", "PRUNED": "Pruned", "FAIL": "Fail", "RUNNING": "Running",
          "WAITING": "Waiting"}


def compare_trials(name, detail, ours):
    trials = detail["trials"]
    check(len(trials) == len(ours),
          f"{name}: {len(trials)} trials in the dashboard, tune {len(ours)}")
    for t, o in zip(trials, ours):
        where = f"{name} trial {o['number']}"
        check(t["number"] == o["number"], f"{where}: number {t['number']}")
        check(t["state"] == STATES[o["state"]], f"{where}: state {t['state']} vs {o['state']}")
        if o["state"] == "COMPLETE":
            check(t["values"] == o["values"], f"{where}: values {t['values']} vs {o['values']}")
        params = {p["name"]: p["param_external_value"] for p in t["params"]}  # str(value)
        expected = {k: str(v) for k, v in o["params"].items()}
        check(params == expected, f"{where}: params {params} vs {expected}")
        user = {a["key"]: a["value"] for a in t["user_attrs"]}
        for key, value in o["user_attrs"].items():
            # The dashboard's text: a string as it is, a number by str(), else JSON (cut short).
            text = (value if isinstance(value, str) else str(value)
                    if isinstance(value, (int, float)) else json.dumps(value))
            check(key in user and text.startswith(user[key]) and len(user[key]) > 0,
                  f"{where}: user attribute {key} = {user.get(key)!r}, tune {value!r}")
        # The dashboard shows Optuna's datetime (local, here Tokyo) as ISO text; tune shows local
        # time as "YYYY-MM-DD HH:MM:SS.ffffff".
        check(t["datetime_start"].replace("T", " ") == o["datetime_start"],
              f"{where}: start {t['datetime_start']} vs {o['datetime_start']}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        url = "sqlite:///" + os.path.join(tmp, "studies.db")
        write_studies(tmp, url)
        app = optuna_dashboard.wsgi(optuna.storages.RDBStorage(url))
        summaries = json.loads(call(app, "/api/studies"))["study_summaries"]
        ids = {s["study_name"]: s["study_id"] for s in summaries}
        check(set(ids) == {"constrained", "pareto", "oom", "optuna-constrained"},
              f"studies listed: {sorted(ids)}")
        directions = {s["study_name"]: s["directions"] for s in summaries}
        check(directions["pareto"] == ["minimize", "minimize"], f"pareto: {directions['pareto']}")
        details = {}
        for name in ("constrained", "pareto", "oom", "optuna-constrained"):
            details[name] = json.loads(call(app, f"/api/studies/{ids[name]}", "after=0"))
        for name in ("constrained", "pareto", "oom"):
            ours = tune_json(["trials", "--study", name, "--storage", url], tmp)
            compare_trials(name, details[name], ours)
        for name in ("constrained", "oom"):
            best = tune_json(["best-trial", "--study", name, "--storage", url], tmp)
            shown = [t["number"] for t in details[name]["best_trials"]]
            check(shown == [best["number"]], f"{name}: best {shown}, tune {best['number']}")
        front = sorted(t["number"] for t in tune_json(
            ["best-trials", "--study", "pareto", "--storage", url], tmp))
        shown = sorted(t["number"] for t in details["pareto"]["best_trials"])
        check(shown == front and front, f"pareto front {shown}, tune {front}")
        oom = [t for t in details["oom"]["trials"] if t["state"] == "Pruned"]
        check(oom and all({a["key"]: a["value"] for a in t["user_attrs"]}.get("oom") == "True"
                          for t in oom), "oom: PRUNED trials carry oom=true")
        # Named constraints: the dashboard lists the old "constraints" list only, so Optuna 5.0's
        # study and tune's both show none.
        shown = {name: {tuple(t["constraints"]) for t in details[name]["trials"]}
                 for name in ("constrained", "optuna-constrained")}
        check(shown["constrained"] == shown["optuna-constrained"],
              f"constraints shown: tune {shown['constrained']}, "
              f"Optuna {shown['optuna-constrained']}")
        for name in ("constrained", "pareto", "oom"):
            importances = json.loads(call(app, f"/api/studies/{ids[name]}/param_importances"))
            per_objective = importances["param_importances"]
            check(len(per_objective) == len(details[name]["directions"]),
                  f"{name}: importances for {len(per_objective)} objectives")
            names = {p["name"] for p in per_objective[0]}
            check(names and names <= set(details[name]["union_search_space"][i]["name"]
                                         for i in range(len(details[name]["union_search_space"]))),
                  f"{name}: importances of {sorted(names)}")
            rows = list(csv.reader(io.StringIO(call(app, f"/csv/{ids[name]}"))))
            check(len(rows) == len(details[name]["trials"]) + 1,
                  f"{name}: CSV has {len(rows) - 1} rows")
        n = {name: len(d["trials"]) for name, d in details.items()}
        print(f"optuna-dashboard {optuna_dashboard.__version__} over Optuna {optuna.__version__}: "
              f"studies {n}; trials, states, values, params, user attributes and Tokyo start "
              f"times equal tune's; best trials and a Pareto front of {len(front)} equal tune's; "
              f"importances and CSV served")
        print(f"dashboard_api: {check.count} checks passed")


if __name__ == "__main__":
    main()
