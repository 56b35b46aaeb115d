#!/usr/bin/env python3
"""Issue 6: writes the memory estimator's latency (bench/estimator_speed.cpp's JSON lines) into
the <!-- estimator-speed:begin --> ... <!-- estimator-speed:end --> section of docs/benchmarks.md.

Usage: bench/format_estimator_speed.py --results build/bench-results/estimator_speed.jsonl
                                       [--doc docs/benchmarks.md] [--loadavg "a b c"]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchdoc import machine, markers, write_section  # noqa: E402

BEGIN, END = markers("estimator-speed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", required=True)
    ap.add_argument("--doc", default="docs/benchmarks.md")
    ap.add_argument("--loadavg", default="?")
    ap.add_argument("--loadavg-after", default="?")
    args = ap.parse_args()
    rows = [json.loads(line) for line in open(args.results) if line.strip()]
    est = [r for r in rows if r["kind"] == "estimate"]
    overall = next(r for r in rows if r["kind"] == "overall")
    searches = [r for r in rows if r["kind"] == "max_batch"]
    calls = est[0]["calls"] if est else 0
    worst_p99 = max(r["p99_us"] for r in est)
    lines = [
        BEGIN,
        "## Memory estimator: time per estimate (issue 6)",
        "",
        "`bench/run_estimator_speed.sh` runs `tune_bench_estimator_speed` "
        "(bench/estimator_speed.cpp, tune_core only): for each configuration below, on the CPU "
        "device model (bytes as the counting allocator sees them) and the CUDA one (caching "
        f"allocator rounding per tensor), {calls:,} calls of `EstimateMemory`, each timed "
        "with `steady_clock`; then `MaxBatchSize` (the binary search over batch sizes 1-4096 "
        "behind `tune estimate --max-batch`) against a 24 GiB CUDA budget with a 10% margin.",
        "",
        f"Machine: {machine()}. {time.strftime('%Y-%m-%d')}; load average {args.loadavg} "
        f"before, {args.loadavg_after} after (timings do depend on load).",
        "",
        f"**Over all {overall['calls']:,} estimates: p50 {overall['p50_us']:.1f} µs, p99 "
        f"{overall['p99_us']:.1f} µs**; the slowest configuration's p99 is {worst_p99:.1f} µs "
        "(goal: under 50 µs per estimate). For comparison, the user reports' rule of thumb "
        "`params × batch × seq × 4 × 2.5` ([memory.md](memory.md#rule-of-thumb)) is one "
        "multiplication, but its error on the measured grid is in the memory section above "
        "(orders of magnitude); `tune estimate --measure`, "
        "the ground truth, takes seconds to minutes per configuration. Where a mean exceeds the "
        "p99, a few calls were preempted (the machine is shared; see the load).",
        "",
        "| configuration | device | mean (µs) | p50 (µs) | p99 (µs) | estimated device peak |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in est:
        lines.append(f"| {r['case']} | {r['device']} | {r['mean_us']:.1f} | {r['p50_us']:.1f} | "
                     f"{r['p99_us']:.1f} | {r['device_peak'] / 2**30:.2f} GiB |")
    lines += [
        "",
        "| MaxBatchSize search | budget | mean (µs) | p50 (µs) | p99 (µs) | largest batch |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in searches:
        lines.append(f"| {r['case']} | 24 GiB × 0.9 | {r['mean_us']:.1f} | {r['p50_us']:.1f} | "
                     f"{r['p99_us']:.1f} | {r['max_batch_size']} |")
    lines += ["", END]
    section = "\n".join(lines) + "\n"
    write_section(args.doc, "estimator-speed", section)
    print(f"wrote {args.doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
