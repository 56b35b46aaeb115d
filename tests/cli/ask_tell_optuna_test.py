#!/usr/bin/env python3
"""A study driven only by `tune ask` / `tune tell` (ask_tell_study.sh), read by Optuna.

  ask_tell_optuna_test.py TUNE_BINARY OPTUNA49_DIR

1. ask_tell_study.sh runs a 24-trial single-objective study and a 16-trial two-objective one on
   SQLite files in tune's default schema (v3.2.0.a). The vendored Optuna 4.9 loads both and sees
   the same trials (numbers, states, values, params) as `tune trials`, the same best trial as
   `tune best-trial` and the same Pareto front as `tune best-trials`.
2. The same script on `?schema=v3.0.0.d` files: Debian's Optuna 3.1 reads them the same way.
3. Optuna 4.9's own command line and tune's take turns on one study: `optuna tell` finishes a
   trial `tune ask` started and `tune tell` one `optuna ask` started.
4. `tune tell` on a finished trial exits 2 with Optuna's message; --skip-if-finished exits 0.

Each Optuna runs in its own /usr/bin/python3 process. A missing Optuna is reported as SKIPPED
(exit 77) when neither can run; when only one is missing its part is skipped with a banner.
"""
import json
import os
import subprocess
import sys
import tempfile

TUNE = os.path.abspath(sys.argv[1])
OPTUNA49 = os.path.abspath(os.environ.get("TUNE_OPTUNA49_PATH", sys.argv[2]))
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ask_tell_study.sh")
PYTHON = "/usr/bin/python3"
checks = 0

READER = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import optuna
optuna.logging.set_verbosity(optuna.logging.ERROR)
url, name = sys.argv[1:3]
study = optuna.load_study(study_name=name, storage=url)
out = {"version": optuna.__version__,
       "directions": [d.name for d in study.directions],
       "trials": [{"number": t.number, "state": t.state.name, "values": t.values,
                   "params": t.params} for t in study.trials],
       "best_trials": sorted(t.number for t in study.best_trials)}
if len(study.directions) == 1:
    out["best_trial"] = study.best_trial.number
print(json.dumps(out))
"""


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1


def banner(text):
    line = "=" * 78
    print(f"{line}\n{text}\n{line}", flush=True)


def run(args, cwd, env=None, expect=0):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != expect:
        sys.stderr.write(r.stdout + r.stderr)
        raise AssertionError(f"{' '.join(args)}: exit {r.returncode}, expected {expect}")
    return r


def optuna_env(vendored):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if vendored:
        env["PYTHONPATH"] = OPTUNA49
    return env


def optuna_version(vendored):
    r = subprocess.run([PYTHON, "-c", "import optuna; print(optuna.__version__)"],
                       capture_output=True, text=True, env=optuna_env(vendored))
    return r.stdout.strip() if r.returncode == 0 else None


def read_with_optuna(vendored, url, study, cwd):
    r = run([PYTHON, "-c", READER, url, study], cwd, optuna_env(vendored))
    return json.loads(r.stdout)


def tune_json(cwd, *args):
    return json.loads(run([TUNE, *args, "--format", "json"], cwd).stdout)


def same_value(a, b):
    return a == b or abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))


def compare(seen, url, study, cwd, n, n_objectives):
    """Optuna's view `seen` against tune's own commands on the same file."""
    ours = tune_json(cwd, "trials", "--study-name", study, "--storage", url)
    check(len(seen["trials"]) == n and len(ours) == n, f"{study}: {n} trials on both sides")
    states = set()
    for o, t in zip(seen["trials"], ours):
        check(o["number"] == t["number"] and o["state"] == t["state"],
              f"{study}: trial {t['number']} number/state {o} vs {t['state']}")
        states.add(o["state"])
        check(o["params"] == t["params"], f"{study}: trial {t['number']} params")
        if o["state"] == "COMPLETE":
            check(len(o["values"]) == n_objectives and
                  all(same_value(a, b) for a, b in zip(o["values"], t["values"])),
                  f"{study}: trial {t['number']} values {o['values']} vs {t['values']}")
    check(states >= {"COMPLETE"}, f"{study}: has COMPLETE trials ({states})")
    front = [t["number"] for t in tune_json(cwd, "best-trials", "--study", study, "--storage", url)]
    check(front == seen["best_trials"], f"{study}: Pareto front {front} vs {seen['best_trials']}")
    if n_objectives == 1:
        best = tune_json(cwd, "best-trial", "--study", study, "--storage", url)
        check(best["number"] == seen["best_trial"], f"{study}: best trial")
    return states


def script_study(cwd, url, study, n, mode):
    run(["sh", SCRIPT, TUNE, url, study, str(n), mode], cwd)


def part_scripted(vendored, schema_query, cwd):
    tag = "49" if vendored else "31"
    url = f"sqlite:///{cwd}/script{tag}.db{schema_query}"
    script_study(cwd, url, "single", 24, "single")
    script_study(cwd, url, "multi", 16, "multi")
    single = read_with_optuna(vendored, url, "single", cwd)
    multi = read_with_optuna(vendored, url, "multi", cwd)
    states = compare(single, url, "single", cwd, 24, 1)
    compare(multi, url, "multi", cwd, 16, 2)
    check(multi["directions"] == ["MINIMIZE", "MAXIMIZE"], "multi: directions")
    check(len(multi["best_trials"]) >= 2, f"multi: a front of several trials {multi['best_trials']}")
    print(f"Optuna {single['version']} read {url}: 24 + 16 trials, states {sorted(states)}, "
          f"best trial {single['best_trial']}, Pareto front {multi['best_trials']}", flush=True)
    return url


OPTUNA_CLI = "import sys, warnings; warnings.simplefilter('ignore'); from optuna.cli import main; sys.exit(main())"


def part_take_turns(cwd):
    url = f"sqlite:///{cwd}/turns.db"
    env = optuna_env(True)
    run([TUNE, "create-study", "--study-name", "turns", "--storage", url], cwd)
    asked = json.loads(run([TUNE, "ask", "--study-name", "turns", "--storage", url,
                            "--search-space",
                            '{"x": {"type": "float", "low": 0, "high": 1}}'], cwd).stdout)
    run([PYTHON, "-c", OPTUNA_CLI, "tell", "--storage", url, "--study-name", "turns",
         "--trial-number", str(asked["number"]), "--values", "0.5"], cwd, env)
    space = '{"x": {"name": "FloatDistribution", "attributes": {"low": 0.0, "high": 1.0}}}'
    r = run([PYTHON, "-c", OPTUNA_CLI, "ask", "--storage", url, "--study-name", "turns",
             "--search-space", space], cwd, env)
    theirs = json.loads(r.stdout)
    run([TUNE, "tell", "--study-name", "turns", "--storage", url, "--trial-number",
         str(theirs["number"]), "--values", "0.25"], cwd)
    trials = tune_json(cwd, "trials", "--study", "turns", "--storage", url)
    check([(t["number"], t["state"], t["values"]) for t in trials] ==
          [(0, "COMPLETE", [0.5]), (1, "COMPLETE", [0.25])], f"turns: {trials}")
    check(trials[1]["params"]["x"] == theirs["params"]["x"], "turns: Optuna's params kept")
    seen = read_with_optuna(True, url, "turns", cwd)
    check(seen["best_trial"] == 1, "turns: Optuna's best trial")
    # A finished trial: Optuna's message, exit 2; --skip-if-finished: exit 0, nothing changes.
    again = run([TUNE, "tell", "--study", "turns", "--storage", url, "--trial-number", "1",
                 "--values", "9"], cwd, expect=2)
    check("Trial#1 has already finished and can not be updated." in again.stderr, again.stderr)
    run([TUNE, "tell", "--study", "turns", "--storage", url, "--trial-number", "1", "--values",
         "9", "--skip-if-finished"], cwd)
    check(tune_json(cwd, "trials", "--study", "turns", "--storage", url)[1]["values"] == [0.25],
          "turns: --skip-if-finished changed nothing")
    print("Optuna 4.9's CLI and tune took turns on one study: optuna tell finished tune's "
          "trial 0, tune tell finished Optuna's trial 1", flush=True)


def main():
    v49 = optuna_version(True)
    v31 = optuna_version(False)
    have49 = v49 is not None and v49.startswith("4.9.")
    have31 = v31 is not None and v31.startswith("3.")
    if not have49 and not have31:
        banner(f"SKIPPED ask_tell_optuna: no Optuna 4.9 at {OPTUNA49} and no python3-optuna")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as cwd:
        if have49:
            part_scripted(True, "", cwd)
            part_take_turns(cwd)
        else:
            banner(f"SKIPPED the Optuna 4.9 part: no Optuna 4.9 at {OPTUNA49} "
                   "(set TUNE_OPTUNA49_PATH)")
        if have31:
            part_scripted(False, "?schema=v3.0.0.d", cwd)
        else:
            banner("SKIPPED the Optuna 3.1 part: python3-optuna is not installed")
    print(f"OK: {checks} checks", flush=True)


if __name__ == "__main__":
    main()
