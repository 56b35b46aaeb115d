#!/usr/bin/python3
"""Multi-objective building blocks: tune against Optuna 4.9 or 5.0 on the same points (README.md).

Random populations in 2 to 5 objectives (uniform, on a concave front, with duplicates, integers
with ties, a few infinite values) through each function of tune's samplers/multi_objective.h and
its Optuna 4.9 counterpart: non-domination ranks with and without n_below and penalties
(_fast_non_domination_rank), Pareto-front flags (_is_pareto_front), reference points
(_get_reference_point), hypervolume subset selection (_solve_hssp), multi-objective TPE's split
of complete trials (_split_complete_trials_multi_objective) and its below-group weights
(_calculate_weights_below_for_multi_objective), NSGA-II's crowding distances and order
(_calc_crowding_distance, _crowding_distance_sort). Integers must be equal and floats agree
within 1e-12 relative. Exit 0 if all agree, 1 otherwise, 77 (skipped) without the vendored Optuna.

With --optuna-version 5.0 the same cases under Optuna 5.0's rules, where they differ: 5.0 has no
below-group weights function (its MOTPE weighs the below group uniformly, compared with gamma in
optuna50_tpe_diff), so those cases are left out; a penalty is never NaN (a trial without
constraints is feasible, and 5.0's _fast_non_domination_rank has no rank for NaN), so the
penalties' NaN becomes +inf (an infinite violation). The other functions are unchanged in 5.0.
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

CASES_PER_SHAPE = 12
TOLERANCE = 1e-12
# Below-group weights are hypervolume differences over the largest one: rounding in the two
# hypervolume codes (numpy's dot products vs sequential sums) cancels to ~1e-13 of the front's
# hypervolume, so they are compared to an absolute WEIGHT_TOLERANCE (weights lie in [1e-12, 1]).
WEIGHT_TOLERANCE = 1e-9
V50 = False  # --optuna-version 5.0


def points_of(rng: random.Random, shape: str, d: int, n: int) -> list:
    if shape == "uniform":
        return [[rng.random() for _ in range(d)] for _ in range(n)]
    if shape == "front":  # concave: most points mutually non-dominated
        out = []
        for _ in range(n):
            v = [rng.random() + 1e-3 for _ in range(d)]
            norm = math.sqrt(sum(x * x for x in v))
            out.append([x / norm for x in v])
        return out
    if shape == "duplicates":
        base = [[rng.random() for _ in range(d)] for _ in range(max(1, n // 3))]
        return [list(rng.choice(base)) for _ in range(n)]
    if shape == "integers":  # ties in every coordinate, negative and zero values
        return [[float(rng.randint(-2, 3)) for _ in range(d)] for _ in range(n)]
    if shape == "infinite":
        pts = [[rng.gauss(0, 1) for _ in range(d)] for _ in range(n)]
        for p in rng.sample(pts, max(1, n // 8)):
            p[rng.randrange(d)] = rng.choice([math.inf, -math.inf])
        return pts
    raise ValueError(shape)


SHAPES = ("uniform", "front", "duplicates", "integers", "infinite")


def pareto_flags(points: list) -> list:
    import numpy as np
    from optuna.study._multi_objective import _is_pareto_front
    return list(_is_pareto_front(np.array(points, dtype=float), assume_unique_lexsorted=False))


def make_cases(rng: random.Random) -> list:
    cases = []

    def add(op, **kw):
        if V50 and op == "weights":
            return  # no Optuna 5.0 counterpart (uniform weights)
        cases.append(dict(id=len(cases), op=op, **kw))

    for d in (2, 3, 4, 5):
        for shape in SHAPES:
            for _ in range(CASES_PER_SHAPE):
                n = rng.choice([1, 2, 3, 5, 9, 16, 30, 60] if d < 4 else [1, 2, 3, 5, 9, 16, 24])
                pts = points_of(rng, shape, d, n)
                add("front", losses=pts)
                add("reference", losses=pts)
                add("rank", losses=pts, n_below=rng.choice([0, 1, max(1, n // 3), n]))
                penalty = [rng.choice([-1.0, 0.0, 0.5, 2.0, math.inf if V50 else math.nan,
                                       rng.uniform(-1, 1)])
                           for _ in range(n)]
                add("rank", losses=pts, penalty=penalty, n_below=rng.choice([0, 1, n // 2]))
                if n >= 2:
                    add("split", losses=pts, n_below=rng.randint(1, n - 1))
                add("weights", losses=pts, feasible=[rng.random() < 0.85 for _ in range(n)])
                if shape != "infinite":
                    add("crowding", losses=pts)
                    # HSSP selects from one non-domination rank: mutually non-dominated points
                    # (copies allowed); Optuna's 3-d hypervolume assumes that.
                    front = [p for p, on in zip(pts, pareto_flags(pts)) if on]
                    ids = rng.sample(range(1000), len(front))
                    ref = [max(p[k] for p in front) * 1.1 + 0.05 for k in range(d)]
                    add("hssp", losses=front, ids=ids, subset_size=rng.randint(1, len(front)),
                        reference=ref)
    return cases


def run_optuna(c: dict):
    import numpy as np
    from optuna._hypervolume.hssp import _solve_hssp
    from optuna.samplers._tpe import sampler as tpe
    from optuna.samplers.nsgaii import _elite_population_selection_strategy as elite
    from optuna.study import StudyDirection
    from optuna.study._multi_objective import _fast_non_domination_rank, _is_pareto_front
    from optuna.trial import TrialState, create_trial

    losses = np.array(c["losses"], dtype=float)
    op = c["op"]
    if op == "front":
        return {"front": [int(x) for x in _is_pareto_front(losses, assume_unique_lexsorted=False)]}
    if op == "reference":
        return {"reference": tpe._get_reference_point(losses).tolist()}
    if op == "rank":
        penalty = np.array(c["penalty"], dtype=float) if "penalty" in c else None
        ranks = _fast_non_domination_rank(losses, penalty=penalty, n_below=c["n_below"] or None)
        return {"ranks": [int(x) for x in ranks]}
    if op == "hssp":
        sel = _solve_hssp(losses, np.array(c["ids"]), c["subset_size"], np.array(c["reference"]))
        return {"selected": [int(x) for x in sel]}
    directions = [StudyDirection.MINIMIZE] * losses.shape[1]

    class _Study:  # what the two functions read of a study
        def __init__(self):
            self.directions = directions

        def _is_multi_objective(self):
            return True

    trials = [create_trial(state=TrialState.COMPLETE, values=list(map(float, row)), params={},
                           distributions={}) for row in c["losses"]]
    for i, t in enumerate(trials):
        t.number = i
    if op == "split":
        below, _ = tpe._split_complete_trials_multi_objective(trials, _Study(), c["n_below"])
        return {"below": [t.number for t in below]}
    if op == "weights":
        feasible = c["feasible"]
        w = tpe._calculate_weights_below_for_multi_objective(
            _Study(), trials, lambda t: [0.0] if feasible[t.number] else [1.0])
        return {"weights": [float(x) for x in w]}
    if op == "crowding":
        pop = list(trials)
        dist = elite._calc_crowding_distance(list(pop))
        elite._crowding_distance_sort(pop)
        return {"distances": [float(dist[t.number]) for t in trials],
                "order": [t.number for t in pop]}
    raise ValueError(op)


DEGENERATE: list = []
TIES: list = []


def equal_hypervolume(c: dict, a: list, b: list) -> bool:
    """Whether two greedy selections have the same hypervolume: at an exact tie between two
    contributions (integer coordinates), rounding in the two hypervolume codes picks the one."""
    import numpy as np
    from optuna._hypervolume import compute_hypervolume
    losses = np.array(c["losses"], dtype=float)
    if not np.isfinite(losses).all():
        return False
    pos = {v: i for i, v in enumerate(c.get("ids", range(len(losses))))}
    ref = losses.max(axis=0) + 1.0
    hv_a = compute_hypervolume(losses[[pos[v] for v in a]], ref)
    hv_b = compute_hypervolume(losses[[pos[v] for v in b]], ref)
    return diff_common.rel_diff(hv_a, hv_b) <= 1e-9
MAX_WEIGHT_DIFF = [0.0]


def compare(c: dict, exp: dict, got: dict) -> str | None:
    for key, e in exp.items():
        g = diff_common.decode(got.get(key))
        if key in ("selected", "below"):  # sets (Optuna's HSSP returns selection order)
            e, g = sorted(e), sorted(g or [])
            if e != g and equal_hypervolume(c, e, g):
                TIES.append(c["id"])
                continue
        if key == "weights" and all(w == 1e-12 for w in g) and max(e) < 1e-3:
            # Degenerate: every contribution is exactly 0 (e.g. copies of each front point), so
            # each weight is the floor; Optuna's are rounding noise over its 1e-12 floor.
            DEGENERATE.append(c["id"])
            continue
        if key == "weights":
            worst = max((abs(float(diff_common.decode(a)) - b) for a, b in zip(g, e)), default=0)
            MAX_WEIGHT_DIFF[0] = max(MAX_WEIGHT_DIFF[0], worst)
            if len(e) != len(g) or worst > WEIGHT_TOLERANCE:
                return f"{key}: tune {g} vs Optuna {e}"
        elif key in ("reference", "distances"):
            if len(e) != len(g) or any(diff_common.rel_diff(a, b) > TOLERANCE
                                       for a, b in zip(g, e)):
                return f"{key}: tune {g} vs Optuna {e}"
        elif e != g:
            return f"{key}: tune {g} vs Optuna {e}"
    return None


def main() -> int:
    args = diff_common.parse_args(__doc__.splitlines()[0])
    global V50
    V50 = args.optuna_version == "5.0"
    name = "optuna50_multi_objective_diff" if V50 else "optuna49_multi_objective_diff"
    diff_common.import_optuna(args.optuna, name, args.optuna_version)
    rng = random.Random(args.seed)
    cases = make_cases(rng)
    start = time.monotonic()
    expected = [run_optuna(c) for c in cases]
    optuna_s = time.monotonic() - start
    results, driver_s = diff_common.run_driver(args.driver, "multi_objective",
                                               [diff_common.encode(c) for c in cases])
    failures, by_op = [], {}
    for c, exp, got in zip(cases, expected, results):
        by_op[c["op"]] = by_op.get(c["op"], 0) + 1
        why = compare(c, exp, got)
        if why:
            failures.append(f"case {c['id']} {c['op']} ({len(c['losses'])} points, "
                            f"{len(c['losses'][0])}-d): {why}")
    ops = ", ".join(f"{op} {n}" for op, n in sorted(by_op.items()))
    weights = "" if V50 else (
        f"; weights within {WEIGHT_TOLERANCE}, largest difference {MAX_WEIGHT_DIFF[0]:.1e}; "
        f"{len(DEGENERATE)} weight cases with all contributions 0")
    print(f"multi_objective vs Optuna {diff_common.OPTUNA_VERSION}: {len(cases)} cases ({ops}; "
          f"Optuna {optuna_s:.2f} s, tune {driver_s:.2f} s): {len(cases) - len(failures)} agree "
          f"(floats within {TOLERANCE} relative{weights}; {len(TIES)} selections that differ at "
          f"an exact tie, with equal hypervolumes)")
    for f in failures[:20]:
        print("  MISMATCH " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
