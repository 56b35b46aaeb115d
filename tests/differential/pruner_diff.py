#!/usr/bin/python3
"""Pruners: tune against Optuna 4.9 on the same report histories (see README.md here).

Runs seeded studies through Optuna 4.9's ask/report/should_prune/tell with several trials running
at once (interleaved reports, as several workers give), each pruner in turn: median, percentile,
successive halving, hyperband, patient (alone and wrapping another pruner) and threshold. The
events (starts, reports, prune checks, finishes as Optuna decided them) go to tune_diff_driver,
which replays them with tune's pruners; every prune check must give the same decision and write
the same system attributes (successive halving's completed_rung_<k>), and hyperband must put the
same trial numbers in the same brackets. Exit 0 if all agree, 1 otherwise, 77 (skipped) without
the vendored Optuna.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diff_common  # noqa: E402

N_BRACKET_NUMBERS = 300  # trial numbers whose hyperband bracket is compared per study


def main() -> int:
    args = diff_common.parse_args(__doc__.splitlines()[0])
    optuna = diff_common.import_optuna(args.optuna, "optuna49_pruner_diff")
    rng = random.Random(args.seed)
    start = time.monotonic()
    cases, expected = [], []
    for i in range(CASES_PER_KIND):
        for kind in KINDS:
            case, exp = simulate(optuna, rng, kind, len(cases))
            cases.append(case)
            expected.append(exp)
    optuna_s = time.monotonic() - start
    results, driver_s = diff_common.run_driver(args.driver, "pruners", cases)

    failures = []
    counts = {"checks": 0, "pruned": 0, "attrs": 0, "brackets": 0}
    per_kind = {k: [0, 0, 0] for k in KINDS}  # studies, checks, prunes
    for case, exp, got in zip(cases, expected, results):
        kind = case["pruner"]["kind"]
        per_kind[kind][0] += 1
        if got["id"] != case["id"]:
            failures.append(f"{case['id']}: driver answered for {got['id']}")
            continue
        if len(got["decisions"]) != len(exp["decisions"]):
            failures.append(f"{case['id']}: {len(got['decisions'])} vs {len(exp['decisions'])} "
                            "checks")
            continue
        for i, (g, e) in enumerate(zip(got["decisions"], exp["decisions"])):
            counts["checks"] += 1
            per_kind[kind][1] += 1
            per_kind[kind][2] += e["prune"]
            counts["pruned"] += e["prune"]
            counts["attrs"] += len(e["attrs"])
            if g["prune"] != e["prune"] or g["attrs"] != e["attrs"]:
                failures.append(f"{case['id']} check {i} (trial {e['trial']}): tune prune="
                                f"{g['prune']} attrs={g['attrs']}; Optuna prune={e['prune']} "
                                f"attrs={e['attrs']}  [{case['pruner']}]")
        if got["brackets"] != exp["brackets"]:
            failures.append(f"{case['id']}: hyperband brackets differ: tune {got['brackets'][:20]}"
                            f"... Optuna {exp['brackets'][:20]}...")
        counts["brackets"] += len(exp["brackets"])

    if args.dump:
        import json
        with open(args.dump, "w") as f:
            json.dump(diff_common.encode({"cases": cases, "optuna": expected, "tune": results}), f)
    print(f"Pruners vs Optuna 4.9: {len(cases)} studies, {counts['checks']} prune checks "
          f"({counts['pruned']} prune), {counts['attrs']} system attributes written, "
          f"{counts['brackets']} hyperband bracket assignments compared")
    print("  per pruner (studies/checks/prunes): " + ", ".join(
        f"{k} {s}/{c}/{p}" for k, (s, c, p) in per_kind.items()))
    print(f"  time: Optuna {optuna_s:.1f} s, tune driver {driver_s:.2f} s")
    if failures:
        print(f"FAILED: {len(failures)} differences")
        for f in failures[:40]:
            print("  " + f)
        return 1
    print("PASSED: every decision, attribute and bracket is the same")
    return 0


CASES_PER_KIND = 14
KINDS = ["median", "percentile", "successive_halving", "hyperband", "patient", "threshold"]


def pruner_config(rng: random.Random, kind: str) -> dict:
    r = rng
    if kind in ("median", "percentile"):
        c = {"kind": kind, "n_startup_trials": r.choice([0, 1, 3, 5]),
             "n_warmup_steps": r.choice([0, 0, 2, 5]), "interval_steps": r.choice([1, 1, 2, 3]),
             "n_min_trials": r.choice([1, 1, 2, 4])}
        if kind == "percentile":
            c["percentile"] = r.choice([0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 100.0,
                                        round(r.uniform(0, 100), 3)])
        return c
    if kind == "successive_halving":
        c = {"kind": kind, "min_resource": r.choice(["auto", 1, 1, 2, 3]),
             "reduction_factor": r.choice([2, 3, 4, 5]),
             "min_early_stopping_rate": r.choice([0, 0, 1, 2])}
        c["bootstrap_count"] = 0 if c["min_resource"] == "auto" else r.choice([0, 0, 1, 3])
        return c
    if kind == "hyperband":
        c = {"kind": kind, "min_resource": r.choice([1, 1, 2, 3]),
             "max_resource": r.choice(["auto", "auto", 9, 27, 30, 81]),
             "reduction_factor": r.choice([2, 3, 3, 4])}
        c["bootstrap_count"] = 0 if c["max_resource"] == "auto" else r.choice([0, 0, 2])
        return c
    if kind == "patient":
        wrapped = r.choice([None, None, "median", "successive_halving", "threshold"])
        return {"kind": kind, "patience": r.choice([0, 1, 2, 4]),
                "min_delta": r.choice([0.0, 0.0, 0.1, 0.5]),
                "wrapped": pruner_config(r, wrapped) if wrapped else None}
    if kind == "threshold":
        lower, upper = sorted([r.gauss(0, 1), r.gauss(1, 1)])
        c = {"kind": kind, "n_warmup_steps": r.choice([0, 0, 2]),
             "interval_steps": r.choice([1, 1, 2, 3])}
        which = r.choice(["both", "lower", "upper"])
        c["lower"] = lower if which != "upper" else None
        c["upper"] = upper if which != "lower" else None
        return c
    raise AssertionError(kind)


def make_optuna_pruner(optuna, c: dict):
    P = optuna.pruners
    kind = c["kind"]
    if kind == "median":
        return P.MedianPruner(c["n_startup_trials"], c["n_warmup_steps"], c["interval_steps"],
                              n_min_trials=c["n_min_trials"])
    if kind == "percentile":
        return P.PercentilePruner(c["percentile"], c["n_startup_trials"], c["n_warmup_steps"],
                                  c["interval_steps"], n_min_trials=c["n_min_trials"])
    if kind == "successive_halving":
        return P.SuccessiveHalvingPruner(c["min_resource"], c["reduction_factor"],
                                         c["min_early_stopping_rate"], c["bootstrap_count"])
    if kind == "hyperband":
        return P.HyperbandPruner(c["min_resource"], c["max_resource"], c["reduction_factor"],
                                 c["bootstrap_count"])
    if kind == "patient":
        wrapped = make_optuna_pruner(optuna, c["wrapped"]) if c["wrapped"] else None
        return P.PatientPruner(wrapped, c["patience"], c["min_delta"])
    if kind == "threshold":
        return P.ThresholdPruner(c["lower"], c["upper"], c["n_warmup_steps"], c["interval_steps"])
    raise AssertionError(kind)


def simulate(optuna, rng: random.Random, kind: str, index: int):
    """One study through Optuna: returns the case for the driver and Optuna's decisions."""
    from optuna.trial import TrialState
    r = rng
    config = pruner_config(r, kind)
    study_name = r.choice([f"study-{index}", f"hb{r.randrange(10**6)}", "étude-ü", ""]) \
        if kind == "hyperband" else f"study-{index}"
    direction = r.choice(["minimize", "maximize"])
    pruner = make_optuna_pruner(optuna, config)
    study = optuna.create_study(direction=direction, pruner=pruner, study_name=study_name,
                                sampler=optuna.samplers.RandomSampler(seed=0))
    n_trials = r.randint(8, 45)
    workers = r.choice([1, 1, 2, 4])
    max_steps = r.choice([5, 10, 30, 100])
    stride = r.choice([1, 1, 1, 2, 3])  # report every `stride` steps
    value_style = r.choice(["smooth", "noisy", "ties", "nan"])
    events, decisions = [], []
    running = {}  # number -> [optuna Trial, next step, curve parameters, last step]
    started = 0
    while started < n_trials or running:
        if started < n_trials and len(running) < workers:
            t = study.ask()
            events.append({"op": "start"})
            last = max_steps if r.random() < 0.7 else r.randint(1, max_steps)
            start_step = r.choice([0, 0, 0, 1, stride])
            running[t.number] = [t, start_step, (r.gauss(0, 1), r.uniform(0.5, 2)), last]
            started += 1
            continue
        number = r.choice(sorted(running))
        t, step, (base, rate), last = running[number]
        if step > last or r.random() < 0.02:
            finish(study, t, events, number, r, step > last)
            del running[number]
            continue
        value = curve_value(r, value_style, base, rate, step)
        t.report(value, step)
        events.append({"op": "report", "trial": number, "step": step, "value": value})
        if r.random() < 0.05:  # a repeated report of the same step: ignored by both
            t.report(value + 1.0, step)
            events.append({"op": "report", "trial": number, "step": step, "value": value + 1.0})
        before = dict(study._storage.get_trial(t._trial_id).system_attrs)
        prune = t.should_prune()
        after = study._storage.get_trial(t._trial_id).system_attrs
        attrs = {k: v for k, v in after.items() if before.get(k, object()) != v}
        events.append({"op": "check", "trial": number})
        decisions.append({"trial": number, "prune": bool(prune), "attrs": attrs})
        running[number][1] = step + stride
        if prune:
            study.tell(t, state=TrialState.PRUNED)
            events.append({"op": "finish", "trial": number, "state": "PRUNED",
                           "value": study.trials[number].value})
            del running[number]
    brackets = []
    if kind == "hyperband":
        class _T:
            def __init__(self, n):
                self.number = n
        brackets = [pruner._get_bracket_id(study, _T(n)) for n in range(N_BRACKET_NUMBERS)]
    case = {"id": f"{kind}-{index}", "study_name": study_name, "direction": direction,
            "pruner": config, "events": events,
            "bracket_numbers": N_BRACKET_NUMBERS if kind == "hyperband" else 0}
    return diff_common.encode(case), diff_common.encode({"decisions": decisions,
                                                          "brackets": brackets})


def curve_value(r: random.Random, style: str, base: float, rate: float, step: int) -> float:
    v = base + 1.0 / (1.0 + rate * step)
    if style == "noisy":
        v += r.gauss(0, 0.3)
    elif style == "ties":
        v = round(v * 2) / 2
    elif style == "nan" and r.random() < 0.1:
        v = r.choice([math.nan, math.nan, math.inf, -math.inf])
    return v


def finish(study, t, events, number, r, reached_end: bool) -> None:
    from optuna.trial import TrialState
    if reached_end or r.random() < 0.6:
        frozen = study._storage.get_trial(t._trial_id)
        value = frozen.intermediate_values[frozen.last_step] if frozen.last_step is not None \
            else r.gauss(0, 1)
        if math.isnan(value):
            value = 0.0
        study.tell(t, value)
        events.append({"op": "finish", "trial": number, "state": "COMPLETE", "value": value})
    else:
        study.tell(t, state=TrialState.FAIL)
        events.append({"op": "finish", "trial": number, "state": "FAIL"})


if __name__ == "__main__":
    sys.exit(main())
