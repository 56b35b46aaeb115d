#!/usr/bin/env python3
"""The memory estimator against a real card: turns what `scripts/gpu/checks.sh` measured (its
RESULTS_DIR/estimates.jsonl: `tune estimate --device cuda --measure --format json` per
configuration, run on the GPU machine) into the <!-- gpu-estimates:begin --> ... end section of
docs/benchmarks.md. Needs no GPU: the measuring happened on the card.

Each row: the estimate's allocated peak plus its cuBLAS workspaces against the caching
allocator's allocated peak (`max_memory_allocated`), and the estimate's device peak less its
context (what the allocator may reserve: allocated peak, rounding, fragmentation, workspaces)
against the reserved peak (`max_memory_reserved`).

With --tune PATH the estimates are recomputed here by that build (`tune estimate --device cuda`,
no LibTorch needed), so that the card's measurements check the current estimator; without it the
table shows the estimates the card's build printed.

Results from before `tune estimate --format json` carried the shape (2026-11-26) are matched to
checks.sh's configuration list in the order the shell's glob listed them (est-1, est-10, ...).

The H200's results of 2026-11-26 are kept in bench/data/gpu-h200-2026-11-26/ (with each row's
shape and checks.sh id): `bench/gpu_estimates.py bench/data/gpu-h200-2026-11-26 --tune
build/tune --held-out-from 33 --date 2026-11-26` writes the section in docs/benchmarks.md.

Usage: bench/gpu_estimates.py RESULTS_DIR [--tune build/tune] [--doc docs/benchmarks.md]
                             [--held-out-from N] [--date YYYY-MM-DD] [--no-doc]
"""
import argparse
import json
import os
import re
import statistics
import subprocess

from benchdoc import write_section

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = os.path.join(HERE, "..", "scripts", "gpu", "checks.sh")


def checks_configs():
    """checks.sh's estimate configurations: id -> (model, B, T, precision, checkpointing)."""
    text = open(CHECKS).read()
    out = {}
    for m in re.finditer(r'"(\d+) (\S+) (\d+) (\d+) (\w+)( --gradient-checkpointing)?"', text):
        out[int(m.group(1))] = (m.group(2), int(m.group(3)), int(m.group(4)), m.group(5),
                                bool(m.group(6)))
    return out


def load(results):
    rows = [json.loads(line) for line in open(os.path.join(results, "estimates.jsonl"))]
    if all("batch_size" in r for r in rows):
        for r in rows:
            r.setdefault("id", None)  # checks.sh's id, where the results were saved with it
        return rows
    configs = checks_configs()
    # The glob est-*.json in a UTF-8 locale sorts as if punctuation were absent.
    order = sorted(configs, key=lambda k: f"est{k}json")
    if len(order) < len(rows):
        raise SystemExit(f"{len(rows)} results but checks.sh lists {len(order)} configurations")
    for k, r in zip(order, rows):
        model, b, t, precision, ckpt = configs[k]
        if r["model"] != model or r["precision"] != precision:
            raise SystemExit(f"result {k}: {r['model']} {r['precision']}, checks.sh: {model} "
                             f"{precision}; the list changed since this run")
        r.update(id=k, batch_size=b, max_length=t, gradient_checkpointing=ckpt)
    return rows


def reestimate(tune, r):
    """The current estimator's numbers for row r (its measurements kept)."""
    cmd = [tune, "estimate", "--model", r["model"], "--batch-size", str(r["batch_size"]),
           "--max-length", str(r["max_length"]), "--precision", r["precision"], "--device",
           "cuda", "--format", "json"] + (["--gradient-checkpointing"]
                                          if r["gradient_checkpointing"] else [])
    e = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    for key in ("allocated_peak", "breakdown", "device_peak", "context"):
        r[key] = e[key]


def machine(results):
    gpu = open(os.path.join(results, "gpu.txt")).read().strip().splitlines()
    return gpu[-1] if gpu else "unknown GPU"


def gib(x):
    return f"{x / 2**30:.2f}"


def section(rows, results, held_out_from, date, recomputed):
    begin, end = "<!-- gpu-estimates:begin -->", "<!-- gpu-estimates:end -->"
    alloc_err, resv_err, out = [], [], []
    rows = sorted(rows, key=lambda r: (r["model"], r["precision"], r["gradient_checkpointing"],
                                       r["batch_size"] * r["max_length"]))
    for r in rows:
        est = r["allocated_peak"] + r["breakdown"]["workspace"]
        meas = r["measured_peak"]
        planned = r["device_peak"] - r["context"]
        resv = r.get("measured_reserved_peak")
        e = (est - meas) / meas
        alloc_err.append(e)
        re_ = (planned - resv) / resv if resv else None
        if re_ is not None:
            resv_err.append(re_)
        new = held_out_from is not None and r["id"] is not None and r["id"] >= held_out_from
        shape = f"{r['batch_size']} × {r['max_length']}" + \
            (", checkpointing" if r["gradient_checkpointing"] else "") + (" (held out)" if new else "")
        out.append(f"| {r['model']} | {r['precision']} | {shape} | {gib(est)} | {gib(meas)} | "
                   f"{100 * e:+.1f}% | {gib(planned)} | "
                   f"{gib(resv) if resv else '-'} | {'-' if re_ is None else f'{100 * re_:+.1f}%'} |")
    a = sorted(abs(x) for x in alloc_err)
    lines = [begin, "## Memory estimator on a real card: an H200 (LibTorch 2.11)", "",
             f"`scripts/gpu/checks.sh` on the GPU machine ({machine(results)}), {date}: `tune "
             "estimate --device cuda --measure --format json` for each configuration (two AdamW "
             "steps and one evaluation of random token ids, dropout 0.1, six processes at once, "
             "each measuring its own caching allocator, expandable segments on); this table by "
             "`bench/gpu_estimates.py RESULTS_DIR` here. *Allocated*: the estimate's allocated "
             "peak plus its cuBLAS workspaces against `max_memory_allocated`. *Reserved*: the "
             "estimate's device peak less its context (allocated peak, rounding, fragmentation, "
             "workspaces) against `max_memory_reserved`, which is what a `--jobs` cap limits; "
             "below zero the cap would be too tight. Estimator terms: [memory.md](memory.md#on-cudas-kernels). " +
             ("The estimates are this tree's (`--tune`), recomputed after the measurements." if
              recomputed else "The estimates are those of the build that measured."), "",
             f"**Allocated: median |error| {100 * statistics.median(a):.2f}%, worst "
             f"{100 * a[-1]:.2f}%** over {len(a)} configurations.", ""]
    if resv_err:
        lines += [f"**Reserved: {sum(1 for x in resv_err if x < 0)} of {len(resv_err)} under**; "
                  f"median {100 * statistics.median(resv_err):+.1f}%, from "
                  f"{100 * min(resv_err):+.1f}% to {100 * max(resv_err):+.1f}%.", ""]
    if held_out_from is not None:
        held = [abs(e) for r, e in zip(rows, alloc_err) if r["id"] and r["id"] >= held_out_from]
        if held:
            lines += [f"The {len(held)} rows marked *held out* are shapes the CUDA terms were not "
                      f"derived from: median |error| {100 * statistics.median(held):.2f}%, worst "
                      f"{100 * max(held):.2f}% (the fragmentation constants were chosen on all "
                      "rows).", ""]
    lines += ["| model | precision | batch × length | allocated est. (GiB) | measured (GiB) | "
              "error | reserved est. (GiB) | measured (GiB) | error |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|"] + out + [end]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--doc", default=os.path.join(HERE, "..", "docs", "benchmarks.md"))
    ap.add_argument("--tune", default=None, help="recompute the estimates with this build")
    ap.add_argument("--held-out-from", type=int, default=None,
                    help="checks.sh ids from which the configurations were held out")
    ap.add_argument("--date", default="")
    ap.add_argument("--no-doc", action="store_true")
    args = ap.parse_args()
    rows = load(args.results)
    if args.tune:
        for r in rows:
            reestimate(args.tune, r)
    text = section(rows, args.results, args.held_out_from, args.date or "today",
                   args.tune is not None)
    if args.no_doc:
        print(text)
    else:
        write_section(args.doc, "gpu-estimates", text)
        print(text)


if __name__ == "__main__":
    main()
