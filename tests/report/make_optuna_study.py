"""Writes a study with Optuna 4.9 (not tune) that has everything `tune report` draws: learning
curves, trials PRUNED by a pruner, out-of-memory trials (reason "oom") and predicted misfits
(reason "predicted"), the "memory" attribute (estimate, prediction, measured peak) and the
"schedule" attribute of a two-job run (queued, started, ended).

usage: make_optuna_study.py STORAGE_URL STUDY N_TRIALS
Needs Optuna 4.x on PYTHONPATH.
"""
import datetime
import math
import random
import sys

import optuna

GIB = 1 << 30
MODELS = {"bert-base-uncased": 0.4, "bert-large-uncased": 1.3}


def estimate(model, batch, length):
    return int((MODELS[model] + 0.9e-4 * batch * length * (2 if "large" in model else 1)) * GIB)


SPACE = {
    "model": optuna.distributions.CategoricalDistribution(list(MODELS)),
    "batch_size": optuna.distributions.CategoricalDistribution([8, 16, 32, 64]),
    "max_length": optuna.distributions.IntDistribution(128, 512, step=128),
    "lr": optuna.distributions.FloatDistribution(1e-5, 1e-3, log=True),
    "dropout": optuna.distributions.FloatDistribution(0.0, 0.3),
}


def sample(rng):
    return {"model": rng.choice(list(MODELS)), "batch_size": rng.choice([8, 16, 32, 64]),
            "max_length": rng.choice([128, 256, 384, 512]),
            "lr": math.exp(rng.uniform(math.log(1e-5), math.log(1e-3))),
            "dropout": rng.uniform(0.0, 0.3)}


def make_trial(p, rng, free, t0):
    """One finished trial (optuna.trial.create_trial) and its place on the two jobs' clock."""
    est = estimate(p["model"], p["batch_size"], p["max_length"])
    value = 0.12 + 0.06 * (math.log10(p["lr"]) + 4.5) ** 2 \
        + 0.01 * abs(math.log2(p["batch_size"] / 32)) + 0.05 * p["dropout"] \
        + (0.0 if "large" in p["model"] else 0.02) + rng.gauss(0, 0.005)
    kw = {"params": p, "distributions": SPACE, "user_attrs": {}}
    if est > 6 * GIB:  # the guard predicts a misfit and does not run it
        kw["user_attrs"] = {"oom": True, "reason": "predicted", "memory": {
            "family": "bert", "estimate": est, "predicted": est, "model": p["model"], "peak": -1}}
        return optuna.trial.create_trial(state=optuna.trial.TrialState.PRUNED, **kw)
    job = 0 if free[0] <= free[1] else 1
    started = free[job]
    queued = started - rng.uniform(0, 3)
    peak = int(est * rng.uniform(0.85, 1.2))
    memory = {"family": "bert", "estimate": est, "predicted": int(est * 1.05), "model": p["model"],
              "peak": peak, "run": {"batch_size": p["batch_size"], "max_length": p["max_length"]}}
    duration = 5 + p["batch_size"] * p["max_length"] / 400.0
    state, curve = optuna.trial.TrialState.COMPLETE, {}
    if peak > 5 * GIB:  # ran out of memory at run time
        duration = 2.0
        kw["user_attrs"].update(oom=True, reason="oom")
        state = optuna.trial.TrialState.PRUNED
    else:
        curve = {step: value + (6 - step) ** 2 * 0.01 for step in range(6)}
        if value > 0.2 and rng.random() < 0.5:  # stopped by the pruner
            state, duration = optuna.trial.TrialState.PRUNED, duration / 2
            curve = {k: v for k, v in curve.items() if k < 3}
    free[job] = started + duration
    stamp = lambda s: (t0 + datetime.timedelta(seconds=s)).isoformat(sep=" ")
    kw["user_attrs"].update(memory=memory, schedule={
        "queued": stamp(queued), "started": stamp(started), "ended": stamp(free[job]),
        "jobs": 2, "reservation": peak})
    if state == optuna.trial.TrialState.COMPLETE:
        kw["value"] = value
    return optuna.trial.create_trial(state=state, intermediate_values=curve, **kw)


def main():
    url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rng = random.Random(7)
    study = optuna.create_study(storage=url, study_name=name, direction="minimize")
    t0 = datetime.datetime.now()  # create_trial stamps datetime_start with the current time
    free = [0.0, 0.0]  # when each of two jobs is free, seconds after t0
    study.add_trials([make_trial(sample(rng), rng, free, t0) for _ in range(n)])
    print(f"wrote {n} trials of study '{name}' with Optuna {optuna.__version__}")


if __name__ == "__main__":
    main()
