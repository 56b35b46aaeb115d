#!/usr/bin/python3
"""Writes the multi-objective benchmark (bench/mo_quality.py's JSON files) into a section of
docs/benchmarks.md (--section: <!-- mo:begin --> ... <!-- mo:end --> by default): per problem,
sampler and trial count, the hypervolume quartiles of tune and the Optuna the files hold over
the seeds with a verdict, the trials that ran out of memory, and the time per trial at the end
of long runs. Verdicts: by default issue 34's (tune **worse** = its median below Optuna's first
quartile with a two-sided Mann-Whitney p < 0.05); with --bonferroni issue 44's (a lower median
and a one-sided test at p < 0.05 / the number of rows). The files are merged into one table: a file with fewer seeds than the others (a speed
run) gives only its speed rows; tune runs with sampler options (a variant) get rows of their own,
compared with Optuna's runs of the plain sampler."""

import argparse
import json
import lzma
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import format_results  # noqa: E402

SAMPLER = {"tpe": "MOTPE", "nsgaii": "NSGA-II"}


def verdict(tune, optuna, alpha=None):
    tq, oq = format_results.quartiles(tune), format_results.quartiles(optuna)
    if alpha is not None:  # larger is better: tune worse = tends to be smaller
        from format_optuna50_results import mann_whitney_greater_p
        p_worse, p_better = (mann_whitney_greater_p(optuna, tune),
                             mann_whitney_greater_p(tune, optuna))
        if tq[1] < oq[1] and p_worse < alpha:
            return "**worse**", p_worse
        if tq[1] > oq[1] and p_better < alpha:
            return "*better*", p_better
        return (("higher" if tq[1] > oq[1] else "lower" if tq[1] < oq[1] else "equal"),
                min(p_worse, p_better))
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


def quality_rows(runs, bonferroni=False):
    by = by_checkpoint(runs, lambda r, k: r["hv"][k])
    rows, worse = [], 0
    keys = [key for key in ordered({(p, s, lab, k) for (p, s, lab, k, tool) in by
                                    if tool == "tune"})
            if by.get((key[0], key[1], SAMPLER.get(key[1], key[1]), key[3], "optuna"))]
    alpha = 0.05 / len(keys) if bonferroni and keys else None
    for problem, sampler, lab, k in keys:
        t = by[(problem, sampler, lab, k, "tune")]
        o = by.get((problem, sampler, SAMPLER.get(sampler, sampler), k, "optuna"))
        v, p = verdict(t, o, alpha)
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


def render(docs, section="mo", bonferroni=False):
    begin, end = f"<!-- {section}:begin -->", f"<!-- {section}:end -->"
    seeds = max(d["seeds"] for d in docs)
    runs = [r for d in docs if d["seeds"] == seeds for r in d["runs"]]
    speed = [r for d in docs for r in d["speed"]]
    d, m = docs[0], docs[0]["machine"]
    samplers = sorted({r["sampler"] for r in runs})
    peer = next((r["tool"] for r in runs if r["tool"] != "tune"), "optuna-?")
    peer = "Optuna " + ".".join(peer.split("-", 1)[1].split(".")[:2])
    out = [begin, "",
           f"{', '.join(SAMPLER.get(s, s) for s in samplers)}: {seeds} seeds × "
           f"{d['trials']} trials per problem; machine: {m['cpu']}, {m['cores']} cores, "
           f"{m['ram']}, {m['os']}; {m['compiler']} ({m['build_type']}); Python "
           f"{m['python']}, numpy {m['numpy']}, Optuna {m['optuna']} (vendored, the peer). "
           f"tune's samplers at their defaults. Hypervolume: median (interquartile range) over the seeds, of the "
           f"COMPLETE trials so far inside the reference box "
           f"({'; '.join(f'{p} {tuple(r)}' for p, r in d['reference'].items())}); larger "
           f"is better.", ""]
    rows, worse, n = quality_rows(runs, bonferroni)
    out += [f"| sampler | problem | trials | tune | {peer} | p | tune is |",
            "|---|---|---|---|---|---|---|"] + rows + [""]
    rule = (f"a lower median with a one-sided Mann-Whitney p < 0.05 / {n} rows" if bonferroni
            else "a median below the peer's first quartile with a two-sided p < 0.05")
    out += [f"Rows where tune is **worse** ({rule}): {worse} of {n}.", ""]
    orows = oom_rows(runs)
    if orows:
        out += ["Trials that ran out of memory so far (median per run over the seeds):", "",
                f"| sampler | problem | trials | tune | {peer} |", "|---|---|---|---|---|"]
        out += orows + [""]
    srows = speed_rows(speed)
    if srows:
        out += ["Time per trial (ask, suggest, evaluate, tell; mean of trials 901–1,000 of one "
                "run, same machine, same run):", "",
                f"| sampler | problem | tune (ms) | {peer} (ms) | Optuna / tune |",
                "|---|---|---|---|---|"] + srows + [""]
    out.append(end)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="mo_quality.py --out files (.xz: compressed)")
    ap.add_argument("--doc", required=True)
    ap.add_argument("--section", default="mo", help="the doc's marked section to replace")
    ap.add_argument("--title", default="Multi-objective samplers (issue 34)",
                    help="its heading, when the section is new")
    ap.add_argument("--bonferroni", action="store_true", help="issue 44's verdict rule")
    args = ap.parse_args()
    docs = [json.load(lzma.open(f, "rt") if f.endswith(".xz") else open(f)) for f in args.results]
    text = open(args.doc).read()
    section = render(docs, args.section, args.bonferroni)
    begin, end = f"<!-- {args.section}:begin -->", f"<!-- {args.section}:end -->"
    if begin in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text += f"\n## {args.title}\n\n" + section + "\n"
    open(args.doc, "w").write(text)
    print(section)


if __name__ == "__main__":
    main()
