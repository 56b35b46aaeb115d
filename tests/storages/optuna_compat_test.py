#!/usr/bin/env python3
"""tune and Optuna on the same SQLite files (ctest runs this with Debian's /usr/bin/python3).

  optuna_compat_test.py TUNE_BINARY

1. tune writes a study in v3.0.0.d mode (the schema of Optuna 3.0-3.1): the DDL equals what
   Optuna 3.1 creates, and optuna.load_study sees the same trials, states, params,
   distributions, values, intermediate values, attributes and best trial as `tune trials`.
2. Optuna adds trials (and leaves one enqueued); tune reads them and resumes the study, claiming
   the enqueued trial; Optuna opens the result and continues again.
3. A study created by Optuna 3.1 is continued by tune.
4. The default revision v3.2.0.a: Optuna 3.1 refuses it by its version check (it is the schema
   of Optuna >= 3.2) and reads it with skip_compatibility_check.
5. Heartbeats: Optuna's fail_stale_trials fails the trial of a killed tune worker and its
   RetryFailedTrialCallback re-enqueues it; tune fails a stale trial whose heartbeat Optuna
   wrote, re-enqueues it with the same system attrs as Optuna, and runs Optuna's retry.

Exit 77 (ctest SKIP_RETURN_CODE) when python3-optuna is not installed.
"""
import datetime
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import warnings

try:
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
except ImportError:
    print("SKIP: python3-optuna is not installed (scripts/install-deps.sh installs it)")
    sys.exit(77)

# These checks are written against Optuna 3.0-3.1 (Debian 12's python3-optuna), whose schema is
# tune's v3.0.0.d. Optuna >= 3.2 (Debian 13 has 4.1) refuses v3.0.0.d until upgraded and reads
# tune's default v3.2.0.a; the checks for it are yet to be written.
if tuple(int(x) for x in optuna.__version__.split(".")[:2]) >= (3, 2):
    print(f"SKIP: Optuna {optuna.__version__} is not 3.0-3.1, the version these checks are "
          "written against (Debian 12's python3-optuna)")
    sys.exit(77)

TUNE = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
OBJECTIVE = os.path.join(HERE, "optuna_compat_objective.py")
optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

SPACE = {
    "lr": {"type": "float", "low": 1e-5, "high": 1e-1, "log": True},
    "wd": {"type": "float", "low": 0.0, "high": 0.1, "step": 0.025},
    "layers": {"type": "int", "low": 1, "high": 4},
    "units": {"type": "int", "low": 16, "high": 256, "log": True},
    "opt": {"type": "categorical", "choices": ["adam", "sgd", None]},
    "bs": {"type": "categorical", "choices": [16, 32, 64]},
}
DISTRIBUTIONS = {
    "lr": FloatDistribution(1e-5, 1e-1, log=True),
    "wd": FloatDistribution(0.0, 0.1, step=0.025),
    "layers": IntDistribution(1, 4),
    "units": IntDistribution(16, 256, log=True),
    "opt": CategoricalDistribution(["adam", "sgd", None]),
    "bs": CategoricalDistribution([16, 32, 64]),
}
ENQUEUED = {"lr": 0.001, "wd": 0.05, "layers": 2, "units": 64, "opt": "sgd", "bs": 32}
checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1


def tune(args, cwd, expect=0):
    r = subprocess.run([TUNE] + args, cwd=cwd, capture_output=True, text=True, timeout=120)
    if r.returncode != expect:
        sys.stderr.write(r.stdout + r.stderr)
        raise AssertionError(f"tune {' '.join(args)}: exit {r.returncode}, expected {expect}")
    return r


def tune_trials(cwd, study, url):
    return json.loads(tune(["trials", "--study", study, "--storage", url, "--format", "json"],
                           cwd).stdout)


def number(v):
    """tune's JSON writes non-finite numbers as strings."""
    return {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}.get(v, v)


def same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def value(p):
    v = (math.log10(p["lr"]) + 3.0) ** 2 + p["wd"] + 0.1 * p["layers"] + p["units"] / 1000.0
    return v + (0.05 if p["opt"] == "sgd" else 0.0) + p["bs"] / 640.0


def optuna_objective(trial):
    p = {
        "lr": trial.suggest_float("lr", 1e-5, 1e-1, log=True),
        "wd": trial.suggest_float("wd", 0.0, 0.1, step=0.025),
        "layers": trial.suggest_int("layers", 1, 4),
        "units": trial.suggest_int("units", 16, 256, log=True),
        "opt": trial.suggest_categorical("opt", ["adam", "sgd", None]),
        "bs": trial.suggest_categorical("bs", [16, 32, 64]),
    }
    final = value(p)
    for step in range(3):
        trial.report(final + (2 - step) * 0.5, step)
    trial.set_user_attr("by", "optuna")
    return final


def schema(path):
    con = sqlite3.connect(path)
    rows = sorted(con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"),
                  key=lambda r: (r[0], r[1]))
    revision = con.execute("SELECT version_num FROM alembic_version").fetchall()
    version = con.execute("SELECT * FROM version_info").fetchall()
    mode = con.execute("PRAGMA journal_mode").fetchone()[0]
    con.close()
    return rows, revision, version, mode


def compare(tune_trial, t):
    """One trial as tune lists it vs as Optuna loads it."""
    n = t.number
    check(tune_trial["number"] == n, f"trial {n}: number")
    check(tune_trial["state"] == t.state.name, f"trial {n}: state {t.state.name}")
    check(tune_trial["params"] == t.params, f"trial {n}: params {tune_trial['params']} {t.params}")
    for name, dist in t.distributions.items():
        check(dist == DISTRIBUTIONS[name], f"trial {n}: distribution of {name}: {dist}")
    tv = [number(v) for v in tune_trial["values"]]
    check(tv == (t.values or []), f"trial {n}: values {tv} vs {t.values}")
    tiv = {int(k): number(v) for k, v in tune_trial["intermediate_values"].items()}
    check(tiv.keys() == t.intermediate_values.keys()
          and all(same(tiv[k], t.intermediate_values[k]) for k in tiv),
          f"trial {n}: intermediate values {tiv} vs {t.intermediate_values}")
    check(tune_trial["user_attrs"] == t.user_attrs, f"trial {n}: user attrs")
    check(tune_trial["system_attrs"] == t.system_attrs, f"trial {n}: system attrs")
    for key, dt in (("datetime_start", t.datetime_start),
                    ("datetime_complete", t.datetime_complete)):
        text = tune_trial[key]
        check((text is None) == (dt is None), f"trial {n}: {key} presence")
        if text is not None:
            check(datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f") == dt,
                  f"trial {n}: {key} {text} vs {dt}")


def part1_tune_writes_optuna_reads(tmp):
    path = os.path.join(tmp, "compat.db")
    url = "sqlite:///" + path
    cfg = os.path.join(tmp, "compat.json")
    with open(cfg, "w") as f:
        json.dump({"direction": "minimize",
                   "sampler": {"name": "tpe", "n_startup_trials": 4, "seed": 1},
                   "search_space": SPACE,
                   "objective": {"type": "command", "argv": ["/usr/bin/python3", OBJECTIVE]},
                   "enqueue_trials": [ENQUEUED]}, f)
    run = tune(["--study", "compat", "--config", cfg, "--n-trials", "8", "--storage",
                url + "?schema=v3.0.0.d", "--format", "json"], tmp)
    tune_best = json.loads(run.stdout)

    # The file is what Optuna 3.1 itself would create.
    optuna.create_study(study_name="fresh", storage="sqlite:///" + os.path.join(tmp, "fresh.db"))
    ours, revision, version, mode = schema(path)
    theirs, _, _, _ = schema(os.path.join(tmp, "fresh.db"))
    check(ours == theirs, "the DDL differs from Optuna 3.1's:\n" +
          "\n".join(str(r) for r in set(ours) ^ set(theirs)))
    check(revision == [("v3.0.0.d",)], f"alembic_version {revision}")
    check(version == [(1, 12, "3.1.0")], f"version_info {version}")
    check(mode == "wal", f"journal mode {mode}")

    listed = tune_trials(tmp, "compat", url)
    study = optuna.load_study(study_name="compat", storage=url)
    check(study.direction == optuna.study.StudyDirection.MINIMIZE, "direction")
    trials = study.trials
    check(len(trials) == 8 == len(listed), f"{len(trials)} trials in Optuna, {len(listed)} in tune")
    for tune_trial, t in zip(listed, trials):
        compare(tune_trial, t)
    S = optuna.trial.TrialState
    check(trials[0].params == ENQUEUED and trials[0].system_attrs["fixed_params"] == ENQUEUED,
          "trial 0 ran the enqueued params")
    check(trials[1].intermediate_values[0] == math.inf, "trial 1: infinite report")
    check(trials[2].state == S.FAIL and trials[2].user_attrs["exit_status"] == 3
          and "ValueError: bad batch" in trials[2].user_attrs["stderr_tail"], "trial 2: FAIL")
    check(trials[3].state == S.PRUNED and trials[3].user_attrs["oom"] is True
          and trials[3].values == [2.5], "trial 3: out of memory -> PRUNED with its last report")
    check(trials[4].state == S.COMPLETE and trials[4].value == -math.inf, "trial 4: value -inf")
    check(math.isnan(trials[5].intermediate_values[1]), "trial 5: NaN report")
    check(study.best_trial.number == tune_best["number"]
          and study.best_value == number(tune_best["value"]),
          f"best trial: Optuna {study.best_trial.number} {study.best_value}, tune {tune_best}")
    summary = [s for s in optuna.get_all_study_summaries(url) if s.study_name == "compat"][0]
    check(summary.n_trials == 8 and summary.best_trial.number == tune_best["number"], "summary")
    print(f"part 1: Optuna 3.1 reads tune's v3.0.0.d study ({checks} checks so far)")

    # Optuna continues the study and leaves one trial enqueued ...
    study.optimize(optuna_objective, n_trials=3)
    optuna_enqueued = dict(ENQUEUED, lr=0.0005, opt=None)
    study.enqueue_trial(optuna_enqueued)
    listed = tune_trials(tmp, "compat", url)
    check(len(listed) == 12, f"tune sees {len(listed)} trials after Optuna's, expected 12")
    for tune_trial, t in zip(listed, optuna.load_study(study_name="compat", storage=url).trials):
        compare(tune_trial, t)
    for t in listed[8:11]:
        check(t["state"] == "COMPLETE" and t["user_attrs"] == {"by": "optuna"}
              and len(t["intermediate_values"]) == 3, f"Optuna's trial {t['number']}")
    check(listed[11]["state"] == "WAITING"
          and listed[11]["system_attrs"]["fixed_params"] == optuna_enqueued, "enqueued by Optuna")

    # ... which tune resumes with the whole history, running Optuna's enqueued trial first.
    run = tune(["--study", "compat", "--config", cfg, "--n-trials", "14", "--storage", url], tmp)
    check("Resuming study 'compat' (12 trials stored)" in run.stderr, "tune resumed")
    listed = tune_trials(tmp, "compat", url)
    check([t["number"] for t in listed] == list(range(14)), "numbers 0..13")
    check(sum(t["state"] != "WAITING" and t["state"] != "RUNNING" for t in listed) == 14,
          "14 finished trials")
    check(listed[11]["params"] == optuna_enqueued and listed[11]["state"] == "COMPLETE",
          "tune ran Optuna's enqueued trial")
    check(listed[11]["value"] == value(optuna_enqueued), "its value")

    # Optuna opens the result and continues once more.
    study = optuna.load_study(study_name="compat", storage=url)
    for tune_trial, t in zip(listed, study.trials):
        compare(tune_trial, t)
    study.optimize(optuna_objective, n_trials=1)
    check(len(study.trials) == 15 and study.trials[14].state.name == "COMPLETE", "Optuna again")
    print(f"part 2: Optuna and tune take turns on one study ({checks} checks so far)")


def part3_optuna_writes_tune_continues(tmp):
    path = os.path.join(tmp, "born.db")
    url = "sqlite:///" + path
    study = optuna.create_study(study_name="born", storage=url, direction="minimize")
    study.set_user_attr("owner", "optuna")
    study.optimize(optuna_objective, n_trials=4)
    study.enqueue_trial(ENQUEUED)
    cfg = os.path.join(tmp, "born.json")
    with open(cfg, "w") as f:
        json.dump({"direction": "minimize", "sampler": {"name": "tpe"}, "search_space": SPACE,
                   "objective": {"type": "command", "argv": ["/usr/bin/python3", OBJECTIVE]}}, f)
    studies = json.loads(tune(["studies", "--storage", url, "--format", "json"], tmp).stdout)
    check(studies[0]["name"] == "born" and studies[0]["n_trials"] == 5
          and studies[0]["user_attrs"] == {"owner": "optuna"}, f"tune studies: {studies}")
    listed = tune_trials(tmp, "born", url)
    for tune_trial, t in zip(listed, study.trials):
        compare(tune_trial, t)
    run = tune(["--study", "born", "--config", cfg, "--n-trials", "7", "--storage", url], tmp)
    check("Resuming study 'born' (5 trials stored)" in run.stderr, "tune resumed Optuna's study")
    listed = tune_trials(tmp, "born", url)
    check([t["number"] for t in listed] == list(range(7)), "numbers 0..6")
    check(all(t["state"] == "COMPLETE" for t in listed), "all complete")
    check(listed[4]["params"] == ENQUEUED, "tune ran Optuna's enqueued trial")
    study = optuna.load_study(study_name="born", storage=url)
    check(len(study.trials) == 7, "Optuna sees tune's trials")
    for tune_trial, t in zip(listed, study.trials):
        compare(tune_trial, t)
    study.optimize(optuna_objective, n_trials=1)
    check(len(study.trials) == 8, "Optuna continues after tune")
    print(f"part 3: tune continues a study Optuna 3.1 created ({checks} checks so far)")


def part4_default_revision(tmp):
    path = os.path.join(tmp, "new.db")
    url = "sqlite:///" + path
    cfg = os.path.join(tmp, "new.json")
    with open(cfg, "w") as f:
        json.dump({"search_space": SPACE,
                   "objective": {"type": "command", "argv": ["/usr/bin/python3", OBJECTIVE]}}, f)
    tune(["--study", "new", "--config", cfg, "--n-trials", "6", "--storage", url], tmp)
    ours, revision, _, _ = schema(path)
    check(revision == [("v3.2.0.a",)], f"default revision {revision}")
    check(("index", "ix_trials_study_id", "trials",
           "CREATE INDEX ix_trials_study_id ON trials (study_id)") in ours, "v3.2.0.a index")
    try:
        optuna.load_study(study_name="new", storage=url)
        check(False, "Optuna 3.1 should refuse a v3.2.0.a file")
    except RuntimeError as e:
        check("pip install -U optuna" in str(e), f"Optuna's version check: {e}")
    storage = optuna.storages.RDBStorage(url, skip_compatibility_check=True)
    study = optuna.load_study(study_name="new", storage=storage)
    listed = tune_trials(tmp, "new", url)
    check(len(study.trials) == 6 == len(listed), "six trials")
    for tune_trial, t in zip(listed, study.trials):
        compare(tune_trial, t)
    print(f"part 4: v3.2.0.a is Optuna >= 3.2's schema ({checks} checks so far)")


def part5_heartbeats(tmp):
    url = "sqlite:///" + os.path.join(tmp, "hb.db")
    script = os.path.join(tmp, "hb.sh")
    with open(script, "w") as f:
        f.write('[ "$1" = sleep ] && sleep 5\necho "{\\"value\\": $TUNE_PARAM_X}"\n')
    configs = {}
    for mode in ("sleep", "quick"):
        configs[mode] = os.path.join(tmp, f"hb_{mode}.json")
        with open(configs[mode], "w") as f:
            json.dump({"search_space": {"x": {"type": "float", "low": -5, "high": 5}},
                       "objective": {"type": "command", "argv": ["/bin/sh", script, mode]}}, f)
    # A tune worker killed while its trial 0 runs (after its first heartbeat).
    worker = subprocess.Popen([TUNE, "--study", "hb", "--config", configs["sleep"], "--n-trials",
                               "1", "--heartbeat-interval", "0.5", "--storage",
                               url + "?schema=v3.0.0.d"], cwd=tmp, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    path = os.path.join(tmp, "hb.db")
    for _ in range(2000):
        try:
            con = sqlite3.connect(path)
            beats = con.execute("SELECT COUNT(*) FROM trial_heartbeats").fetchone()[0]
            params = con.execute("SELECT COUNT(*) FROM trial_params").fetchone()[0]
            con.close()
            if beats and params:
                break
        except sqlite3.Error:
            pass
        time.sleep(0.01)
    worker.kill()
    worker.wait()
    # Optuna 3.1 reads the database's time in whole seconds (CURRENT_TIMESTAMP, truncated) and
    # needs (now - heartbeat).seconds > grace_period = 1, i.e. 2 whole seconds: wait 3.5 s.
    time.sleep(3.5)
    callback = optuna.storages.RetryFailedTrialCallback(max_retry=1)
    storage = optuna.storages.RDBStorage(url, heartbeat_interval=1, grace_period=1,
                                         failed_trial_callback=callback)
    study = optuna.load_study(study_name="hb", storage=storage)
    optuna.storages.fail_stale_trials(study)
    trials = study.trials
    check([t.state.name for t in trials] == ["FAIL", "WAITING"],
          f"Optuna failed tune's stale trial: {[t.state.name for t in trials]}")
    check(trials[1].params == trials[0].params
          and trials[1].system_attrs.get("failed_trial") == 0
          and trials[1].system_attrs.get("retry_history") == [0], "Optuna's retry of it")
    # An Optuna worker's trial 2 with a heartbeat (Optuna's format), left RUNNING.
    trial_id = storage.create_new_trial(study._study_id)
    storage.set_trial_param(trial_id, "x", 1.25, FloatDistribution(-5, 5))
    storage.record_heartbeat(trial_id)
    time.sleep(2.2)
    run = tune(["--study", "hb", "--config", configs["quick"], "--n-trials", "3",
                "--heartbeat-interval", "0.5", "--grace-period", "1", "--retry-failed", "1",
                "--storage", url], tmp)
    check("Trial 2 FAIL (stale" in run.stderr, "tune failed Optuna's stale trial")
    study = optuna.load_study(study_name="hb", storage=url)
    trials = study.trials
    check([t.state.name for t in trials] == ["FAIL", "COMPLETE", "FAIL", "COMPLETE"],
          f"states {[t.state.name for t in trials]}")
    check(trials[1].params == trials[0].params and trials[1].value == trials[0].params["x"],
          "tune ran Optuna's retry with its params")
    check(trials[3].params == {"x": 1.25} and trials[3].value == 1.25
          and trials[3].system_attrs.get("failed_trial") == 2
          and trials[3].system_attrs.get("retry_history") == [2],
          f"tune's retry of Optuna's trial: {trials[3].system_attrs}")
    print(f"part 5: heartbeats and retries across tune and Optuna ({checks} checks so far)")


def main():
    print(f"Optuna {optuna.__version__}, tune {TUNE}")
    with tempfile.TemporaryDirectory(prefix="tune-optuna-") as tmp:
        part1_tune_writes_optuna_reads(tmp)
        part3_optuna_writes_tune_continues(tmp)
        part4_default_revision(tmp)
        part5_heartbeats(tmp)
    print(f"optuna_compat: {checks} checks passed")


if __name__ == "__main__":
    main()
