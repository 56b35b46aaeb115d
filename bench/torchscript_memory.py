#!/usr/bin/env python3
"""Issue 33, acceptance 3: measured memory fits of TorchScript models. For three scripted text
classifiers (scripts/torchscript_models.py: the block-attention model of the user report with a
classification head, a bidirectional LSTM and a 1-D CNN) it runs

    tune estimate --model M.pt --device cpu --batch-size B --max-length T --measure --format json

which measures the peak of two AdamW steps and one evaluation at five small shapes (B <= 4,
T <= 64) under the counting allocator, fits peak = a + b*B*T + c*B*T^2, and then trains the
requested shape the same way and measures its peak. The fit's value at (B, T) is compared with
the measured peak (the acceptance: within 5%); the planned peak (the fit plus its margin, what
admission reserves) is shown beside it. Writes the table and the machine into the
<!-- torchscript-memory:begin --> ... <!-- torchscript-memory:end --> section of
docs/benchmarks.md.

Usage: bench/torchscript_memory.py --tune build/tune [--doc docs/benchmarks.md]
                                   [--shapes 16x256,32x128,32x256] [--threads 2] [--no-doc]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

from benchdoc import machine, write_section

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = [("block-attention", "block attention (4 layers, 16 blocks + cross-block)"),
          ("lstm", "bidirectional LSTM (2 layers, 128)"),
          ("cnn", "1-D CNN (2 convolutions, 128 channels)")]


# What the benchmark found before the fit had a floor (2026-11-26): kept beside each run's table.
FINDINGS = (
    "What the first run showed (five probes only, no floor): the LSTM's fit was −23% at (16, "
    "256) and −50% at (32, 128), the CNN's −46% at both. At B·T ≤ 256 their peaks are the opt"
    "imizer step's (weights, gradients and AdamW's moments: 16.9 MiB and 9.2 MiB), nearly the"
    " same at every probe, so the fit saw no growth. Hence the floor and the growth rounds: t"
    "he LSTM's probes grew to (16, 128) (2,048 tokens), the CNN's to (16, 256): its activatio"
    "ns (3.4 kB per token) rise above its floor only beyond ~1,000 tokens, so its (16, 256) r"
    "ow is a measured probe, not an extrapolation ((32, 128) and (32, 256) are). The block-at"
    "tention model needs no growth: its attention matrices dominate from (2, 32) on, and its "
    "probes stay within B ≤ 4, T ≤ 64."
)


def export(kind, out_dir):
    path = os.path.join(out_dir, f"{kind}.pt")
    subprocess.run([sys.executable, os.path.join(HERE, "..", "scripts", "torchscript_models.py"),
                    kind, "--out", path, "--vocab-size", "8000", "--num-labels", "4"],
                   check=True, stdout=subprocess.DEVNULL)
    return path


def estimate(tune, path, batch, length, threads):
    cmd = [tune, "estimate", "--model", path, "--device", "cpu", "--batch-size", str(batch),
           "--max-length", str(length), "--num-labels", "4", "--measure", "--format", "json",
           "--threads", str(threads)]
    start = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    out = json.loads(r.stdout)
    out["seconds"] = time.time() - start
    return out


def row(label, batch, length, out):
    fit = out["memory_model"]["fit"]
    bt = batch * length
    fitted = max(fit.get("floor", 0), fit["a"] + fit["b"] * bt + fit["c"] * bt * length)
    measured = out["measured_peak"]
    largest = max(fit["points"], key=lambda p: p["batch_size"] * p["max_length"] ** 2)
    return {"model": label, "batch": batch, "length": length, "fitted": fitted,
            "probes": len(fit["points"]),
            "largest": (largest["batch_size"], largest["max_length"]),
            "planned": out["device_peak"], "measured": measured,
            "error": (fitted - measured) / measured,
            "held_out": fit["held_out"], "held_out_error": fit["held_out_error"],
            "margin": fit["margin"], "a": fit["a"], "b": fit["b"], "c": fit["c"],
            "seconds": out["seconds"]}


def mib(x):
    return f"{x / 2**20:,.1f}"


def section(rows, shapes, threads):
    begin, end = "<!-- torchscript-memory:begin -->", "<!-- torchscript-memory:end -->"
    lines = [begin, "## Measured memory fits of TorchScript models (issue 33)", "",
             f"`python3 bench/torchscript_memory.py --tune build/tune --threads {threads}` on "
             f"{machine()}, {datetime.date.today().isoformat()}. For each scripted model `tune "
             "estimate --model M.pt --device cpu --measure` probes five shapes (B, T) = (1, 32), "
             "(2, 32), (4, 32), (2, 64), (4, 64) (two AdamW steps and one evaluation each, under "
             "the counting allocator), fits `peak = a + b·B·T + c·B·T²` (the largest probe held out), and "
             "measures the requested shape the same way. Where fewer than four probes peak 10% above "
             "the smallest one's (the optimizer step's floor: the activations are small beside the "
             "weights), the probes grow, doubling every shape's tokens per round (*probes* gives "
             "their number and the largest, held out). *Fit* is `max(floor, a + b·B·T + c·B·T²)` "
             "at the shape, *planned* the fit with its margin (what admission, `--max-batch` and `--jobs` "
             "reserve), *error* = (fit − measured) / measured. Acceptance: |error| ≤ 5% at "
             f"{' and '.join(f'({b}, {t})' for b, t in shapes)}.", "",
             "| model | (B, T) | fit (MiB) | planned (MiB) | measured (MiB) | error | probes "
             "(largest) | held-out error | margin |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | ({r['batch']}, {r['length']}) | {mib(r['fitted'])} | "
                     f"{mib(r['planned'])} | {mib(r['measured'])} | {100 * r['error']:+.2f}% | "
                     f"{r['probes']} ({r['largest'][0]}, {r['largest'][1]}) | "
                     f"{100 * r['held_out_error']:+.2f}% | {100 * r['margin']:.1f}% |")
    lines += ["", "Coefficients (bytes, bytes per token, bytes per token per position):", ""]
    seen = set()
    for r in rows:
        if r["model"] in seen:
            continue
        seen.add(r["model"])
        lines.append(f"- {r['model']}: a = {mib(r['a'])} MiB, b = {r['b']:,.1f}, "
                     f"c = {r['c']:,.2f}")
    worst = max(abs(r["error"]) for r in rows)
    lines += ["", f"Worst |error|: {100 * worst:.2f}% "
              f"({'within' if worst <= 0.05 else 'NOT within'} 5%).", "", FINDINGS, end]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tune", default="build/tune")
    ap.add_argument("--doc", default=os.path.join(HERE, "..", "docs", "benchmarks.md"))
    ap.add_argument("--shapes", default="16x256,32x128,32x256")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-doc", action="store_true", help="print the table only")
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, label in MODELS:
            path = export(kind, tmp)
            for batch, length in shapes:
                rows.append(row(label, batch, length,
                                estimate(args.tune, path, batch, length, args.threads)))
                r = rows[-1]
                print(f"{label} ({batch}, {length}): fit {mib(r['fitted'])} MiB, measured "
                      f"{mib(r['measured'])} MiB, error {100 * r['error']:+.2f}% "
                      f"({r['seconds']:.0f} s)", file=sys.stderr)
    text = section(rows, shapes, args.threads)
    print(text)
    if not args.no_doc:
        write_section(args.doc, "torchscript-memory", text)
    return 0 if all(abs(r["error"]) <= 0.05 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
