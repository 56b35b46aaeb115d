#!/usr/bin/env python3
"""Prints `tune estimate` (table, then JSON; on the CPU, then on a 16 GiB CUDA card) for each configuration of the memory benchmark's grid
(bench/memory_accuracy.py), without measuring: a byte-for-byte record of the estimator's output
to diff across a refactoring of the estimator.

Usage: bench/estimate_grid.py --tune build/tune > estimates.txt
"""
import argparse
import subprocess
import sys

from memory_accuracy import GRID


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tune", default="build/tune")
    args = ap.parse_args()
    for model, batch, length, extra in GRID:
        for device in (["--device", "cpu"], ["--device", "cuda", "--device-memory", "16GiB"]):
            base = [args.tune, "estimate", "--model", model, "--batch-size", str(batch),
                    "--max-length", str(length), "--log-level", "warn"] + device + extra
            for fmt in ("table", "json"):
                out = subprocess.run(base + ["--format", fmt], capture_output=True, text=True)
                print(f"### {' '.join(base[1:])} --format {fmt} (exit {out.returncode})")
                sys.stdout.write(out.stdout + out.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
