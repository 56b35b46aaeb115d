#!/usr/bin/env python3
"""tune and Optuna on the same PostgreSQL databases (ctest runs this with Debian's /usr/bin/python3
against the throwaway server of the postgres_server fixture).

  optuna_compat_pg_test.py TUNE_BINARY STATE_FILE

1. The schema tune creates in v3.0.0.d mode is the one Optuna 3.1 (SQLAlchemy 1.4) creates on
   PostgreSQL: columns and types (native ENUMs, SERIAL ids), constraints, indexes, ENUM labels,
   sequences, version_info and alembic_version.
2. tune writes a study, Optuna reads it (every trial field, the best trial), continues it and
   enqueues a trial; tune resumes with the whole history and runs the enqueued trial; Optuna
   again.
3. A study Optuna created is continued by tune.
4. tune and Optuna workers at the same time on one study: contiguous numbers, no losses (both
   lock the study row before numbering a trial).
5. The default revision v3.2.0.a is refused by Optuna 3.1's version check, as on SQLite.

Exit 77 (ctest SKIP_RETURN_CODE) when python3-optuna or python3-psycopg2 is not installed, or
the fixture could not start a server; the reason is printed.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import optuna_compat_test as base  # noqa: E402  (exits 77 itself without python3-optuna)

try:
    import psycopg2
except ImportError:
    print("SKIP: python3-psycopg2 is not installed (scripts/install-deps.sh installs it); "
          "Optuna cannot open PostgreSQL studies without it")
    sys.exit(77)

import optuna  # noqa: E402

TUNE = os.path.abspath(sys.argv[1])
check = base.check
tune = base.tune


def admin_url():
    if os.environ.get("TUNE_TEST_POSTGRES_URL"):
        return os.environ["TUNE_TEST_POSTGRES_URL"]
    state_file = sys.argv[2] if len(sys.argv) > 2 else ""
    if not os.path.exists(state_file):
        print(f"SKIP: no PostgreSQL test server (no state file '{state_file}'; run through ctest, "
              "which starts one, or set TUNE_TEST_POSTGRES_URL)")
        sys.exit(77)
    state = dict(line.rstrip("\n").split("=", 1) for line in open(state_file) if "=" in line)
    if "error" in state:
        print(f"SKIP: the PostgreSQL test server could not start: {state['error']}")
        sys.exit(77)
    return state["url"]


ADMIN = admin_url()
created = []


def new_database(name):
    name = f"tune_compat_{name}_{os.getpid()}"
    con = psycopg2.connect(ADMIN)
    con.autocommit = True
    con.cursor().execute(f"CREATE DATABASE {name}")
    con.close()
    created.append(name)
    return ADMIN.rsplit("/", 1)[0] + "/" + name


def query(url, sql):
    con = psycopg2.connect(url)
    cur = con.cursor()
    cur.execute(sql)
    rows = cur.fetchall()
    con.close()
    return rows


def fingerprint(url):
    """Everything SQLAlchemy's create_all decides, from the catalogs."""
    return {
        "columns": query(url, """
            SELECT table_name, column_name, ordinal_position, data_type, udt_name,
                   character_maximum_length, is_nullable, column_default
            FROM information_schema.columns WHERE table_schema = current_schema()
            ORDER BY table_name, ordinal_position"""),
        "constraints": query(url, """
            SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
            FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
            ORDER BY 1, 2"""),
        "indexes": query(url, """
            SELECT tablename, indexname, indexdef FROM pg_indexes
            WHERE schemaname = current_schema() ORDER BY 1, 2"""),
        "enums": query(url, """
            SELECT t.typname, e.enumlabel, e.enumsortorder FROM pg_type t
            JOIN pg_enum e ON e.enumtypid = t.oid ORDER BY 1, 3"""),
        "sequences": query(url, """
            SELECT sequence_name, data_type, start_value, increment
            FROM information_schema.sequences ORDER BY 1"""),
        "version_info": query(url, "SELECT * FROM version_info"),
        "alembic": query(url, "SELECT * FROM alembic_version"),
    }


def config(tmp, name, **extra):
    cfg = os.path.join(tmp, name + ".json")
    with open(cfg, "w") as f:
        json.dump(dict({"direction": "minimize", "search_space": base.SPACE,
                        "objective": {"type": "command",
                                      "argv": ["/usr/bin/python3", base.OBJECTIVE]}}, **extra), f)
    return cfg


def part1_schema(tmp):
    theirs_url = new_database("optuna_schema")
    optuna.create_study(study_name="fresh", storage=theirs_url)
    ours_url = new_database("tune_schema")
    tune(["--study", "s", "--config", config(tmp, "schema"), "--n-trials", "1", "--storage",
          ours_url + "?schema=v3.0.0.d"], tmp)
    ours, theirs = fingerprint(ours_url), fingerprint(theirs_url)
    for key in theirs:
        check(ours[key] == theirs[key], f"{key} differs from Optuna 3.1's:\n  tune:   "
              f"{sorted(set(ours[key]) - set(theirs[key]))}\n  Optuna: "
              f"{sorted(set(theirs[key]) - set(ours[key]))}")
    check(theirs["alembic"] == [("v3.0.0.d",)], f"Optuna's revision {theirs['alembic']}")
    print(f"part 1: tune's v3.0.0.d schema is Optuna 3.1's on PostgreSQL "
          f"({len(ours['columns'])} columns, {len(ours['constraints'])} constraints, "
          f"{len(ours['enums'])} enum labels; {base.checks} checks so far)")


def part2_take_turns(tmp):
    url = new_database("turns")
    cfg = config(tmp, "turns", sampler={"name": "tpe", "n_startup_trials": 4, "seed": 1},
                 enqueue_trials=[base.ENQUEUED])
    run = tune(["--study", "compat", "--config", cfg, "--n-trials", "8", "--storage",
                url + "?schema=v3.0.0.d", "--format", "json"], tmp)
    tune_best = json.loads(run.stdout)
    listed = base.tune_trials(tmp, "compat", url)
    study = optuna.load_study(study_name="compat", storage=url)
    trials = study.trials
    check(len(trials) == 8 == len(listed), f"{len(trials)} trials in Optuna, {len(listed)} in tune")
    for tune_trial, t in zip(listed, trials):
        base.compare(tune_trial, t)
    S = optuna.trial.TrialState
    check(trials[0].params == base.ENQUEUED, "trial 0 ran the enqueued params")
    check(trials[2].state == S.FAIL and trials[3].state == S.PRUNED, "FAIL and PRUNED trials")
    check(trials[4].value == -float("inf"), "an infinite value")
    # tune's best is trial 4 (-inf). Optuna 3.1 picks its best with ORDER BY value, and
    # PostgreSQL sorts the NULL stored for an infinite value last (SQLite: first), so Optuna
    # 3.1 on PostgreSQL ranks a -inf trial after every finite one, whoever wrote it (the same
    # happens to a study Optuna wrote alone). Its best is then the best finite trial.
    check(tune_best["number"] == 4 and base.number(tune_best["value"]) == -float("inf"),
          f"tune's best trial {tune_best}")
    finite = [t for t in trials if t.state == S.COMPLETE and abs(t.value) != float("inf")]
    best_finite = min(finite, key=lambda t: t.value)
    check(study.best_trial.number == best_finite.number
          and study.best_value == best_finite.value,
          f"Optuna's best trial {study.best_trial.number} {study.best_value}, best finite "
          f"{best_finite.number} {best_finite.value}")
    summary = [s for s in optuna.get_all_study_summaries(url) if s.study_name == "compat"][0]
    check(summary.n_trials == 8, "summary")

    study.optimize(base.optuna_objective, n_trials=3)
    optuna_enqueued = dict(base.ENQUEUED, lr=0.0005, opt=None)
    study.enqueue_trial(optuna_enqueued)
    listed = base.tune_trials(tmp, "compat", url)
    check(len(listed) == 12 and listed[11]["state"] == "WAITING", "tune sees Optuna's trials")
    for tune_trial, t in zip(listed, optuna.load_study(study_name="compat", storage=url).trials):
        base.compare(tune_trial, t)
    run = tune(["--study", "compat", "--config", cfg, "--n-trials", "14", "--storage", url], tmp)
    check("Resuming study 'compat' (12 trials stored)" in run.stderr, "tune resumed")
    listed = base.tune_trials(tmp, "compat", url)
    check([t["number"] for t in listed] == list(range(14)), "numbers 0..13")
    check(listed[11]["params"] == optuna_enqueued and listed[11]["state"] == "COMPLETE",
          "tune ran Optuna's enqueued trial")
    study = optuna.load_study(study_name="compat", storage=url)
    for tune_trial, t in zip(listed, study.trials):
        base.compare(tune_trial, t)
    study.optimize(base.optuna_objective, n_trials=1)
    check(len(study.trials) == 15 and study.trials[14].state == S.COMPLETE, "Optuna again")
    print(f"part 2: Optuna and tune take turns on one PostgreSQL study ({base.checks} checks "
          "so far)")


def part3_optuna_born(tmp):
    url = new_database("born")
    study = optuna.create_study(study_name="born", storage=url)
    study.set_user_attr("owner", "optuna")
    study.optimize(base.optuna_objective, n_trials=4)
    study.enqueue_trial(base.ENQUEUED)
    studies = json.loads(tune(["studies", "--storage", url, "--format", "json"], tmp).stdout)
    check(studies[0]["name"] == "born" and studies[0]["n_trials"] == 5
          and studies[0]["user_attrs"] == {"owner": "optuna"}, f"tune studies: {studies}")
    run = tune(["--study", "born", "--config", config(tmp, "born"), "--n-trials", "7",
                "--storage", url], tmp)
    check("Resuming study 'born' (5 trials stored)" in run.stderr, "tune resumed Optuna's study")
    listed = base.tune_trials(tmp, "born", url)
    check([t["number"] for t in listed] == list(range(7)), "numbers 0..6")
    check(listed[4]["params"] == base.ENQUEUED, "tune ran Optuna's enqueued trial")
    study = optuna.load_study(study_name="born", storage=url)
    for tune_trial, t in zip(listed, study.trials):
        base.compare(tune_trial, t)
    print(f"part 3: tune continues a study Optuna 3.1 created ({base.checks} checks so far)")


OPTUNA_WORKER = """
import sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name="mixed", storage=sys.argv[1])
def objective(t):
    t.set_user_attr("by", "optuna")
    return t.suggest_float("x0", -5, 5) ** 2 + t.suggest_float("x1", -5, 5) ** 2
study.optimize(objective, n_trials=int(sys.argv[2]))
"""


def part4_mixed_workers(tmp):
    url = new_database("mixed")
    optuna.create_study(study_name="mixed", storage=url, direction="minimize")
    cfg = os.path.join(tmp, "sphere.json")
    with open(cfg, "w") as f:
        json.dump({"direction": "minimize", "sampler": {"name": "random"},
                   "search_space": {"x0": {"type": "float", "low": -5, "high": 5},
                                    "x1": {"type": "float", "low": -5, "high": 5}},
                   "objective": {"type": "function", "name": "sphere"}}, f)
    procs = [subprocess.Popen([sys.executable, "-c", OPTUNA_WORKER, url, "40"],
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    # tune starts once Optuna's workers are writing, so that both run at the same time.
    deadline = time.time() + 60
    while query(url, "SELECT COUNT(*) FROM trials")[0][0] < 4 and time.time() < deadline:
        time.sleep(0.05)
    procs += [subprocess.Popen([TUNE, "--study", "mixed", "--config", cfg, "--n-trials", "150",
                                "--storage", url], cwd=tmp, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        check(p.returncode == 0, f"worker {p.args[:2]} exit {p.returncode}: {err[-2000:]}")
    rows = query(url, """
        SELECT t.number, t.state::text, a.value_json IS NOT NULL FROM trials t
        LEFT JOIN trial_user_attributes a ON a.trial_id = t.trial_id AND a.key = 'by'
        ORDER BY t.number""")
    n = len(rows)
    check([r[0] for r in rows] == list(range(n)), f"numbers 0..{n - 1} unique and contiguous")
    check(all(r[1] == "COMPLETE" for r in rows), "all COMPLETE")
    by_optuna = sum(r[2] for r in rows)
    check(by_optuna == 80 and n >= 150, f"{by_optuna} Optuna trials of {n}")
    switches = sum(rows[i][2] != rows[i + 1][2] for i in range(n - 1))
    check(switches >= 2, f"the workers did not overlap ({switches} switches between writers)")
    study = optuna.load_study(study_name="mixed", storage=url)
    check(len(study.trials) == n, "Optuna reads the mixed study")
    print(f"part 4: 2 Optuna + 2 tune workers at once on one study: {n} trials ({by_optuna} by "
          f"Optuna, {switches} switches between writers), numbers 0..{n - 1} "
          f"({base.checks} checks so far)")


def part5_default_revision(tmp):
    url = new_database("v320a")
    tune(["--study", "new", "--config", config(tmp, "new"), "--n-trials", "3", "--storage", url],
         tmp)
    check(query(url, "SELECT version_num FROM alembic_version") == [("v3.2.0.a",)], "v3.2.0.a")
    try:
        optuna.load_study(study_name="new", storage=url)
        check(False, "Optuna 3.1 should refuse a v3.2.0.a database")
    except RuntimeError as e:
        check("pip install -U optuna" in str(e), f"Optuna's version check: {e}")
    storage = optuna.storages.RDBStorage(url, skip_compatibility_check=True)
    check(len(optuna.load_study(study_name="new", storage=storage).trials) == 3, "three trials")
    print(f"part 5: v3.2.0.a is Optuna >= 3.2's schema ({base.checks} checks so far)")


def main():
    print(f"Optuna {optuna.__version__}, psycopg2 {psycopg2.__version__}, tune {TUNE}, "
          f"server {ADMIN}")
    try:
        with tempfile.TemporaryDirectory(prefix="tune-optuna-pg-") as tmp:
            part1_schema(tmp)
            part2_take_turns(tmp)
            part3_optuna_born(tmp)
            part4_mixed_workers(tmp)
            part5_default_revision(tmp)
    finally:
        if os.environ.get("TUNE_TEST_POSTGRES_URL"):
            con = psycopg2.connect(ADMIN)
            con.autocommit = True
            for name in created:
                con.cursor().execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            con.close()
    print(f"optuna_compat_pg: {base.checks} checks passed")


if __name__ == "__main__":
    main()
