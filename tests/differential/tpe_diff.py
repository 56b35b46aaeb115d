#!/usr/bin/python3
"""TPE: tune against Optuna 4.9 or 5.0 on the same trial histories (see README.md here).

Generates seeded histories, random and adversarial, runs Optuna's TPESampler._sample on each
(the real code path: _split_trials, _get_internal_repr, _ParzenEstimator, captured through the
sampler's _parzen_estimator_cls hook), runs tune_diff_driver on the same histories and compares
the below/above split, every kernel of l and g (mixture weight, mu, sigma, domain bounds, or
choice probabilities), and ln l(x), ln g(x), ln l(x) - ln g(x) at fixed candidate points. With
multivariate, also the relative search space and (group) the groups. Exit 0 if everything agrees
to TOLERANCE relative, 1 otherwise, 77 (skipped) without the vendored Optuna.

With --optuna-version 5.0 the cases run under Optuna 5.0's defaults on both sides (tune's preset
optuna-5.0: multivariate auto, constant liar on, the per-dimension bandwidth, constraints read
from "constraints:<name>" and the old list with a missing one feasible, several objectives'
uniform below weights and uncapped gamma); with 4.9 (the default) under the optuna-4.9 preset.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
import zlib

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diff_common  # noqa: E402

TOLERANCE = 1e-9
N_POINTS = 12  # candidate points per query
V50 = False  # --optuna-version 5.0


def main() -> int:
    global V50
    args = diff_common.parse_args(__doc__.splitlines()[0])
    V50 = args.optuna_version == "5.0"
    name = "optuna50_tpe_diff" if V50 else "optuna49_tpe_diff"
    optuna = diff_common.import_optuna(args.optuna, name, args.optuna_version)
    start = time.monotonic()
    gen = Generator(optuna, args.seed)
    cases = gen.cases()
    expected = [run_optuna(optuna, c) for c in cases]
    optuna_s = time.monotonic() - start
    results, driver_s = diff_common.run_driver(args.driver, "tpe", [c.for_driver() for c in cases])
    report = Report()
    for case, exp, got in zip(cases, expected, results):
        compare_case(case, exp, got, report)
    if args.dump:
        import json
        with open(args.dump, "w") as f:
            json.dump(diff_common.encode({"cases": [c.for_driver() for c in cases],
                                          "optuna": expected, "tune": results}), f)
    report.print_summary(cases, optuna_s, driver_s, args.verbose)
    return 0 if report.ok() else 1


# ---------------------------------------------------------------------------------------------
# Histories


class Case:
    def __init__(self, kind: str, index: int):
        self.id = f"{kind}-{index}"
        self.kind = kind
        self.direction = "minimize"
        self.directions: list | None = None  # several objectives
        self.options: dict = {}
        self.trials: list[dict] = []  # driver format, params in internal representation
        self.trial_number = 0  # the asking trial (RUNNING, last)
        self.queries: list[dict] = []  # {"names": [...], "points": {name: [internal]}}
        self.space: dict = {}  # name -> distribution object, for the queries
        # Optuna's view of the history when tune deliberately differs (documented in
        # docs/tpe.md#differences-from-optuna): e.g. values outside the current range removed.
        self.optuna_trials: list[dict] | None = None

    def for_driver(self) -> dict:
        from optuna.distributions import distribution_to_json
        out = {
            "id": self.id,
            "direction": self.direction,
            "options": self.options,
            "trials": self.trials,
            "trial_number": self.trial_number,
            "queries": [{
                "distributions": {n: distribution_to_json(self.space[n]) for n in q["names"]},
                "points": q["points"],
            } for q in self.queries],
        }
        if self.directions:
            out["directions"] = self.directions
        return out


class Generator:
    def __init__(self, optuna, seed: int):
        from optuna.distributions import CategoricalDistribution as C
        from optuna.distributions import FloatDistribution as F
        from optuna.distributions import IntDistribution as I
        self.optuna = optuna
        self.rng = random.Random(seed)
        self.dists = {
            "x": F(-5.0, 5.0),
            "lr": F(1e-5, 1e-1, log=True),
            "q": F(0.0, 1.0, step=0.1),
            "n": I(1, 10),
            "k": I(2, 20, step=3),
            "bs": I(1, 1024, log=True),
            "c": C(["a", "b", "c"]),
            "opt": C([None, True, 1.5, "sgd"]),
            "one": F(1.0, 1.0),  # single(): never sampled, left out of relative spaces
        }
        self.index = 0

    # -- values

    def value(self, name: str, dup_pool: dict | None = None) -> float:
        """A value of `name` in internal representation, as Optuna would have stored it."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution
        d = self.dists[name]
        r = self.rng
        if dup_pool is not None:
            pool = dup_pool.setdefault(name, [self.value(name) for _ in range(r.randint(1, 3))])
            return r.choice(pool)
        if isinstance(d, CategoricalDistribution):
            return float(r.randrange(len(d.choices)))
        u = r.random()
        if r.random() < 0.08:
            u = r.choice([0.0, 1.0])  # the domain ends
        if isinstance(d, FloatDistribution):
            if d.step is not None:
                k = round(u * (d.high - d.low) / d.step)
                return d.low + k * d.step  # as Optuna's sampler leaves it (0.30000000000000004)
            if d.log:
                v = math.exp(math.log(d.low) + u * (math.log(d.high) - math.log(d.low)))
            else:
                v = d.low + u * (d.high - d.low)
            return min(d.high, max(d.low, v))
        if d.log:
            return float(min(d.high, max(d.low, round(math.exp(
                math.log(d.low) + u * (math.log(d.high) - math.log(d.low)))))))
        return float(d.low + d.step * round(u * (d.high - d.low) / d.step))

    def objective(self, ties: bool) -> float:
        r = self.rng
        if ties:
            return float(r.choice([0.0, -0.0, 1.0, 1.0, 2.0]))
        if r.random() < 0.03:
            return r.choice([math.inf, -math.inf])
        return r.gauss(0.0, 1.0)

    def params_for(self, schema: str, params: list[str], dup_pool) -> dict:
        """Flat: all of `params`. Conditional: "c" always, the others depend on its choice;
        "k" half of the time, the single-valued "one" sometimes."""
        r = self.rng
        out = {}
        if schema == "flat":
            for n in params:
                out[n] = self.value(n, dup_pool)
            return out
        c = self.value("c", dup_pool)
        out["c"] = c
        branch = {0: ["x", "n"], 1: ["lr"], 2: ["bs", "q"]}[int(c)]
        for n in branch:
            out[n] = self.value(n, dup_pool)
        if r.random() < 0.5:
            out["k"] = self.value("k", dup_pool)
        if r.random() < 0.2:
            out["one"] = 1.0
        return out

    def trial(self, number: int, state: str, params: dict, value=None, reports=None,
              user_attrs=None, system_attrs=None) -> dict:
        from optuna.distributions import distribution_to_json
        t = {
            "number": number,
            "state": state,
            "params": params,
            "distributions": {n: distribution_to_json(self.dists[n]) for n in params},
            "intermediate": reports or [],
            "user_attrs": user_attrs or {},
            "system_attrs": system_attrs or {},
        }
        if value is not None:
            t["values"] = value if isinstance(value, list) else [value]
        return t

    def reports(self, pruned_style: str) -> list:
        """Intermediate values of a PRUNED trial: none, a few steps, NaN at the end, ..."""
        r = self.rng
        if pruned_style == "none" or r.random() < 0.25:
            return []
        steps = sorted(r.sample(range(0, 12), r.randint(1, 5)))
        values = [round(r.gauss(0, 1), r.choice([1, 6])) for _ in steps]
        if r.random() < 0.15:
            values[-1] = math.nan
        if r.random() < 0.05:
            values[-1] = r.choice([math.inf, -math.inf])
        return [[s, v] for s, v in zip(steps, values)]

    def options(self, kind: str) -> dict:
        r = self.rng
        o = {}
        if r.random() < 0.3:
            o["prior_weight"] = r.choice([0.0, 0.5, 3.0])
        if r.random() < 0.15:
            o["consider_magic_clip"] = False
        if r.random() < 0.2:
            o["consider_endpoints"] = True
        if r.random() < 0.3:
            o["gamma"] = r.choice(["hyperopt", 0.25, 0.5, 1.0])
        if r.random() < 0.15:
            o["weights"] = "uniform"
        return o

    # -- cases

    def make(self, kind: str, n_finished: int, schema: str = "flat", params=None,
             ties=False, dups=False, pruned=0.2, pruned_style="mixed", oom=0.0,
             constraints=False, liar=False, running=0, multivariate=False, group=False,
             changed_range=False, objectives=1) -> Case:
        r = self.rng
        self.index += 1
        case = Case(kind, self.index)
        case.direction = r.choice(["minimize", "maximize"])
        case.options = self.options(kind)
        if V50:
            case.options["preset"] = "optuna-5.0"
        if objectives > 1:
            case.directions = [r.choice(["minimize", "maximize"]) for _ in range(objectives)]
            # Optuna 4.9 fails when a PRUNED trial is below (no values to weigh) or has reports
            # (its score reads study.direction): keep PRUNED trials without reports and few.
            pruned_style = "none"
            case.options.pop("gamma", None)
        if constraints:
            case.options["constraints"] = True
        if liar:
            case.options["constant_liar"] = True
        if multivariate:
            case.options["multivariate"] = True
            case.options["group"] = group
        params = params or r.sample(["x", "lr", "q", "n", "k", "bs", "c", "opt"], r.randint(1, 4))
        dup_pool = {} if dups else None
        n_total = n_finished + r.randint(0, 3) + running
        finished_slots = set(r.sample(range(n_total), n_finished))
        running_left = running
        for number in range(n_total):
            p = self.params_for(schema, params, dup_pool)
            if number not in finished_slots:
                state = "RUNNING" if running_left > 0 else r.choice(["FAIL", "WAITING", "RUNNING"])
                running_left -= state == "RUNNING"
                if state == "WAITING":
                    p = {}
                shared = {}
                if state == "RUNNING" and V50 and r.random() < 0.4 and p:
                    # Optuna 5.0's constant liar: the joint sample it shared, in pieces.
                    text = json.dumps({n: self.dists[n].to_external_repr(v) for n, v in p.items()})
                    shared = {f"tpe:relative_params:{i // 7}": text[i:i + 7]
                              for i in range(0, len(text), 7)}
                if p and r.random() < 0.3:  # a worker that has suggested only some params
                    keep = r.sample(sorted(p), r.randint(0, len(p) - 1))
                    p = {n: p[n] for n in keep}
                case.trials.append(self.trial(number, state, p, system_attrs=shared))
                continue
            user_attrs, system_attrs = {}, {}
            if r.random() < oom:
                state = "PRUNED"
                user_attrs["oom"] = True
                reps = self.reports("none" if r.random() < 0.6 else "mixed")
                value = None
            elif r.random() < pruned:
                state = "PRUNED"
                reps = self.reports(pruned_style)
                value = None
                if reps and r.random() < 0.5 and not math.isnan(reps[-1][1]):
                    value = reps[-1][1]  # tune and Optuna store the last report as the value
            else:
                state = "COMPLETE"
                reps = self.reports("mixed") if r.random() < 0.2 and objectives == 1 else []
                value = (self.objective(ties) if objectives == 1
                         else [self.objective(ties) for _ in range(objectives)])
            if objectives > 1 and state == "PRUNED":
                reps, value = [], None
            if constraints and r.random() < 0.9:
                values = [r.choice([-1.0, 0.0, 0.0, 0.5, 2.0, r.uniform(-1, 1), math.nan])
                          for _ in range(r.randint(1, 3))]
                if V50 and r.random() < 0.7:  # trial.set_constraint's keys (no NaN there)
                    for i, v in enumerate(values):
                        system_attrs[f"constraints:c{i}"] = 0.0 if math.isnan(v) else v
                else:
                    system_attrs["constraints"] = values
            case.trials.append(self.trial(number, state, p, value, reps, user_attrs,
                                          system_attrs))
        if objectives > 1:
            self.complete_enough(case)
        # The asking trial: RUNNING, last, maybe with some parameters already suggested.
        case.trial_number = n_total
        ask = {}
        if r.random() < 0.3:
            full = self.params_for(schema, params, None)
            ask = {n: full[n] for n in r.sample(sorted(full), r.randint(0, len(full)))}
        case.trials.append(self.trial(n_total, "RUNNING", ask))
        if changed_range:
            self.change_ranges(case)
        self.add_queries(case)
        return case

    def complete_enough(self, case: Case) -> None:
        """Several objectives: turn PRUNED trials into COMPLETE ones until gamma(n) COMPLETE
        trials can fill the below group (see make)."""
        finished = [t for t in case.trials if t["state"] in ("COMPLETE", "PRUNED")]
        n_below = math.ceil(0.1 * len(finished))  # the default gamma (4.9: capped at 25)
        if not V50:
            n_below = min(n_below, 25)
        complete = sum(t["state"] == "COMPLETE" for t in finished)
        for t in finished:
            if complete >= n_below:
                break
            if t["state"] == "PRUNED":
                t["state"], t["user_attrs"] = "COMPLETE", {}
                t["values"] = [self.objective(False) for _ in case.directions]
                complete += 1

    def change_ranges(self, case: Case) -> None:
        """Some trials stored 'x' under a wider range and 'n' under a longer one: values inside
        the current distribution are used, those outside are not (tune leaves them out; Optuna
        would put kernels outside the domain, see docs/tpe.md#history)."""
        from optuna.distributions import FloatDistribution, IntDistribution, distribution_to_json
        r = self.rng
        wide = {"x": FloatDistribution(-10.0, 10.0), "n": IntDistribution(1, 20)}
        optuna_trials = []
        for t in case.trials:
            ot = dict(t, params=dict(t["params"]), distributions=dict(t["distributions"]))
            for name, d in wide.items():
                if name in t["params"] and r.random() < 0.5:
                    v = (r.uniform(d.low, d.high) if isinstance(d, FloatDistribution)
                         else float(r.randint(d.low, d.high)))
                    t["params"][name] = v
                    t["distributions"][name] = distribution_to_json(d)
                    ot["params"][name] = v
                    ot["distributions"][name] = distribution_to_json(d)
                    if not self.dists[name]._contains(v):
                        del ot["params"][name], ot["distributions"][name]
            optuna_trials.append(ot)
        case.optuna_trials = optuna_trials
        if V50:  # 5.0's auto would sample jointly: the relative spaces differ on purpose
            case.options["multivariate"] = False
        else:
            case.options.pop("multivariate", None)

    def add_queries(self, case: Case) -> None:
        names = sorted({n for t in case.trials for n in t["params"]} - {"one"})
        if self.rng.random() < 0.2 or not names:
            names.append("new")  # a parameter no trial has: both estimators are the prior
            from optuna.distributions import FloatDistribution
            self.dists["new"] = FloatDistribution(0.0, 1.0)
        case.space = dict(self.dists)
        for n in names:
            case.queries.append({"names": [n], "points": {n: self.points(n, case, N_POINTS)}})
        # Joint queries (multivariate) are added by run_optuna from Optuna's relative space.

    def points(self, name: str, case: Case, count: int) -> list[float]:
        """Candidate points: observed values, the domain ends and middle, random values."""
        from optuna.distributions import CategoricalDistribution
        d = self.dists[name]
        if isinstance(d, CategoricalDistribution):
            return [float(self.rng.randrange(len(d.choices))) for _ in range(count)]
        observed = [t["params"][name] for t in case.trials
                    if name in t["params"] and d._contains(t["params"][name])]
        fixed = [self.value(name) for _ in range(2)]
        fixed += [float(d.low), float(d.high)]
        out = self.rng.sample(observed, min(len(observed), 4)) + fixed
        while len(out) < count:
            out.append(self.value(name))
        return out[:count]

    def cases(self) -> list[Case]:
        r = self.rng
        cases = []
        for _ in range(70):  # random histories, flat and conditional spaces
            cases.append(self.make("random", r.randint(1, 60),
                                   schema=r.choice(["flat", "conditional"]),
                                   pruned=r.choice([0.0, 0.2, 0.5]), oom=r.choice([0.0, 0.1])))
        for _ in range(12):  # long histories: above sets > 25 (weight ramp), gamma capped
            cases.append(self.make("long", r.randint(60, 150), schema="conditional"))
        cases.append(self.make("long", 270, params=["x", "n"]))
        for _ in range(20):  # ties in values and duplicated parameter values
            cases.append(self.make("ties", r.randint(2, 40), ties=True, dups=True,
                                   schema=r.choice(["flat", "conditional"])))
        for _ in range(12):  # a single observation, or none at all
            cases.append(self.make("single", r.choice([0, 1, 1, 2]),
                                   schema=r.choice(["flat", "conditional"])))
        for _ in range(20):  # PRUNED trials with and without reports, NaN and infinite reports
            cases.append(self.make("pruned", r.randint(5, 50), pruned=0.7,
                                   pruned_style=r.choice(["mixed", "none"])))
        for _ in range(15):  # out-of-memory trials (PRUNED, user attr oom=true)
            cases.append(self.make("oom", r.randint(5, 50), oom=0.4,
                                   schema=r.choice(["flat", "conditional"])))
        for _ in range(20):  # constraints: feasible, violating, missing, NaN entries
            cases.append(self.make("constraints", r.randint(3, 50), constraints=True,
                                   pruned=0.3, schema=r.choice(["flat", "conditional"])))
        for _ in range(20):  # constant liar: other workers' RUNNING trials, complete or partial
            cases.append(self.make("liar", r.randint(1, 40), liar=True, running=r.randint(1, 6),
                                   schema=r.choice(["flat", "conditional"])))
        for _ in range(10):  # values stored under another range
            cases.append(self.make("changed_range", r.randint(5, 40), params=["x", "n", "c"],
                                   changed_range=True))
        every = ["x", "lr", "q", "n", "k", "bs", "c", "opt"]
        for _ in range(40):  # multivariate (Scott bandwidth: Optuna 4.9's rule)
            cases.append(self.make("multivariate", r.randint(1, 60),
                                   params=r.sample(every, r.randint(2, 6)),
                                   schema=r.choice(["flat", "flat", "conditional"]),
                                   multivariate=True, liar=r.random() < 0.3,
                                   running=r.randint(0, 3), pruned=0.3, oom=0.1))
        for _ in range(60):  # several objectives: MOTPE's split (HSSP) and below weights
            cases.append(self.make("multi_objective", r.randint(1, 80),
                                   schema=r.choice(["flat", "conditional"]),
                                   objectives=r.choice([2, 2, 3, 4]), ties=r.random() < 0.2,
                                   pruned=r.choice([0.0, 0.1]), oom=r.choice([0.0, 0.1]),
                                   constraints=r.random() < 0.3, liar=r.random() < 0.3,
                                   running=r.randint(0, 3), multivariate=r.random() < 0.4))
        for _ in range(10):  # several objectives, long: gamma capped at 25, the weight ramp above
            cases.append(self.make("multi_objective_long", r.randint(150, 300), params=["x", "c"],
                                   objectives=r.choice([2, 3]), pruned=0.0))
        for _ in range(20):  # multivariate with group decomposition
            cases.append(self.make("group", r.randint(1, 60), schema="conditional",
                                   multivariate=True, group=True, liar=r.random() < 0.3,
                                   running=r.randint(0, 3), pruned=0.3, oom=0.1))
        return cases


# ---------------------------------------------------------------------------------------------
# Optuna's side


def make_study(optuna, case: Case):
    from optuna.samplers import TPESampler
    from optuna.samplers._tpe.sampler import default_gamma, default_weights

    o = case.options
    if V50:
        return make_study_v50(optuna, case)
    gamma_fn, weights_fn = gamma_and_weights(o)
    gamma_fn, weights_fn = gamma_fn or default_gamma, weights_fn or default_weights
    sampler = TPESampler(
        prior_weight=o.get("prior_weight", 1.0),
        consider_magic_clip=o.get("consider_magic_clip", True),
        consider_endpoints=o.get("consider_endpoints", False),
        n_startup_trials=0,
        n_ei_candidates=1,  # the candidates drawn are not compared (different random streams)
        gamma=gamma_fn,
        weights=weights_fn,
        seed=0,
        multivariate=o.get("multivariate", False),
        group=o.get("group", False),
        constant_liar=o.get("constant_liar", False),
        # Optuna reads the constraints from the system attribute in the split; the weights of
        # several objectives call constraints_func: give it the same values.
        constraints_func=((lambda t: t.system_attrs.get("constraints", [math.inf]))
                          if o.get("constraints") else None),
    )
    return new_study(optuna, case, sampler), sampler


def new_study(optuna, case: Case, sampler):
    """A study of the case's directions with `sampler`, holding the case's history (Optuna's view
    of it)."""
    from optuna.distributions import json_to_distribution
    from optuna.trial import TrialState, create_trial
    if case.directions:
        study = optuna.create_study(directions=case.directions, sampler=sampler,
                                    study_name="diff")
    else:
        study = optuna.create_study(direction=case.direction, sampler=sampler, study_name="diff")
    for t in (case.optuna_trials if case.optuna_trials is not None else case.trials):
        dists = {n: json_to_distribution(j) for n, j in t["distributions"].items()}
        values = t.get("values")
        study.add_trial(create_trial(
            state=TrialState[t["state"]],
            values=values if t["state"] == "COMPLETE" or values else None,
            params={n: dists[n].to_external_repr(v) for n, v in t["params"].items()},
            distributions=dists,
            intermediate_values={s: v for s, v in t["intermediate"]},
            user_attrs=t["user_attrs"],
            system_attrs=t["system_attrs"],
        ))
    return study


def gamma_and_weights(o: dict):
    """The case's gamma and weights functions; None for Optuna's defaults."""
    from optuna.samplers._tpe.sampler import hyperopt_default_gamma
    import numpy as np
    gamma = o.get("gamma", "default")
    if gamma == "default":
        gamma_fn = None
    elif gamma == "hyperopt":
        gamma_fn = hyperopt_default_gamma
    else:
        gamma_fn = lambda n, r=float(gamma): min(math.ceil(r * n), 25)  # noqa: E731
    return gamma_fn, (None if o.get("weights", "default") == "default" else np.ones)


def make_study_v50(optuna, case: Case):
    """Optuna 5.0's TPESampler with its defaults, but for the options the case names. Its
    deprecated arguments are passed only when the case changes them (no constraints_func: 5.0
    reads each trial's constraints)."""
    from optuna.samplers import TPESampler

    o = case.options
    gamma_fn, weights_fn = gamma_and_weights(o)
    kwargs = {}
    for key in ("prior_weight", "consider_magic_clip", "consider_endpoints"):
        if key in o:
            kwargs[key] = o[key]
    if gamma_fn is not None:
        kwargs["gamma"] = gamma_fn
    if weights_fn is not None:
        kwargs["weights"] = weights_fn
    if "multivariate" in o:
        kwargs["multivariate"] = o["multivariate"]
    sampler = TPESampler(n_startup_trials=0, n_ei_candidates=1, seed=0,
                         group=o.get("group", False),
                         constant_liar=o.get("constant_liar", True), **kwargs)
    return new_study(optuna, case, sampler), sampler


def params_of(sampler, trial, study) -> dict:
    """TPESampler._get_params (5.0 also reads a running trial's shared relative params)."""
    try:
        return sampler._get_params(trial, study)
    except TypeError:
        return sampler._get_params(trial)


def is_multivariate(sampler, study, case: Case) -> bool:
    if V50:
        return sampler._is_multivariate(study)
    return bool(case.options.get("multivariate"))


class Capture:
    """Records what TPESampler._sample builds: the split and the two Parzen estimators."""

    def __init__(self):
        import optuna.samplers._tpe.sampler as tpe_module
        from optuna.samplers._tpe.parzen_estimator import _ParzenEstimator
        self.module = tpe_module
        self.original_split = tpe_module._split_trials
        self.split = None
        self.estimators = []
        capture = self

        def split(study, trials, n_below, *rest):
            below, above = capture.original_split(study, trials, n_below, *rest)
            capture.split = (below, above)
            return below, above

        class Recording(_ParzenEstimator):
            def __init__(self, *a, **k):
                super().__init__(*a, **k)
                capture.estimators.append(self)

        tpe_module._split_trials = split
        self.estimator_cls = Recording

    def run(self, sampler, study, trial, space, stable_ties: bool):
        """Runs _sample; with stable_ties, numpy's argsort in the bandwidth rule is stable, so
        equal observations are ordered by trial number as in tune (see tie_groups_agree)."""
        import numpy
        from optuna.samplers._tpe import parzen_estimator as pe_module
        self.split, self.estimators = None, []
        sampler._parzen_estimator_cls = self.estimator_cls
        pe_module.np = _StableArgsortNumpy(numpy) if stable_ties else numpy
        try:
            sampler._sample(study, trial, space)
        finally:
            pe_module.np = numpy
        assert self.split is not None and len(self.estimators) == 2
        return self.split, self.estimators[0], self.estimators[1]


class _StableArgsortNumpy:
    """numpy, except that argsort defaults to a stable sort."""

    def __init__(self, numpy):
        self._numpy = numpy

    def __getattr__(self, name):
        return getattr(self._numpy, name)

    def argsort(self, a, *args, **kwargs):
        kwargs.setdefault("kind", "stable")
        return self._numpy.argsort(a, *args, **kwargs)


CAPTURE = None


def estimator_json(pe, space) -> dict:
    import numpy as np
    from optuna.samplers._tpe import probability_distributions as pd
    md = pe._mixture_distribution
    dims = {}
    for i, name in enumerate(space):
        d = md.distributions[i]
        if isinstance(d, pd._BatchedCategoricalDistributions):
            dims[name] = {"kind": "categorical", "probs": np.asarray(d.weights).tolist()}
            continue
        # The kernel domain as Optuna's log_pdf uses it (transformed space).
        if isinstance(d, pd._BatchedTruncNormDistributions):
            kind, low, high = "continuous", d.low, d.high
        elif isinstance(d, pd._BatchedTruncLogNormDistributions):
            kind, low, high = "continuous", np.log(d.low), np.log(d.high)
        elif isinstance(d, pd._BatchedDiscreteTruncNormDistributions):
            kind, low, high = "discrete", d.low - d.step / 2, d.high + d.step / 2
        else:
            kind, low, high = "discrete", np.log(d.low - d.step / 2), np.log(d.high + d.step / 2)
        dims[name] = {"kind": kind, "mu": np.asarray(d.mu).tolist(),
                      "sigma": np.asarray(d.sigma).tolist(), "low": float(low), "high": float(high)}
    return {"weights": np.asarray(md.weights).tolist(), "dims": dims}


def run_optuna(optuna, case: Case) -> dict:
    import numpy as np
    global CAPTURE
    if CAPTURE is None:
        CAPTURE = Capture()
    study, sampler = make_study(optuna, case)
    trial = study._get_trials(deepcopy=False)[case.trial_number]
    out = {"queries": []}
    if is_multivariate(sampler, study, case):
        space = sampler.infer_relative_search_space(study, trial)
        out["relative_space"] = {n: optuna.distributions.distribution_to_json(d)
                                 for n, d in space.items()}
        joint = []
        if case.options.get("group"):
            groups = []
            for sub in sampler._search_space_group.search_spaces:
                names = sorted(n for n, d in sub.items() if not d.single() and n in space)
                if names:
                    groups.append(names)
            out["groups"] = sorted(groups)
            joint = groups
        elif space:
            joint = [sorted(space)]
        # Joint queries from Optuna's relative space (tune is asked for the same ones).
        gen_rng = random.Random(zlib.crc32(case.id.encode()))
        for names in joint:
            pts = {n: case_points(case, n, gen_rng) for n in names}
            case.queries.append({"names": names, "points": pts})
    for q in case.queries:
        space = {n: case.space[n] for n in q["names"]}
        (below, above), l, g = CAPTURE.run(sampler, study, trial, space, stable_ties=True)
        keep = lambda ts: [t.number for t in ts  # noqa: E731
                           if space.keys() <= params_of(sampler, t, study).keys()]
        points = {n: np.asarray(q["points"][n], dtype=float) for n in space}
        ll, lg = l.log_pdf(points), g.log_pdf(points)
        result = {
            "below": keep(below), "above": keep(above),
            "l": estimator_json(l, space), "g": estimator_json(g, space),
            "log_l": ll.tolist(), "log_g": lg.tolist(),
        }
        if has_ties(result["l"]) or has_ties(result["g"]):
            # Optuna as it is: numpy's default argsort (introsort) orders equal observations
            # its own way. Compared with tune by tie_groups_agree.
            _, l2, g2 = CAPTURE.run(sampler, study, trial, space, stable_ties=False)
            result["numpy_order"] = {"l": estimator_json(l2, space),
                                     "g": estimator_json(g2, space)}
        out["queries"].append(result)
    return out


def has_ties(estimator: dict) -> bool:
    """Whether two observations (not the prior, the last kernel) share a value in a numerical
    dimension whose bandwidths come from the neighbour-gap rule."""
    for d in estimator["dims"].values():
        if d["kind"] != "categorical" and len(set(d["mu"][:-1])) < len(d["mu"]) - 1:
            return True
    return False


def case_points(case: Case, name: str, rng: random.Random) -> list[float]:
    """Points for a joint query: the univariate query's points of `name`, shuffled."""
    for q in case.queries:
        if q["names"] == [name]:
            pts = list(q["points"][name])
            rng.shuffle(pts)
            return pts
    raise AssertionError(name)


# ---------------------------------------------------------------------------------------------
# Comparison


class Report:
    QUANTITIES = ["weight", "mu", "sigma", "bounds", "choice prob", "log l", "log g",
                  "log l - log g"]

    def __init__(self):
        self.max = {q: 0.0 for q in self.QUANTITIES}
        self.where = {q: "" for q in self.QUANTITIES}
        self.counts = {"queries": 0, "joint": 0, "points": 0, "kernels": 0, "splits": 0,
                       "tie_queries": 0, "tie_order_differs": 0}
        self.failures: list[str] = []

    def ok(self) -> bool:
        return not self.failures

    def fail(self, where: str, what: str) -> None:
        self.failures.append(f"{where}: {what}")

    def num(self, quantity: str, a, b, where: str, floor: float = 0.0) -> None:
        d = diff_common.rel_diff(a, b, floor)
        if d > self.max[quantity]:
            self.max[quantity], self.where[quantity] = d, where
        if d > TOLERANCE:
            self.fail(where, f"{quantity}: tune {a!r} vs Optuna {b!r} (relative {d:.3g})")

    def vec(self, quantity: str, a: list, b: list, where: str, floor: float = 0.0) -> None:
        if len(a) != len(b):
            self.fail(where, f"{quantity}: tune has {len(a)} entries, Optuna {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            self.num(quantity, x, y, f"{where}[{i}]", floor)

    def print_summary(self, cases, optuna_s: float, driver_s: float, verbose: bool) -> None:
        kinds = {}
        for c in cases:
            kinds[c.kind] = kinds.get(c.kind, 0) + 1
        c = self.counts
        print(f"TPE vs Optuna {diff_common.OPTUNA_VERSION}: {len(cases)} histories "
              f"({', '.join(f'{k} {n}' for k, n in kinds.items())})")
        print(f"  {c['queries']} queries ({c['queries'] - c['joint']} univariate, {c['joint']} "
              f"joint), {c['splits']} splits, {c['kernels']} kernels, {c['points']} candidate "
              f"points compared")
        print(f"  {c['tie_queries']} queries have equal observations; in "
              f"{c['tie_order_differs']} of them numpy's unstable argsort gives their bandwidths "
              f"in another order than tune (same bandwidths per value; compared above with a "
              f"stable argsort)")
        print("  max relative difference per quantity (|a-b| / max(|a|, |b|), log densities "
              "and scores with the denominator floored at 1):")
        for q in self.QUANTITIES:
            where = f"  at {self.where[q]}" if verbose and self.where[q] else ""
            print(f"    {q:<14} {self.max[q]:.3g}{where}")
        overall = max(self.max.values())
        print(f"  max relative difference overall: {overall:.3g} (tolerance {TOLERANCE:g})")
        print(f"  time: Optuna {optuna_s:.1f} s, tune driver {driver_s:.2f} s")
        if self.failures:
            print(f"FAILED: {len(self.failures)} differences")
            for f in self.failures[:40]:
                print("  " + f)
        else:
            print("PASSED")


def compare_estimator(report: Report, got: dict, exp: dict, where: str) -> None:
    # Mixture weights with the denominator floored at 1e-6: with several objectives a below
    # trial of (near) zero hypervolume contribution weighs ~1e-12, a difference of hypervolumes
    # whose rounding differs between numpy's and tune's sums.
    report.vec("weight", got["weights"], exp["weights"], where + ".weights", floor=1e-6)
    if len(got["weights"]) != len(exp["weights"]):
        return
    report.counts["kernels"] += len(exp["weights"])
    if set(got["dims"]) != set(exp["dims"]):
        report.fail(where, f"dimensions {sorted(got['dims'])} vs {sorted(exp['dims'])}")
        return
    # A kernel of mixture weight 0 (the prior with prior_weight 0) plays no part in densities or
    # sampling: its parameters are not compared (Optuna leaves such a categorical row all 0,
    # tune uniform).
    live = [i for i, (a, b) in enumerate(zip(got["weights"], exp["weights"]))
            if not (a == 0 and b == 0)]
    pick = lambda v: [v[i] for i in live]  # noqa: E731
    for name, e in exp["dims"].items():
        g = got["dims"][name]
        w = f"{where}.{name}"
        if g["kind"] != e["kind"]:
            report.fail(w, f"kernel kind {g['kind']} vs {e['kind']}")
            continue
        if e["kind"] == "categorical":
            if len(g["probs"]) != len(e["probs"]):
                report.fail(w, f"{len(g['probs'])} vs {len(e['probs'])} components")
                continue
            for i in live:
                report.vec("choice prob", g["probs"][i], e["probs"][i], f"{w}.probs[{i}]")
            continue
        report.vec("mu", pick(g["mu"]), pick(e["mu"]), w + ".mu")
        report.vec("sigma", pick(g["sigma"]), pick(e["sigma"]), w + ".sigma")
        report.num("bounds", g["low"], e["low"], w + ".low")
        report.num("bounds", g["high"], e["high"], w + ".high")


def tie_groups_agree(report: Report, got: dict, numpy_order: dict, where: str) -> bool:
    """tune against Optuna as it is, for an estimator with equal observations: the same kernels
    but for the order in which equal observations take their bandwidths. Optuna's bandwidth rule
    sorts with numpy's default argsort, which is not stable, so equal observations get the gaps
    to their left and right neighbours in an order numpy chooses; tune gives them by trial
    number (docs/tpe.md#numerical-kernels-and-bandwidth). Checks that, per value, the multiset
    of bandwidths is the same; returns whether the per-kernel order differs."""
    differs = False
    for name, e in numpy_order["dims"].items():
        g = got["dims"][name]
        if e["kind"] == "categorical":
            continue
        report.vec("mu", g["mu"], e["mu"], f"{where}.{name}.mu")
        groups: dict = {}
        for i, mu in enumerate(e["mu"][:-1]):
            groups.setdefault(mu, []).append(i)
        for mu, idx in groups.items():
            gs = sorted(float(diff_common.decode(g["sigma"][i])) for i in idx)
            es = sorted(float(diff_common.decode(e["sigma"][i])) for i in idx)
            report.vec("sigma", gs, es, f"{where}.{name}.ties@{mu}")
        differs = differs or g["sigma"] != e["sigma"]
    return differs


def compare_case(case: Case, exp: dict, got: dict, report: Report) -> None:
    if got["id"] != case.id:
        report.fail(case.id, f"driver answered for {got['id']}")
        return
    if "relative_space" in exp:
        if got.get("relative_space") != exp["relative_space"]:
            report.fail(case.id, f"relative search space: tune {got.get('relative_space')} vs "
                        f"Optuna {exp['relative_space']}")
    if "groups" in exp:
        if sorted(got.get("groups", [])) != exp["groups"]:
            report.fail(case.id, f"groups: tune {got.get('groups')} vs Optuna {exp['groups']}")
    if len(got["queries"]) != len(exp["queries"]):
        report.fail(case.id, f"{len(got['queries'])} vs {len(exp['queries'])} queries")
        return
    for q, g, e in zip(case.queries, got["queries"], exp["queries"]):
        where = f"{case.id}/{'+'.join(q['names'])}"
        report.counts["queries"] += 1
        report.counts["joint"] += len(q["names"]) > 1
        report.counts["splits"] += 1
        if g["below"] != e["below"] or g["above"] != e["above"]:
            report.fail(where, f"split: tune below {g['below']} above {g['above']}; Optuna "
                        f"below {e['below']} above {e['above']}")
            continue
        compare_estimator(report, g["l"], e["l"], where + ".l")
        compare_estimator(report, g["g"], e["g"], where + ".g")
        if "numpy_order" in e:
            report.counts["tie_queries"] += 1
            differs = False
            for est in ("l", "g"):
                differs |= tie_groups_agree(report, g[est], e["numpy_order"][est],
                                            f"{where}.{est}(numpy order)")
            report.counts["tie_order_differs"] += differs
        report.vec("log l", g["log_l"], e["log_l"], where + ".log_l", 1.0)
        report.vec("log g", g["log_g"], e["log_g"], where + ".log_g", 1.0)
        report.counts["points"] += len(e["log_l"])
        for i, (gl, gg, el, eg) in enumerate(zip(g["log_l"], g["log_g"], e["log_l"],
                                                 e["log_g"])):
            gl, gg, el, eg = (float(diff_common.decode(v)) for v in (gl, gg, el, eg))
            with_inf = math.isinf(gl) or math.isinf(gg) or math.isinf(el) or math.isinf(eg)
            if with_inf:
                continue  # compared above term by term
            floor = max(1.0, abs(el), abs(eg))
            report.num("log l - log g", gl - gg, el - eg, f"{where}.score[{i}]", floor)


if __name__ == "__main__":
    sys.exit(main())
