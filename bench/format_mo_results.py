#!/usr/bin/python3
"""Writes the multi-objective benchmark (bench/mo_quality.py's JSON files) into the
<!-- mo:begin --> ... <!-- mo:end --> section of docs/benchmarks.md: per problem, sampler and
trial count, the hypervolume quartiles of tune and Optuna 4.9 over the seeds with the issue's
verdict (tune **worse** = its median below Optuna's first quartile with a two-sided
Mann-Whitney p < 0.05), the trials that ran out of memory, and the time per trial at the end of
long runs. The files are merged into one table: a file with fewer seeds than the others (a speed
run) gives only its speed rows; tune runs with sampler options (a variant) get rows of their own,
compared with Optuna's runs of the plain sampler."""

import argparse
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import format_results  # noqa: E402

BEGIN, END = "<!-- mo:begin -->", "<!-- mo:end -->"
SAMPLER = {"tpe": "MOTPE", "nsgaii": "NSGA-II"}


def verdict(tune, optuna):
    tq, oq = format_results.quartiles(tune), format_results.quartiles(optuna)
    p = format_results.mann_whitney_p(tune, optuna)
    if tq[1] < oq[0] and p < 0.05:
        return "**worse**", p
    if tq[1] > oq[2] and p < 0.05:
        return "*better*", p
    return ("higher" if tq[1] > oq[1] else "lower" if tq[1] < oq[1] else "equal"), p


def fmt_q(q):
    return f"{q[1]:.4g} ({q[0]:.4g}–{q[2]:.4g})"


PROBLEM_ORDER = ["zdt1", "zdt2", "zdt3", "dtlz2", "wfg4", "mixed_memory"]


def label(run):
    """The sampler's name in the tables, with a tune variant's options."""
    name = SAMPLER.get(run["sampler"], run["sampler"])
    options = run.get("options")
    if not options:
        return name
    return name + " (" + ", ".join(f"{k} {json.dumps(v)}" for k, v in options.items()) + ")"


def by_checkpoint(runs, value):
    """(problem, sampler, label, trials, tool) -> [value(run, trials) over the seeds]."""
    by = {}
    for r in runs:
        tool = "tune" if r["tool"] == "tune" else "optuna"
        for k in r["hv"]:
            key = (r["problem"], r["sampler"], label(r), int(k), tool)
            by.setdefault(key, []).append(value(r, k))
    return by


def ordered(keys):
    return sorted(keys, key=lambda x: (x[1], PROBLEM_ORDER.index(x[0])
                                       if x[0] in PROBLEM_ORDER else 99, x[2], x[3]))


def quality_rows(runs):
    by = by_checkpoint(runs, lambda r, k: r["hv"][k])
    rows, worse = [], 0
    keys = ordered({(p, s, lab, k) for (p, s, lab, k, tool) in by if tool == "tune"})
    for problem, sampler, lab, k in keys:
        t = by[(problem, sampler, lab, k, "tune")]
        o = by.get((problem, sampler, SAMPLER.get(sampler, sampler), k, "optuna"))
        if not o:
            continue
        v, p = verdict(t, o)
        worse += v == "**worse**"
        rows.append(f"| {lab} | {problem} | {k} | "
                    f"{fmt_q(format_results.quartiles(t))} | {fmt_q(format_results.quartiles(o))} "
                    f"| {format_results.fmt_p(p)} | {v} |")
    return rows, worse, len(rows)


def oom_rows(runs):
    """Median trials that ran out of memory per run (problems with any), tune and Optuna."""
    by = by_checkpoint(runs, lambda r, k: sum(v is None for v in r["values"][:int(k)]))
    rows = []
    for problem, sampler, lab, k in ordered({(p, s, lab, k) for (p, s, lab, k, tool) in by
                                             if tool == "tune"}):
        t = by[(problem, sampler, lab, k, "tune")]
        o = by.get((problem, sampler, SAMPLER.get(sampler, sampler), k, "optuna"))
        if not o or (max(t) == 0 and max(o) == 0):
            continue
        rows.append(f"| {lab} | {problem} | {k} | {format_results.quartiles(t)[1]:g} | "
                    f"{format_results.quartiles(o)[1]:g} |")
    return rows


def speed_rows(speed):
    by = {}
    for r in speed:
        tool = "tune" if r["tool"] == "tune" else "optuna"
        by[(r["sampler"], r["problem"], tool)] = r["ms_last_100"]
    rows = []
    for (sampler, problem, tool), ms in sorted(by.items()):
        if tool != "tune" or (sampler, problem, "optuna") not in by:
            continue
        o = by[(sampler, problem, "optuna")]
        rows.append(f"| {SAMPLER.get(sampler, sampler)} | {problem} | {ms:.2f} | {o:.2f} | "
                    f"{o / ms:.0f}× |")
    return rows


def render(docs):
    seeds = max(d["seeds"] for d in docs)
    runs = [r for d in docs if d["seeds"] == seeds for r in d["runs"]]
    speed = [r for d in docs for r in d["speed"]]
    d, m = docs[0], docs[0]["machine"]
    samplers = sorted({r["sampler"] for r in runs})
    out = [BEGIN, "",
           f"{', '.join(SAMPLER.get(s, s) for s in samplers)}: {seeds} seeds × "
           f"{d['trials']} trials per problem; machine: {m['cpu']}, {m['cores']} cores, "
           f"{m['ram']}, {m['os']}; {m['compiler']} ({m['build_type']}); Python "
           f"{m['python']}, numpy {m['numpy']}, Optuna {m['optuna']} (the vendored 4.9 for "
           f"the peer). Hypervolume: median (interquartile range) over the seeds, of the "
           f"COMPLETE trials so far inside the reference box "
           f"({'; '.join(f'{p} {tuple(r)}' for p, r in d['reference'].items())}); larger "
           f"is better.", ""]
    rows, worse, n = quality_rows(runs)
    out += ["| sampler | problem | trials | tune | Optuna 4.9 | p | tune is |",
            "|---|---|---|---|---|---|---|"] + rows + [""]
    out += [f"Rows where tune is worse by the issue's rule: {worse} of {n}.", ""]
    orows = oom_rows(runs)
    if orows:
        out += ["Trials that ran out of memory so far (median per run over the seeds):", "",
                "| sampler | problem | trials | tune | Optuna 4.9 |", "|---|---|---|---|---|"]
        out += orows + [""]
    srows = speed_rows(speed)
    if srows:
        out += ["Time per trial (ask, suggest, evaluate, tell; mean of trials 901–1,000 of one "
                "run, same machine, same run):", "",
                "| sampler | problem | tune (ms) | Optuna 4.9 (ms) | Optuna / tune |",
                "|---|---|---|---|---|"] + srows + [""]
    out.append(END)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="mo_quality.py --out files")
    ap.add_argument("--doc", required=True)
    args = ap.parse_args()
    docs = [json.load(open(f)) for f in args.results]
    text = open(args.doc).read()
    section = render(docs)
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text += "\n## Multi-objective samplers (issue 34)\n\n" + section + "\n"
    open(args.doc, "w").write(text)
    print(section)


if __name__ == "__main__":
    main()
