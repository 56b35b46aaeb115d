#!/usr/bin/python3
"""How the "tuned" TPE preset was chosen (issue 19): runs tune with candidate settings on seeds
disjoint from the published benchmark's (default 1000..1039, the benchmark uses 0..19) and
compares each with tune's "optuna" preset, which the differential tests hold to Optuna 4.9.

For each candidate and each (problem, mode, budget) row it reports whether the candidate's
median is lower than the baseline's, whether it is *worse* by the benchmark's rule (median
above the baseline's third quartile and Mann-Whitney p < 0.05), and A12, the probability that a
run of the candidate ends below a run of the baseline (0.5: no difference). Prints one summary
line per candidate, best first, and writes everything to --out.

    /usr/bin/python3 bench/tpe_preset_search.py --tune-binary build/bench/tune_bench_tpe_quality \\
        --candidates bench/tpe_preset_candidates.json --out build/bench-results/preset_search.json

Only tune runs here (seconds per candidate); Optuna itself is compared in tpe_quality.py.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from format_results import BUDGETS, best_after, mann_whitney_p, quartiles  # noqa: E402
from tpe_quality import PROBLEMS, ROOT, load_catalog, random_point, read_space  # noqa: E402


def a12(a, b):
    """P(a run of `a` ends below a run of `b`), ties counting half."""
    wins = sum((x < y) + 0.5 * (x == y) for x in a for y in b)
    return wins / (len(a) * len(b))


def run(binary, options, label, problems, mode, seeds, first_seed, trials, startup_path):
    out = subprocess.run(["nice", "-n", "10", binary, "--run", "--startup", startup_path,
                          "--functions", ",".join(problems), "--modes", mode, "--seeds",
                          str(seeds), "--first-seed", str(first_seed), "--trials", str(trials),
                          "--sampler", json.dumps(options), "--label", label],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def compare(runs, label, baseline, problems, modes):
    rows = []
    by = {}
    for r in runs:
        by.setdefault((r["tool"], r["mode"], r["function"]), []).append(r)
    for mode in modes:
        for f in problems:
            for k in BUDGETS:
                cand = [best_after(r["values"], k) for r in by[(label, mode, f)]]
                base = [best_after(r["values"], k) for r in by[(baseline, mode, f)]]
                cq, bq = quartiles(cand), quartiles(base)
                p = mann_whitney_p(cand, base)
                rows.append({"mode": mode, "function": f, "budget": k, "median": cq[1],
                             "baseline": bq, "better": cq[1] < bq[1],
                             "worse": cq[1] > bq[2] and p < 0.05,
                             "sig_better": cq[1] < bq[0] and p < 0.05, "p": p,
                             "a12": a12(cand, base)})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune-binary", default="build/bench/tune_bench_tpe_quality")
    ap.add_argument("--candidates", required=True, help="JSON object: label -> tpe options")
    ap.add_argument("--baseline", default="optuna")
    ap.add_argument("--functions", default=",".join(PROBLEMS))
    ap.add_argument("--modes", default="independent,multivariate")
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--first-seed", type=int, default=1000)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    problems, modes = args.functions.split(","), args.modes.split(",")
    with open(args.candidates) as f:
        candidates = json.load(f)
    if args.baseline not in candidates:
        sys.exit(f"the candidates need the baseline '{args.baseline}'")

    catalog = load_catalog(os.path.join(ROOT, "configs", "models.json"))
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    startup = {f: {str(s): [random_point(space, catalog, random.Random(f"startup-{f}-{s}"))
                            for _ in range(10)] for s in seeds}
               for f in problems for space in [read_space(args.tune_binary, f)]}
    startup_path = args.out + ".startup.json"
    with open(startup_path, "w") as f:
        json.dump(startup, f)

    t0 = time.perf_counter()
    work = [(label, options, mode) for label, options in candidates.items() for mode in modes]
    with ThreadPoolExecutor(args.jobs) as pool:
        parts = pool.map(lambda w: run(args.tune_binary, w[1], w[0], problems, w[2], args.seeds,
                                       args.first_seed, args.trials, startup_path), work)
        runs = [r for part in parts for r in part]
    print(f"{len(runs)} runs in {time.perf_counter() - t0:.0f} s", file=sys.stderr)

    summary = []
    for label in candidates:
        if label == args.baseline:
            continue
        rows = compare(runs, label, args.baseline, problems, modes)
        summary.append({"label": label, "options": candidates[label],
                        "better": sum(r["better"] for r in rows),
                        "sig_better": sum(r["sig_better"] for r in rows),
                        "worse": [f"{r['function']}/{r['mode'][:3]}/{r['budget']}"
                                  for r in rows if r["worse"]],
                        "mean_a12": sum(r["a12"] for r in rows) / len(rows),
                        "rows": rows})
    summary.sort(key=lambda s: (len(s["worse"]), -s["mean_a12"]))
    n_rows = len(problems) * len(modes) * len(BUDGETS)
    for s in summary:
        print(f"{s['label']:<28} better {s['better']:>2}/{n_rows} (significant {s['sig_better']:>2})"
              f"  A12 {s['mean_a12']:.3f}  worse {len(s['worse'])}: {' '.join(s['worse'])}")
    with open(args.out, "w") as f:
        json.dump({"settings": vars(args), "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
