#!/usr/bin/python3
"""Formats the TPE benchmark results (bench/tpe_speed.py, bench/tpe_quality.py) as markdown and
replaces the section between <!-- tpe:begin --> and <!-- tpe:end --> of docs/benchmarks.md,
keeping every other section. Creates the file if it does not exist."""

import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess

from benchdoc import markers, write_section

BEGIN, END = markers("tpe")
FUNCTION_NOTES = {
    "sphere": "2-D, x in [-5, 5]",
    "rosenbrock": "2-D, x in [-5, 10]",
    "branin": "x1 in [-5, 10], x2 in [0, 15]",
    "hartmann6": "6-D unit cube",
    "rosenbrock10": "10-D Rosenbrock, x in [-5, 10]",
    "sphere20": "20-D sphere, x in [-5, 5]",
    "mixed": "6 params: model, batch_size, grad_accum (categorical), max_length (int step 32), "
             "lr (log), weight_decay",
    "mixed_oom": "mixed with an OOM region",
    "mixed_cond": "configs/demo.json's space: model, lr, weight_decay, warmup_ratio, dropout, "
                  "classifier_layers, then batch_size, grad_accum, max_length from the heavy or "
                  "the base branch (named heavy_* and base_*: Optuna rejects a categorical whose "
                  "choices change under one name)",
    "mixed_cond_oom": "mixed_cond with an OOM region",
}
BUDGETS = [50, 100, 200]


# --- machine -----------------------------------------------------------------------------------

def _run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""


def machine(build_dir):
    info = {}
    lscpu = _run(["lscpu"])
    m = re.search(r"^Model name:\s*(.+)$", lscpu, re.M)
    info["cpu"] = m.group(1).strip() if m else platform.processor() or "unknown"
    info["cores"] = os.cpu_count()
    with open("/proc/meminfo") as f:
        kb = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
    info["ram"] = f"{kb / 1024 / 1024:.1f} GiB"
    os_name = platform.system()
    try:
        with open("/etc/os-release") as f:
            os_name = re.search(r'^PRETTY_NAME="?([^"\n]*)', f.read(), re.M).group(1)
    except (OSError, AttributeError):
        pass
    info["os"] = f"{os_name}, Linux {platform.release()}"
    compiler, build_type = "c++", ""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            cache = f.read()
        m = re.search(r"^CMAKE_CXX_COMPILER:\w+=(.+)$", cache, re.M)
        if m:
            compiler = m.group(1).strip()
        m = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", cache, re.M)
        build_type = m.group(1).strip() if m else ""
    except OSError:
        pass
    info["compiler"] = (_run([compiler, "--version"]).splitlines() or [compiler])[0]
    # The top-level CMakeLists.txt defaults an empty CMAKE_BUILD_TYPE to RelWithDebInfo.
    info["build_type"] = build_type or "RelWithDebInfo"
    import numpy
    import optuna
    info["optuna"] = optuna.__version__
    info["numpy"] = numpy.__version__
    info["python"] = platform.python_version()
    return info


# --- statistics ----------------------------------------------------------------------------------

def quantile(values, q):
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def quartiles(values):
    return quantile(values, 0.25), quantile(values, 0.5), quantile(values, 0.75)


def mann_whitney_p(a, b):
    """Two-sided Mann-Whitney U test, normal approximation with tie correction."""
    n1, n2 = len(a), len(b)
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    r1 = sum(r for r, (_, g) in zip(ranks, pooled) if g == 0)
    u = r1 - n1 * (n1 + 1) / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(var)
    return max(0.0, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


def best_after(values, k):
    done = [v for v in values[:k] if v is not None]
    return min(done) if done else math.inf


# --- formatting ---------------------------------------------------------------------------------

def fmt_ms(ms):
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def fmt_val(v):
    if math.isinf(v):
        return "inf"
    if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e5):
        return f"{v:.2e}"
    return f"{v:#.4g}" if abs(v) >= 1 else f"{v:.4f}"


def fmt_q(q):
    q1, med, q3 = q
    return f"{fmt_val(med)} [{fmt_val(q1)}, {fmt_val(q3)}]"


TOOL_NAMES = {"tune": "tune", "tune_tuned": "tune `tuned`", "tune_before": "tune before",
              "optuna49": "Optuna 4.9", "optuna31": "Optuna 3.1"}


def tool_name(tool):
    return TOOL_NAMES.get(tool, tool)


def speed_section(speed):
    rows = {(r["tool"], r["mode"], r["n_history"]): r for r in speed["rows"]}
    sizes = sorted({r["n_history"] for r in speed["rows"]})
    modes = [m for m in ("independent", "multivariate")
             if any(r["mode"] == m for r in speed["rows"])]
    tools = [t for t in ("tune", "tune_before", "optuna49", "optuna31")
             if any(r["tool"] == t for r in speed["rows"])]
    peers = [t for t in tools if t.startswith("optuna")]
    out, goals = [], []
    for mode in modes:
        header = f"| {mode}: trials in history |"
        sep = "|---:|"
        for t in tools:
            header += f" {tool_name(t)} |" + (" speed-up |" if t in peers else "")
            sep += "---:|" + ("---:|" if t in peers else "")
        out += [header, sep]
        for n in sizes:
            line = f"| {n} |"
            base = rows.get(("tune", mode, n))
            for t in tools:
                r = rows.get((t, mode, n))
                line += f" {fmt_ms(r['median_ms'])} |" if r else " – |"
                if t in peers:
                    ratio = r["median_ms"] / base["median_ms"] if r and base else None
                    line += f" {ratio:.0f}× |" if ratio else " – |"
                    if ratio and n == 3000:
                        goals.append(f"{mode} vs {tool_name(t)} {ratio:.0f}× "
                                     f"({'met' if ratio >= 100 else 'NOT met'})")
            out.append(line)
        out.append("")
    text = "Milliseconds per trial (ask + 6 suggests + tell), median."
    if "tune_before" in tools:
        text += (f" *tune before*: the same benchmark built from {speed.get('baseline_label') or 'the previous commit'}, "
                 "run in the same session just before tune.")
    if goals:
        text += " Goal (≥100× faster than Optuna at 3000 trials): " + "; ".join(goals) + "."
    out += [text, "", "<details><summary>All measured statistics</summary>", "",
            "| tool | mode | history | timed trials | median ms | mean ms | q1–q3 ms | "
            "first trial ms | pre-fill s |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mode in modes:
        for n in sizes:
            for tool in tools:
                r = rows.get((tool, mode, n))
                if not r:
                    continue
                k = (f"{r['reps']}×{r['timed_trials'] // r['reps']}" if r["reps"] > 1
                     else str(r["timed_trials"]))
                first = ("median " if r["reps"] > 1 else "") + fmt_ms(r["first_median_ms"])
                out.append(f"| {tool_name(tool)} | {mode} | {n} | {k} | "
                           f"{fmt_ms(r['median_ms'])} | {fmt_ms(r['mean_ms'])} | "
                           f"{fmt_ms(r['q1_ms'])}–{fmt_ms(r['q3_ms'])} | {first} | "
                           f"{r['prefill_s']:.3f} |")
    out += ["", "</details>"]
    return out


def verdict(cand, ref):
    """The issue's rule, cand vs ref (lists of best values, minimised): **worse** = median above
    ref's q3 with Mann-Whitney p < 0.05; *better* = median below ref's q1 with p < 0.05."""
    cq, rq = quartiles(cand), quartiles(ref)
    p = mann_whitney_p(cand, ref)
    if cq[1] > rq[2] and p < 0.05:
        v = "**worse**"
    elif cq[1] < rq[0] and p < 0.05:
        v = "*better*"
    elif cq[1] < rq[1]:
        v = "lower"
    elif cq[1] == rq[1]:
        v = "equal"
    else:
        v = "higher"
    return v, p, cq, rq


def fmt_p(p):
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def quality_table(by, mode, functions, tools, summary):
    """One table per mode; `summary[tool]` collects (function, budget, verdict, median lower)."""
    has_tuned = "tune_tuned" in tools
    header = "| problem | trials | tune | Optuna 4.9 | tune vs 4.9 | p |"
    sep = "|---|---:|---:|---:|---|---:|"
    if has_tuned:
        header += " tune `tuned` | `tuned` vs 4.9 | p |"
        sep += "---:|---|---:|"
    if "optuna31" in tools:
        header += " Optuna 3.1 |"
        sep += "---:|"
    out = [header, sep]
    for f in functions:
        for k in BUDGETS:
            cells = {t: [best_after(r["values"], k) for r in by.get((t, mode, f), [])]
                     for t in tools}
            if not cells.get("tune") or not cells.get("optuna49"):
                continue
            v, p, tq, oq = verdict(cells["tune"], cells["optuna49"])
            summary.setdefault("tune", []).append((mode, f, k, v, tq[1] < oq[1]))
            line = (f"| {'`' + f + '`' if k == BUDGETS[0] else ''} | {k} | {fmt_q(tq)} | "
                    f"{fmt_q(oq)} | {v} | {fmt_p(p)} |")
            if has_tuned:
                v2, p2, uq, _ = verdict(cells["tune_tuned"], cells["optuna49"])
                summary.setdefault("tune_tuned", []).append((mode, f, k, v2, uq[1] < oq[1]))
                line += f" {fmt_q(uq)} | {v2} | {fmt_p(p2)} |"
            if "optuna31" in tools:
                line += f" {fmt_q(quartiles(cells['optuna31']))} |" if cells["optuna31"] else " – |"
            out.append(line)
    return out


def goal_lines(summary):
    out = []
    rows = summary.get("tune", [])
    worse = [f"{f} ({m[:5]}., {k})" for m, f, k, v, _ in rows if v == "**worse**"]
    out.append(f"Goal 1, the default (`optuna`) preset not worse than Optuna 4.9 anywhere: "
               f"{'**NOT met**: ' + ', '.join(worse) if worse else 'met'} "
               f"(**worse** on {len(worse)} of {len(rows)} rows; median lower than 4.9's on "
               f"{sum(lower for *_, lower in rows)}).")
    tuned = summary.get("tune_tuned", [])
    if tuned:
        worse = [f"{f} ({m[:5]}., {k})" for m, f, k, v, _ in tuned if v == "**worse**"]
        lower = sum(lower for *_, lower in tuned)
        met = not worse and lower > len(tuned) / 2
        out.append(f"Goal 2, `tuned` better than Optuna 4.9 in median on most rows and not worse "
                   f"on any: {'met' if met else '**NOT met**, so it is not offered as a preset'} "
                   f"(median lower on {lower} of "
                   f"{len(tuned)} rows, *better* on "
                   f"{sum(v == '*better*' for _, _, _, v, _ in tuned)}, **worse** on "
                   f"{len(worse)}{': ' + ', '.join(worse) if worse else ''}).")
    return out


def oom_section(by, quality, tools, modes, names=None):
    """The share of OOM proposals per tool and mode; `names`: tool -> column name (default:
    TOOL_NAMES)."""
    name = (lambda t: names.get(t, t)) if names else tool_name
    out = []
    oom_problems = [f for f in ("mixed_oom", "mixed_cond_oom")
                    if any(key[2] == f for key in by)]
    if not oom_problems:
        return out
    cols = [(t, m) for t in tools for m in modes if by.get((t, m, oom_problems[0]))]
    out.append("| OOM proposals in trials 100–199 | "
               + " | ".join(f"{name(t)} {m}" for t, m in cols) + " | uniform random |")
    out.append("|---|" + "---:|" * (len(cols) + 1))
    for f in oom_problems:
        line = f"| `{f}`: share of trials, mean over seeds [q1, q3] |"
        for t, m in cols:
            shares = [sum(r["oom"][100:200]) / len(r["oom"][100:200])
                      for r in by.get((t, m, f), []) if len(r["oom"]) > 100]
            if shares:
                q1, _, q3 = quartiles(shares)
                line += f" {100 * statistics.fmean(shares):.1f}% [{100 * q1:.0f}%, {100 * q3:.0f}%] |"
            else:
                line += " – |"
        line += f" {100 * quality['random_oom_share'][f]:.1f}% |"
        out.append(line)
    out.append("")
    return out


def quality_section(quality):
    runs = quality["runs"]
    by = {}
    for r in runs:
        by.setdefault((r["tool"], r["mode"], r["function"]), []).append(r)
    functions = [f for f in FUNCTION_NOTES if any(r["function"] == f for r in runs)]
    tools = [t for t in ("tune", "tune_tuned", "optuna49", "optuna31")
             if any(r["tool"] == t for r in runs)]
    modes = [m for m in ("independent", "multivariate") if any(r["mode"] == m for r in runs)]
    seeds = sorted({r["seed"] for r in runs})
    out, summary = [], {}
    for mode in modes:
        out += [f"#### {mode.capitalize()} mode", ""]
        out += quality_table(by, mode, functions, tools, summary)
        out.append("")
    out.append(f"Best value after 50 / 100 / 200 trials (minimised; an OOM trial does not count), "
               f"median [q1, q3] over {len(seeds)} seeds ({seeds[0]}..{seeds[-1]}). Verdicts "
               "compare with Optuna 4.9 by the issue's rule: **worse** = median above 4.9's q3 "
               "and p < 0.05; *better* = median below 4.9's q1 and p < 0.05; otherwise *lower*, "
               "*equal* or *higher* median (a difference within the noise). p: two-sided "
               "Mann–Whitney U test (normal approximation with tie correction; SciPy is not "
               "installed).")
    out.append("")
    out += goal_lines(summary)
    out.append("")
    out += oom_section(by, quality, tools, modes)
    return out


def render(speed, quality, info, args):
    s = quality["settings"]
    sp = speed["settings"]
    lines = [BEGIN, "## TPE sampler: tune vs Optuna 4.9 and 3.1 (issues 3, 19)", ""]
    how = ("; the Optuna runs were made earlier that day and reused, see the end of this "
           "section" if quality.get("reused") else " in one run")
    lines.append(f"Measured {args.date} by `bench/run_tpe_bench.sh`{how} "
                 f"(total {args.total_seconds / 60:.1f} min, under `nice`).")
    lines.append("")
    lines.append(f"- Machine: {info['cpu']}, {info['cores']} cores, {info['ram']} RAM; "
                 f"{info['os']}.")
    versions = {**speed.get("versions", {}), **quality.get("versions", {})}
    optunas = ", ".join(f"{v} ({'vendored, unmodified' if k == 'optuna49' else 'Debian'})"
                        for k, v in sorted(versions.items(), reverse=True))
    lines.append(f"- tune: {info['compiler']}, CMake build type {info['build_type']} (-O2). "
                 f"Optuna {optunas}; numpy {info['numpy']}, Python {info['python']}.")
    if args.loadavg:
        lines.append(f"- Load average (1, 5, 15 min) at the start: {args.loadavg}; at the end: "
                     f"{args.loadavg_end or '?'}. The machine is shared: other processes ran "
                     "during the measurement, which slows both sides' wall times alike but can "
                     "add noise to the latency rows.")
    lines += ["", "### Suggest latency", ""]
    lines.append("Space of the user reports: model (7 names), batch_size "
                 "[8,12,16,24,32,48,64], grad_accum [1,2,3,4,6,8] (categorical), max_length "
                 "128..512 step 32, lr 1e-6..1e-3 log, weight_decay 0..0.1. Each history is N "
                 "COMPLETE trials with uniformly random params and a synthetic value (the same "
                 "formula in every tool), in an in-memory study; then full TPE trials are timed. "
                 "TPE defaults otherwise (n_startup_trials=10, n_ei_candidates=24; tune's "
                 "`optuna` preset).")
    lines.append("")
    if args.speed_from:
        measured = datetime.datetime.fromtimestamp(os.path.getmtime(args.speed_from),
                                                   datetime.timezone.utc)
        lines.append(f"These rows were measured earlier the same day "
                     f"({measured:%Y-%m-%d %H:%M} UTC, same machine) and reported again "
                     "(`SPEED_FROM`): the TPE code they timed is this run's.")
        lines.append("")
    lines += speed_section(speed)
    lines.append("")
    lines.append(f"Notes: tune's figures pool {sp['tune_reps']} fresh studies × "
                 f"{sp['tune_timed']} timed trials per cell, so the timed window (N to "
                 f"N+{sp['tune_timed'] - 1} trials) is the same as Optuna's; Optuna times "
                 f"{sp['optuna_timed']} trials per cell in one study. tune's first trial after "
                 "the pre-fill also indexes the N trials once (\"first trial\" in the details); "
                 "the median excludes that one-off cost, the mean includes it. Optuna re-reads "
                 "the whole history on every suggest, so it has no such one-off cost.")
    lines += ["", "### Optimisation quality", ""]
    lines += quality_intro(quality, s)
    lines += quality_section(quality)
    sec = quality["seconds"]
    lines.append("Wall time: speed " + ", ".join(
        f"{v:.0f} s ({tool_name(k)})" for k, v in speed["seconds"].items())
                 + "; quality " + ", ".join(f"{v:.0f} s ({tool_name(k)})" for k, v in sec.items())
                 + f" (Optuna in {quality['jobs']} processes).")
    reused = quality.get("reused") or {}
    if reused:
        lines.append("")
        lines.append("The " + " and ".join(tool_name(t) for t in reused) + " runs were made "
                     "first, by `bench/tpe_quality.py` with the same settings, and taken from "
                     "its output (`OPTUNA_FROM`, checked run by run: same problems, modes, seeds, "
                     "trials and startup points); their wall time is that run's. "
                     + " ".join(f"{tool_name(t)}: {r['runs']} of {r['of']} runs."
                                for t, r in reused.items() if isinstance(r, dict)))
    lines.append(END)
    return "\n".join(lines) + "\n"


def quality_intro(quality, s):
    lines = []
    presets = "; ".join(f"*{tool_name(k)}*: `{json.dumps(v)}`" for k, v in quality["samplers"].items())
    lines.append(f"Built-in functions (`src/objectives/functions.cpp`) on the spaces below, "
                 f"suggested in the same order by every tool; {s['trials']} trials per run, TPE "
                 f"defaults with n_startup_trials={s['n_startup_trials']} in every tool (tune "
                 f"columns: {presets}). **Same startup points:** the driver draws the "
                 f"{s['n_startup_trials']} startup points of each problem and seed and every tool "
                 "enqueues them, so all runs of a seed start from the same history and TPE takes "
                 "over at trial 10. Before the comparison the driver checks that its Python "
                 f"copies of the functions equal tune's on {s['parity_points']} random points of "
                 "each problem (max |difference| "
                 f"{max(p['max_abs_diff'] for p in quality['parity'].values()):.1g}; tolerance "
                 "1e-9). OOM problems: the mixed function with a memory proxy threshold of "
                 f"{s['oom_threshold']:.0f} (batch_size × max_length × layers·hidden/(12·768)); "
                 "such a trial is PRUNED without reports in every tool and does not count "
                 "towards the best value (tune also records user attribute oom=true, as its "
                 "objectives and memory guard do, which its `oom_feasibility` term learns from).")
    lines += ["", "| problem | space |", "|---|---|"]
    for f, note in FUNCTION_NOTES.items():
        if f in quality["random_oom_share"]:
            note += f"; {100 * quality['random_oom_share'][f]:.0f}% of uniformly random configs OOM"
        lines.append(f"| `{f}` | {note} |")
    lines.append("")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speed", required=True)
    ap.add_argument("--quality", required=True)
    ap.add_argument("--doc", default="docs/benchmarks.md")
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--total-seconds", type=float, required=True)
    ap.add_argument("--loadavg", default="")
    ap.add_argument("--loadavg-end", default="")
    ap.add_argument("--speed-from", default="", help="the earlier tpe_speed.json reported")
    ap.add_argument("--date", default=datetime.datetime.now().astimezone().strftime(
        "%Y-%m-%d %H:%M %Z"))
    args = ap.parse_args()
    with open(args.speed) as f:
        speed = json.load(f)
    with open(args.quality) as f:
        quality = json.load(f)
    section = render(speed, quality, machine(args.build_dir), args)

    write_section(args.doc, "tpe", section)
    print(section)


if __name__ == "__main__":
    main()
