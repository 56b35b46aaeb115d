#!/usr/bin/python3
"""Hypervolume: tune against Optuna 4.9's compute_hypervolume on the same points (README.md here).

Random point sets in 2 to 5 objectives (uniform, on a simplex-like front, with duplicates, with
dominated points, integers with ties, single points), each against a reference point above all
of them, plus points that do not dominate the reference (both sides must refuse them) and an
infinite reference coordinate. Every hypervolume must agree within 1e-12 relative. Exit 0 if all
agree, 1 otherwise, 77 (skipped) without the vendored Optuna.
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

CASES_PER_SHAPE = 40


def points_of(rng: random.Random, shape: str, d: int) -> list:
    n = rng.choice([1, 2, 3, 4, 7, 12, 25, 40]) if d < 5 else rng.choice([1, 2, 3, 5, 9, 14])
    if shape == "uniform":
        return [[rng.random() for _ in range(d)] for _ in range(n)]
    if shape == "front":  # on a concave front: few dominated points, the WFG worst case
        out = []
        for _ in range(n):
            v = [rng.random() + 1e-3 for _ in range(d)]
            norm = math.sqrt(sum(x * x for x in v))
            out.append([x / norm for x in v])
        return out
    if shape == "duplicates":
        base = [[rng.random() for _ in range(d)] for _ in range(max(1, n // 3))]
        return [list(rng.choice(base)) for _ in range(n)]
    if shape == "integers":  # ties in every coordinate
        return [[float(rng.randint(0, 4)) for _ in range(d)] for _ in range(n)]
    raise ValueError(shape)


def main() -> int:
    args = diff_common.parse_args(__doc__.splitlines()[0])
    diff_common.import_optuna(args.optuna, "optuna49_hypervolume_diff")
    import numpy as np
    from optuna._hypervolume import compute_hypervolume

    rng = random.Random(args.seed)
    cases = []
    for d in (2, 3, 4, 5):
        for shape in ("uniform", "front", "duplicates", "integers"):
            for _ in range(CASES_PER_SHAPE):
                pts = points_of(rng, shape, d)
                ref = [max(p[k] for p in pts) + rng.choice([0.0, 0.1, 1.0]) for k in range(d)]
                cases.append({"id": len(cases), "points": pts, "reference": ref})
        bad = points_of(rng, "uniform", d)
        cases.append({"id": len(cases), "points": bad, "reference": [-1.0] * d})
        cases.append({"id": len(cases), "points": points_of(rng, "uniform", d),
                      "reference": [math.inf] + [2.0] * (d - 1)})
    start = time.monotonic()
    expected = []
    for c in cases:
        try:
            expected.append(float(compute_hypervolume(np.array(c["points"]),
                                                      np.array(c["reference"]))))
        except ValueError:
            expected.append(None)
    optuna_s = time.monotonic() - start
    results, driver_s = diff_common.run_driver(args.driver, "hypervolume", cases)
    failures = []
    for c, exp, got in zip(cases, expected, results):
        if exp is None:
            if "error" not in got:
                failures.append(f"case {c['id']}: Optuna refused the points, tune gave {got}")
            continue
        if "error" in got:
            failures.append(f"case {c['id']}: tune refused ({got['error']}), Optuna {exp}")
            continue
        diff = diff_common.rel_diff(got["hv"], exp)
        if diff > 1e-12:
            failures.append(f"case {c['id']} ({len(c['reference'])}-d, {len(c['points'])} points):"
                            f" tune {got['hv']} vs Optuna {exp} (relative {diff:.2e})")
    print(f"hypervolume: {len(cases)} cases in 2-5 objectives (Optuna {optuna_s:.2f} s, tune "
          f"{driver_s:.2f} s): {len(cases) - len(failures)} agree within 1e-12")
    for f in failures[:20]:
        print("  MISMATCH " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
