#!/usr/bin/python3
"""Formats a bench/tpe_quality.py run against Optuna 5.0 (the peer since its release) as the
`<!-- tpe50:begin -->` ... `<!-- tpe50:end -->` section of docs/benchmarks.md.

    format_optuna50_results.py QUALITY_JSON... [--speed SPEED_JSON] [--doc docs/benchmarks.md]
                               [--budgets 50,100,200,500]

Several outputs (e.g. a 200-trial run of both modes, a 500-trial run of one, an Optuna 4.9 run)
are merged: per (tool, mode, problem, seed) the longest run counts, and a row is shown for a
budget only where tune and Optuna 5.0 both have runs that long.

Per problem, mode and budget (trials): the best value after that many trials (minimised; an OOM
trial does not count), median [q1, q3] over the seeds, of tune (preset optuna-5.0, the default),
Optuna 5.0's TPESampler, and where the run has them tune's optuna-4.9 preset and Optuna 4.9.
The verdict against Optuna 5.0: **worse** = a higher median and a one-sided Mann-Whitney test at
p < 0.05 / (number of rows compared) (Bonferroni); *better* = a lower median and the one-sided
test the other way at the same level; otherwise *lower*, *equal* or *higher* (within the noise).
"""
import argparse
import json
import lzma
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchdoc import machine, write_section  # noqa: E402
from format_results import (FUNCTION_NOTES, best_after, fmt_ms, fmt_q,  # noqa: E402
                            oom_section, quartiles)

TOOLS = {"tune": "tune (`optuna-5.0`)", "optuna50": "Optuna 5.0", "tune49": "tune (`optuna-4.9`)",
         "optuna49": "Optuna 4.9"}
OOM_PROBLEMS = ("mixed_oom", "mixed_cond_oom")


def mann_whitney_greater_p(a, b):
    """One-sided Mann-Whitney U test that `a` tends to be larger than `b` (normal approximation
    with tie and continuity corrections)."""
    n1, n2 = len(a), len(b)
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks, ties, i = [0.0] * len(pooled), 0.0, 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        ties += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    u = sum(r for r, (_, g) in zip(ranks, pooled) if g == 0) - n1 * (n1 + 1) / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (u - n1 * n2 / 2 - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


def verdict(cand, ref, alpha):
    cq, rq = quartiles(cand), quartiles(ref)
    p_worse = mann_whitney_greater_p(cand, ref)
    p_better = mann_whitney_greater_p(ref, cand)
    if cq[1] > rq[1] and p_worse < alpha:
        return "**worse**", p_worse
    if cq[1] < rq[1] and p_better < alpha:
        return "*better*", p_better
    v = "lower" if cq[1] < rq[1] else "equal" if cq[1] == rq[1] else "higher"
    return v, min(p_worse, p_better)


def fmt_p(p):
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def speed_lines(speed):
    """tune (its --preset) vs Optuna 5.0 per trial (ask + 6 suggests + tell), median ms, by the
    size of the history; the goal: at least 30x at 1,000 trials."""
    rows = {(r["tool"], r["mode"], r["n_history"]): r for r in speed["rows"]}
    sizes = sorted({r["n_history"] for r in speed["rows"]})
    modes = [m for m in ("independent", "multivariate") if any(k[1] == m for k in rows)]
    peers = [t for t in ("optuna50", "optuna49") if any(k[0] == t for k in rows)]
    out = [f"Suggest latency (`bench/tpe_speed.py`, tune's preset "
           f"`{speed['settings'].get('preset', 'optuna-5.0')}`): milliseconds per trial (ask + 6 "
           "suggests + tell on the user reports' 6-parameter space), median, by the number of "
           "COMPLETE trials in the history.", ""]
    goals = []
    for mode in modes:
        out.append(f"| {mode}: trials in history | tune |"
                   + "".join(f" {TOOLS[p]} | speed-up |" for p in peers))
        out.append("|---:|---:|" + "---:|---:|" * len(peers))
        for n in sizes:
            base = rows.get(("tune", mode, n))
            line = f"| {n} | {fmt_ms(base['median_ms']) if base else '–'} |"
            for p in peers:
                r = rows.get((p, mode, n))
                ratio = r["median_ms"] / base["median_ms"] if r and base else None
                line += (f" {fmt_ms(r['median_ms'])} | {ratio:.0f}× |" if ratio else " – | – |")
                if p == "optuna50" and n == 1000 and ratio:
                    goals.append(f"{mode} {ratio:.0f}× ({'met' if ratio >= 30 else '**NOT met**'})")
            out.append(line)
        out.append("")
    if goals:
        out += ["Goal, at least 30× Optuna 5.0 per trial at 1,000 trials: " + "; ".join(goals)
                + ".", ""]
    return out


def merge(paths):
    """The runs of several tpe_quality.py outputs, the longest per (tool, mode, problem, seed);
    the first output's settings, every output's versions and wall times."""
    best, versions, seconds, oom_share = {}, {}, [], {}
    for path in paths:
        with (lzma.open(path, "rt") if path.endswith(".xz") else open(path)) as f:
            doc = json.load(f)
        for r in doc["runs"]:
            key = (r["tool"], r["mode"], r["function"], r["seed"])
            if key not in best or len(r["values"]) > len(best[key]["values"]):
                best[key] = r
        versions.update(doc["versions"])
        seconds.append({t: s for t, s in doc["seconds"].items()
                        if any(r["tool"] == t for r in doc["runs"])})
        oom_share.update(doc["random_oom_share"])
        settings = settings if len(seconds) > 1 else doc["settings"]
    return {"runs": list(best.values()), "versions": versions, "seconds": seconds,
            "random_oom_share": oom_share, "settings": settings}


def oom_count_section(by, rows, n_startup):
    """Trials lost to out-of-memory errors per run after the shared startup points, tune against
    Optuna 5.0 on the OOM rows, with the verdict rule of the best values (fewer is better)."""
    if not rows:
        return []
    alpha = 0.05 / len(rows)
    out = [f"| OOM trials per run, trials {n_startup + 1} to N | mode | N | tune (`optuna-5.0`) "
           "| Optuna 5.0 | tune vs 5.0 | p (one-sided) |",
           "|---|---|---:|---:|---:|---|---:|"]
    fewer = 0
    for m, f, k in rows:
        cells = {t: [sum(r["oom"][n_startup:k]) for r in by.get((t, m, f), [])
                     if len(r["oom"]) >= k] for t in ("tune", "optuna50")}
        v, p = verdict(cells["tune"], cells["optuna50"], alpha)
        v = {"*better*": "*fewer*", "**worse**": "**more**"}.get(v, v)
        fewer += v == "*fewer*"
        q = {t: quartiles(c) for t, c in cells.items()}
        out.append(f"| `{f}` | {m} | {k} | "
                   + " | ".join(f"{q[t][1]:g} [{q[t][0]:g}, {q[t][2]:g}]" for t in q)
                   + f" | {v} | {fmt_p(p)} |")
    out += ["", f"Median [q1, q3] over the seeds; *fewer* / **more** = a lower / higher median with "
            f"a one-sided Mann-Whitney p below 0.05 / {len(rows)} rows = {alpha:.4f}. tune has "
            f"*fewer* out-of-memory trials than Optuna 5.0 on {fewer} of {len(rows)} OOM rows.", ""]
    return out


def section(quality, budgets, speed=None):
    runs = quality["runs"]
    by = {}
    for r in runs:
        by.setdefault((r["tool"], r["mode"], r["function"]), []).append(r)
    tools = [t for t in TOOLS if any(r["tool"] == t for r in runs)]
    if "tune" not in tools or "optuna50" not in tools:
        raise SystemExit("the run has no tune or no optuna50 column")
    functions = [f for f in FUNCTION_NOTES if any(r["function"] == f for r in runs)]
    modes = [m for m in ("independent", "multivariate") if any(r["mode"] == m for r in runs)]
    def long_enough(tool, m, f, k):
        return by.get((tool, m, f)) and min(len(r["values"]) for r in by[(tool, m, f)]) >= k

    rows = [(m, f, k) for m in modes for f in functions for k in budgets
            if long_enough("tune", m, f, k) and long_enough("optuna50", m, f, k)]
    n_trials = max(k for _, _, k in rows)
    alpha = 0.05 / len(rows)
    settings = quality["settings"]
    out = ["<!-- tpe50:begin -->", "## TPE vs Optuna 5.0: optimisation quality", "",
           f"`bench/tpe_quality.py` (settings: {settings['seeds']} seeds from "
           f"{settings['first_seed']}, up to {n_trials} trials, {settings['n_startup_trials']} shared "
           f"startup points per seed, OOM threshold {settings['oom_threshold']:g}), formatted by "
           f"`bench/format_optuna50_results.py`. Machine: {machine()}. Optuna "
           + ", ".join(f"{v} (`{k}`)" for k, v in quality["versions"].items())
           + ", vendored and unmodified. `multivariate` mode is Optuna 5.0's default "
           "`TPESampler()` for one objective and tune's default (`\"multivariate\": \"auto\"`).",
           ""]
    verdicts = []
    for mode in modes:
        header = f"| {mode}: problem | trials |"
        sep = "|---|---:|"
        for t in tools:
            header += f" {TOOLS[t]} |"
            sep += "---:|"
            if t == "optuna50":
                header += " tune vs 5.0 | p (one-sided) |"
                sep += "---|---:|"
        out += [header, sep]
        for f in functions:
            for k in budgets:
                if (mode, f, k) not in rows:
                    continue
                cells = {t: [best_after(r["values"], k) for r in by.get((t, mode, f), [])
                             if len(r["values"]) >= k]
                         for t in tools}
                v, p = verdict(cells["tune"], cells["optuna50"], alpha)
                verdicts.append((mode, f, k, v))
                line = f"| {'`' + f + '`' if k == budgets[0] else ''} | {k} |"
                for t in tools:
                    line += f" {fmt_q(quartiles(cells[t]))} |" if cells[t] else " – |"
                    if t == "optuna50":
                        line += f" {v} | {fmt_p(p)} |"
                out.append(line)
        out.append("")
    worse = [f"{f} ({m[:5]}., {k})" for m, f, k, v in verdicts if v == "**worse**"]
    better = [f"{f} ({m[:5]}., {k})" for m, f, k, v in verdicts if v == "*better*"]
    oom_rows = [(m, f, k, v) for m, f, k, v in verdicts if f in OOM_PROBLEMS]
    out.append(
        f"Best value after {', '.join(map(str, sorted({k for *_, k in rows})))} trials, median "
        f"[q1, q3] over the seeds (a cell: – where that tool has no run that long). "
        f"Verdicts against Optuna 5.0: **worse** / *better* = a higher / lower median with a "
        f"one-sided Mann-Whitney p below 0.05 / {len(rows)} rows = {alpha:.5f}; otherwise the "
        f"direction of the medians (noise).")
    out.append("")
    out.append(f"Goal, not worse than Optuna 5.0 on any row: "
               f"{'**NOT met**: ' + ', '.join(worse) if worse else 'met'} (**worse** on "
               f"{len(worse)} of {len(rows)}; *better* on {len(better)}"
               f"{': ' + ', '.join(better) if better else ''}; median lower on "
               f"{sum(v in ('lower', '*better*') for *_, v in verdicts)}).")
    oom_better = sum(v == "*better*" for *_, v in oom_rows)
    out.append(f"Goal, better on the OOM-region rows: *better* on {oom_better} of "
               f"{len(oom_rows)} ({sum(v in ('lower', '*better*') for *_, v in oom_rows)} with a "
               f"lower median).")
    out.append("")
    out += oom_count_section(by, [(m, f, k) for m, f, k, _ in oom_rows],
                             settings["n_startup_trials"])
    if n_trials >= 200:
        out += oom_section(by, quality, tools, modes, TOOLS)
    if speed:
        out += speed_lines(speed)
    out.append("Wall time (each run of the script): " + "; ".join(
        ", ".join(f"{TOOLS.get(t, t)} {s:.0f} s" for t, s in seconds.items())
        for seconds in quality["seconds"]) + ".")
    out.append("<!-- tpe50:end -->")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("quality", nargs="+")
    ap.add_argument("--doc", default=os.path.join(os.path.dirname(__file__), "..", "docs",
                                                  "benchmarks.md"))
    ap.add_argument("--budgets", default="50,100,200,500")
    ap.add_argument("--speed", help="a bench/tpe_speed.py output with an optuna50 column")
    args = ap.parse_args()
    quality = merge(args.quality)
    speed = None
    if args.speed:
        with open(args.speed) as f:
            speed = json.load(f)
    text = section(quality, [int(k) for k in args.budgets.split(",")], speed)
    write_section(args.doc, "tpe50", text)
    print(text)


if __name__ == "__main__":
    main()
