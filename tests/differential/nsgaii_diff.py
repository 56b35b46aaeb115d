#!/usr/bin/python3
"""NSGA-II: tune's NsgaIISampler against Optuna 4.9's or 5.0's NSGAIISampler (README.md here).

Both sides get the same random draws: Optuna's child-generation RandomState is replaced by a
stream of uniform numbers that tune's driver reads in the same way (rand: the next number;
choice(n): floor(u n); normal: Box-Muller of the next two), so every draw must be taken in the
same order for the proposals to agree. Cases:

- elite: NSGAIIElitePopulationSelectionStrategy on random populations (1-4 objectives, ties,
  infinite values, constraints satisfied, violated or missing): the elite in Optuna's order, or
  the same refusal (NaN constraint, different numbers of constraints);
- crossover: each crossover (uniform, BLX-alpha, SBX, VSBX, SPX, UNDX; default and random
  options) on random parents in the transformed space: the child and the draws taken;
- sample: studies Optuna's NSGAIISampler ran (random populations, crossovers, constraints, FAIL,
  PRUNED and RUNNING trials, a conditional parameter, mixed distributions), then one more trial
  asked; sometimes parent caches removed or the trial's generation preset. Compared: the
  trial's generation, the parent lists written to the study system attributes (ids, in order),
  the relative search space, the relative params (after crossover and mutation) and the draws.

With --optuna-version 5.0 the cases follow Optuna 5.0's rules: the sampler has no
constraints_func (deprecated in 5.0); constraints are trial system attributes, "constraints:<name>"
(Trial.set_constraint) and the old list "constraints", some trials having none (feasible), and
the sampler is constrained whenever a trial of the population has constraints (tune's option
"constraints": "auto"); different numbers of constraints are no longer refused, a NaN still is.
5.0's PolynomialMutation (the `mutation` argument) is not in tune: mutation stays None
(resampling, as in 4.9). With 4.9 (the default), constraints_func and "constraints": true.

Integers must be equal and floats agree within 1e-12 relative. Exit 0 if all agree, 1
otherwise, 77 (skipped) without the vendored Optuna.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time
import types

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diff_common  # noqa: E402

TOLERANCE = 1e-12
N_ELITE = 300
N_CROSSOVER = 300
N_SAMPLE = 120
GEN_KEY = "NSGAIISampler:generation"
PARENT_PREFIX = "NSGAIISampler:parent:"
CROSSOVERS = ("uniform", "blxalpha", "sbx", "vsbx", "spx", "undx")
V50 = False  # --optuna-version 5.0


class Exhausted(Exception):
    pass


class StreamRng:
    """numpy RandomState's rand/choice/normal over a fixed list of uniform numbers."""

    def __init__(self, draws):
        self.draws = draws
        self.used = 0

    def _next(self):
        if self.used >= len(self.draws):
            raise Exhausted()
        self.used += 1
        return self.draws[self.used - 1]

    def rand(self, *size):
        import numpy as np
        if not size:
            return self._next()
        return np.array([self._next() for _ in range(size[0])])

    def choice(self, n):
        return int(math.floor(self._next() * n))

    def normal(self, loc=0.0, scale=1.0, size=None):
        import numpy as np

        def one():
            u1, u2 = self._next(), self._next()
            return loc + scale * (math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2))
        if size is None:
            return one()
        return np.array([one() for _ in range(size)])


def draws_of(rng: random.Random, n: int = 4000) -> list:
    return [rng.random() for _ in range(n)]


def crossover_of(optuna, spec: dict):
    from optuna.samplers import nsgaii
    kind, kw = spec["name"], {k: v for k, v in spec.items() if k != "name"}
    return {"uniform": lambda: nsgaii.UniformCrossover(**kw),
            "blxalpha": lambda: nsgaii.BLXAlphaCrossover(**kw),
            "sbx": lambda: nsgaii.SBXCrossover(**kw),
            "vsbx": lambda: nsgaii.VSBXCrossover(**kw),
            "spx": lambda: nsgaii.SPXCrossover(**kw),
            "undx": lambda: nsgaii.UNDXCrossover(**kw)}[kind]()


def random_crossover(rng: random.Random, kind: str | None = None) -> dict:
    kind = kind or rng.choice(CROSSOVERS)
    spec = {"name": kind}
    if rng.random() < 0.5:
        return spec
    if kind == "blxalpha":
        spec["alpha"] = rng.choice([0.0, 0.2, 1.0])
    elif kind in ("sbx", "vsbx"):
        spec["eta"] = rng.choice([None, 0.5, 5.0, 30.0])
        spec["uniform_crossover_prob"] = rng.choice([0.0, 0.3, 1.0])
        spec["use_child_gene_prob"] = rng.choice([0.2, 1.0])
    elif kind == "spx":
        spec["epsilon"] = rng.choice([None, 0.5, 2.0])
    elif kind == "undx":
        spec["sigma_xi"] = rng.choice([0.3, 1.0])
        spec["sigma_eta"] = rng.choice([None, 0.1, 0.7])
    return spec


# ---------------------------------------------------------------------------------------------
# elite


def elite_case(rng: random.Random, case_id: int) -> dict:
    d = rng.randint(1, 4)
    n = rng.randint(1, 40)
    pop = rng.randint(2, 30)
    ints = rng.random() < 0.4
    values = []
    for _ in range(n):
        v = [float(rng.randint(-2, 3)) if ints else rng.gauss(0, 1) for _ in range(d)]
        if rng.random() < 0.05:
            v[rng.randrange(d)] = rng.choice([math.inf, -math.inf])
        values.append(v)
    if V50:
        constraints = constraints_50(rng, n)
        return dict(id=case_id, op="elite", values=values, constraints=constraints,
                    directions=[rng.choice(["MINIMIZE", "MAXIMIZE"]) for _ in range(d)],
                    population_size=pop, constrained="auto")
    constrained = rng.random() < 0.5
    n_con = rng.randint(1, 3)
    constraints = []
    for _ in range(n):
        r = rng.random()
        if not constrained or r < 0.1:
            constraints.append(None)
        else:
            constraints.append([rng.choice([-1.0, 0.0, 0.5, rng.uniform(-1, 2)])
                                for _ in range(n_con)])
    if constrained and rng.random() < 0.05:  # refused by both
        i = rng.randrange(n)
        constraints[i] = [math.nan] * n_con if rng.random() < 0.5 else [0.0] * (n_con + 1)
    return dict(id=case_id, op="elite", values=values, constraints=constraints,
                directions=[rng.choice(["MINIMIZE", "MAXIMIZE"]) for _ in range(d)],
                population_size=pop, constrained=constrained)


def constraints_50(rng: random.Random, n: int) -> list:
    """Per trial None (no constraints) or the system attributes Optuna 5.0 reads them from."""
    constrained = rng.random() < 0.6
    style = rng.choice(["named", "list", "both"])
    n_con = rng.randint(1, 3)
    names = rng.sample(["a", "b", "mem", "time", "0", "1"], 4)  # "0", "1": the list's names too
    missing = rng.choice([0.0, 0.1, 0.5, 0.9])

    def value():
        if rng.random() < 0.03:
            return rng.choice([math.inf, -math.inf])
        return rng.choice([-1.0, 0.0, 0.5, rng.uniform(-1, 2)])

    out = []
    for _ in range(n):
        if not constrained or rng.random() < missing:
            out.append(None)
            continue
        count = n_con if rng.random() < 0.9 else rng.randint(1, 3)  # other counts: fine in 5.0
        attrs = {}
        if style in ("list", "both"):
            attrs["constraints"] = [value() for _ in range(count)]
        if style in ("named", "both"):
            for name in rng.sample(names, count):  # in a random order
                attrs["constraints:" + name] = value()
        out.append(attrs)
    if constrained and rng.random() < 0.05:  # a NaN value: refused by both
        i = rng.randrange(n)
        out[i] = dict(out[i] or {})
        if "constraints" in out[i] and rng.random() < 0.5:
            out[i]["constraints"] = [math.nan] + out[i]["constraints"][1:]
        else:
            out[i]["constraints:" + rng.choice(names)] = math.nan
    return out


def elite_optuna(optuna, c: dict) -> dict:
    from optuna.samplers.nsgaii._elite_population_selection_strategy import (
        NSGAIIElitePopulationSelectionStrategy)
    from optuna.study import StudyDirection
    from optuna.trial import create_trial
    trials = []
    for i, (v, con) in enumerate(zip(c["values"], c["constraints"])):
        if V50:
            attrs = dict(con or {})
        else:
            attrs = {} if con is None else {"constraints": con}
        t = create_trial(values=v, system_attrs=attrs)
        t.number = i
        trials.append(t)
    study = types.SimpleNamespace(directions=[StudyDirection[x] for x in c["directions"]])
    strategy = NSGAIIElitePopulationSelectionStrategy(
        population_size=c["population_size"],
        constraints_func=(lambda t: [0.0]) if c["constrained"] is True else None)
    try:
        return {"elite": [t.number for t in strategy(study, list(trials))]}
    except ValueError:
        return {"error": True}


# ---------------------------------------------------------------------------------------------
# crossover


def crossover_case(rng: random.Random, case_id: int) -> dict:
    spec = random_crossover(rng)
    if spec["name"] == "uniform" and rng.random() < 0.5:
        spec["swapping_prob"] = rng.choice([0.0, 0.2, 1.0])
    n_parents = 3 if spec["name"] in ("spx", "undx") else 2
    n = rng.randint(1, 6)
    bounds = []
    for _ in range(n):
        lo = rng.uniform(-5, 5)
        bounds.append([lo, lo + rng.choice([1e-3, 1.0, 10.0])])
    parents = [[rng.uniform(lo, hi) for lo, hi in bounds] for _ in range(n_parents)]
    if rng.random() < 0.1:  # equal parents
        parents = [list(parents[0]) for _ in range(n_parents)]
    return dict(id=case_id, op="crossover", crossover=spec, parents=parents, bounds=bounds,
                multi_objective=rng.random() < 0.5, draws=draws_of(rng, 200))


def crossover_optuna(optuna, c: dict) -> dict:
    import numpy as np
    cross = crossover_of(optuna, c["crossover"])
    study = types.SimpleNamespace(_is_multi_objective=lambda: c["multi_objective"])
    stream = StreamRng(c["draws"])
    child = cross.crossover(np.array(c["parents"], dtype=float), stream, study,
                            np.array(c["bounds"], dtype=float))
    return {"child": [float(x) for x in child], "used": stream.used}


# ---------------------------------------------------------------------------------------------
# sample


def suggest_all(trial, space_kind: str, rng: random.Random) -> None:
    trial.suggest_float("x", -3.0, 3.0)
    if space_kind == "float":
        trial.suggest_float("y", 0.0, 1.0)
        return
    trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    trial.suggest_float("drop", 0.0, 0.5, step=0.1)
    trial.suggest_int("layers", 1, 8)
    trial.suggest_int("width", 16, 1024, log=True)
    trial.suggest_int("batch", 8, 64, step=8)
    trial.suggest_categorical("opt", ["adam", "sgd", 3, None])
    if space_kind == "conditional" and trial.params["layers"] > 4:
        trial.suggest_float("deep", 0.0, 1.0)  # not in every trial: outside the intersection
    trial.suggest_float("fixed", 1.0, 1.0)  # single: never relative


def objective_values(trial, n_obj: int) -> list:
    p = trial.params
    base = [p["x"] ** 2, (p["x"] - 2) ** 2, abs(p["x"]) + 1]
    extra = p.get("y", p.get("lr", 0.0) * 10 + p.get("layers", 0) * 0.1)
    return [base[k] + extra * (k + 1) for k in range(n_obj)]


def sample_case(optuna, rng: random.Random, case_id: int) -> dict:
    from optuna.samplers import NSGAIISampler
    from optuna.trial import TrialState
    n_obj = rng.choice([1, 2, 2, 3])
    directions = [rng.choice(["minimize", "maximize"]) for _ in range(n_obj)]
    spec = random_crossover(rng)
    n_parents = 3 if spec["name"] in ("spx", "undx") else 2
    pop = rng.choice([n_parents, 3, 4, 6, 10])
    pop = max(pop, n_parents)
    constrained = rng.random() < (0.6 if V50 else 0.3)
    options = dict(population_size=pop, crossover=spec,
                   crossover_prob=rng.choice([0.9, 0.9, 0.5, 1.0, 0.0]),
                   swapping_prob=rng.choice([0.5, 0.5, 0.2]),
                   mutation_prob=rng.choice([None, None, 0.0, 0.3]),
                   constraints="auto" if V50 else constrained)
    con_func = (lambda t: [t.params["x"] - 1.0, -t.params["x"] - 2.5]) if constrained else None
    writer = None
    if V50:  # constraints written by the trials (set_constraint, the old list), not the sampler
        writer = constraint_writer_50(rng) if constrained else None
        con_func = None
    # tune's "uniform" is Optuna's default crossover: UniformCrossover(swapping_prob).
    crossover = None if spec["name"] == "uniform" else crossover_of(optuna, spec)
    sampler = NSGAIISampler(population_size=pop, crossover=crossover,
                            crossover_prob=options["crossover_prob"],
                            swapping_prob=options["swapping_prob"],
                            mutation_prob=options["mutation_prob"], seed=rng.randrange(10**6),
                            constraints_func=con_func)
    study = optuna.create_study(directions=directions, sampler=sampler)
    space_kind = rng.choice(["float", "mixed", "conditional"])
    for _ in range(rng.randint(0, pop * 6)):
        trial = study.ask()
        suggest_all(trial, space_kind, rng)
        if writer:
            writer(study, trial)
        r = rng.random()
        if r < 0.05:
            continue  # left RUNNING
        if r < 0.1:
            study.tell(trial, state=TrialState.FAIL)
        elif r < 0.15:
            study.tell(trial, state=TrialState.PRUNED)
        else:
            study.tell(trial, objective_values(trial, n_obj))
    attrs = study._storage.get_study_system_attrs(study._study_id)
    for key in [k for k in attrs if k.startswith(PARENT_PREFIX)]:
        if rng.random() < 0.2:
            del attrs[key]  # selected again by both
    asked = study.ask()
    gens = [t.system_attrs.get(GEN_KEY, 0) for t in study.trials]
    if rng.random() < 0.1:  # an earlier generation (a generation beyond the next has no parents)
        study._storage.set_trial_system_attr(asked._trial_id, GEN_KEY, rng.randint(0, max(gens)))
    study_attrs_before = dict(study._storage.get_study_system_attrs(study._study_id))
    trials = [trial_json(optuna, t) for t in study._storage.get_all_trials(study._study_id)]
    draws = draws_of(rng)
    frozen = study._storage.get_trial(asked._trial_id)
    stream = StreamRng(draws)
    sampler._child_generation_strategy._rng = types.SimpleNamespace(rng=stream)
    space = sampler.infer_relative_search_space(study, frozen)
    try:
        params = sampler.sample_relative(study, frozen, space)
        result = {"params": {k: float(space[k].to_internal_repr(v)) for k, v in params.items()}}
    except Exhausted:
        result = {"exhausted": True}
    after = study._storage.get_trial(asked._trial_id).system_attrs
    written = {k: v for k, v in study._storage.get_study_system_attrs(study._study_id).items()
               if k not in study_attrs_before}
    result.update(generation=after.get(GEN_KEY), written=written, space=sorted(space),
                  used=stream.used)
    case = dict(id=case_id, op="sample", directions=[d.upper() for d in directions],
                options=options, trials=trials, asked=frozen.number,
                study_system_attrs=study_attrs_before, draws=draws)
    return case, result


def constraint_writer_50(rng: random.Random):
    """What writes a trial's constraints under Optuna 5.0: Trial.set_constraint ("constraints:
    <name>"), the old list "constraints" (as 4.9's constraints_func left it), or both; some
    trials get none (feasible)."""
    style = rng.choice(["named", "named", "list", "both"])
    missing = rng.choice([0.0, 0.2, 0.7])
    extra = rng.random() < 0.5  # a third constraint, of random value, in some trials

    def write(study, trial):
        if rng.random() < missing:
            return
        x = trial.params["x"]
        if style in ("list", "both"):
            study._storage.set_trial_system_attr(trial._trial_id, "constraints",
                                                 [x - 1.0, -x - 2.5])
        if style in ("named", "both"):
            named = [("hi", x - 1.0), ("lo", -x - 2.5)]
            if style == "both" and rng.random() < 0.3:
                named.append(("0", x - 0.5))  # overrides the list's first entry
            if extra and rng.random() < 0.5:
                named.append(("rand", rng.choice([0.0, 0.3, rng.uniform(-1, 1)])))
            rng.shuffle(named)
            for name, v in named:
                trial.set_constraint(name, v)
    return write


def trial_json(optuna, t) -> dict:
    from optuna.distributions import distribution_to_json
    return dict(number=t.number, trial_id=t._trial_id, state=t.state.name,
                values=list(t.values) if t.values is not None else [],
                params={k: t.distributions[k].to_internal_repr(v) for k, v in t.params.items()},
                distributions={k: distribution_to_json(d) for k, d in t.distributions.items()},
                system_attrs=t.system_attrs)


# ---------------------------------------------------------------------------------------------


def compare(case: dict, ours: dict, theirs: dict) -> tuple[bool, float, str]:
    """(agree, largest relative float difference, what differed)."""
    worst = 0.0

    def floats(a, b, what):
        nonlocal worst
        if len(a) != len(b):
            return f"{what}: lengths {len(a)} vs {len(b)}"
        for x, y in zip(a, b):
            d = diff_common.rel_diff(x, y)
            worst = max(worst, d)
            if d > TOLERANCE:
                return f"{what}: {x} vs {y}"
        return ""

    op = case["op"]
    if op == "elite":
        if ours != theirs:
            return False, worst, f"elite: tune {ours} vs Optuna {theirs}"
        return True, worst, ""
    if op == "crossover":
        if ours["used"] != theirs["used"]:
            return False, worst, f"draws used: tune {ours['used']} vs Optuna {theirs['used']}"
        why = floats(ours["child"], theirs["child"], "child")
        return not why, worst, why
    for key in ("generation", "written", "space", "used"):
        if ours.get(key) != theirs.get(key):
            return False, worst, f"{key}: tune {ours.get(key)} vs Optuna {theirs.get(key)}"
    if ("exhausted" in ours) != ("exhausted" in theirs):
        return False, worst, "one side ran out of draws"
    op_, tp = ours.get("params", {}), theirs.get("params", {})
    if sorted(op_) != sorted(tp):
        return False, worst, f"relative params: tune {sorted(op_)} vs Optuna {sorted(tp)}"
    why = floats([op_[k] for k in sorted(op_)], [tp[k] for k in sorted(tp)], "params")
    return not why, worst, why


def main() -> int:
    args = diff_common.parse_args(__doc__.splitlines()[0])
    global V50
    V50 = args.optuna_version == "5.0"
    name = "optuna50_nsgaii_diff" if V50 else "optuna49_nsgaii_diff"
    optuna = diff_common.import_optuna(args.optuna, name, args.optuna_version)
    rng = random.Random(args.seed)
    start = time.monotonic()
    cases, expected = [], []
    for _ in range(N_ELITE):
        c = elite_case(rng, len(cases))
        cases.append(c)
        expected.append(elite_optuna(optuna, c))
    for _ in range(N_CROSSOVER):
        c = crossover_case(rng, len(cases))
        cases.append(c)
        expected.append(crossover_optuna(optuna, c))
    for _ in range(N_SAMPLE):
        c, e = sample_case(optuna, rng, len(cases))
        cases.append(c)
        expected.append(e)
    optuna_s = time.monotonic() - start
    results, tune_s = diff_common.run_driver(args.driver, "nsgaii", cases)
    by_id = {r["id"]: r for r in results}
    failures, worst = 0, 0.0
    counts = {"elite": 0, "crossover": 0, "sample": 0}
    stats = {"crossover_children": 0, "sample_generations": 0, "sample_selections": 0,
             "sample_params": 0, "refusals": 0}
    for c, e in zip(cases, expected):
        ours = {k: v for k, v in by_id[c["id"]].items() if k != "id"}
        ok, w, why = compare(c, ours, e)
        worst = max(worst, w)
        counts[c["op"]] += 1
        if c["op"] == "elite" and "error" in e:
            stats["refusals"] += 1
        if c["op"] == "sample":
            stats["sample_generations"] += e["generation"] is not None
            stats["sample_selections"] += len(e["written"])
            stats["sample_params"] += len(e.get("params", {}))
        if not ok:
            failures += 1
            if failures <= 10 or args.verbose:
                print(f"MISMATCH case {c['id']} ({c['op']}): {why}")
    if args.dump:
        import json
        with open(args.dump, "w") as f:
            json.dump(diff_common.encode({"cases": cases, "optuna": expected,
                                          "tune": results}), f)
    print(f"nsgaii vs Optuna {diff_common.OPTUNA_VERSION}: {len(cases)} cases "
          f"({counts['elite']} elite selections, "
          f"{stats['refusals']} refused by both; {counts['crossover']} crossovers; "
          f"{counts['sample']} proposals with {stats['sample_selections']} parent selections "
          f"and {stats['sample_params']} relative params), {failures} mismatches, "
          f"max rel diff {worst:.3g} (tolerance {TOLERANCE:g}); Optuna {optuna_s:.1f}s, "
          f"tune {tune_s:.2f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
