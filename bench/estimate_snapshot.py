#!/usr/bin/python3
"""Prints what `tune estimate` says for the memory bench's configurations (bench/memory_accuracy.py's
GRID), in table and JSON form, on the CPU and CUDA device models, with and without a device
memory: a snapshot to compare byte for byte before and after a change that must not change the
estimator (a refactoring).

    bench/estimate_snapshot.py --tune build/tune > after.txt
    diff before.txt after.txt && echo identical
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_accuracy import GRID  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tune", default="build/tune")
    args = ap.parse_args()
    failures = 0
    for model, batch, length, extra in GRID:
        for device in ("cpu", "cuda"):
            for fmt, limit in (("table", []), ("json", ["--device-memory", "24GiB"])):
                cmd = [args.tune, "estimate", "--model", model, "--batch-size", str(batch),
                       "--max-length", str(length), "--device", device, "--format", fmt,
                       "--log-level", "warn"] + limit + extra
                out = subprocess.run(cmd, capture_output=True, text=True)
                print(f"$ {' '.join(cmd[1:])}\nexit {out.returncode}\n{out.stdout}{out.stderr}")
                failures += out.returncode != 0
    print(f"{len(GRID)} configurations x 2 devices x 2 forms; {failures} non-zero exit(s)")


if __name__ == "__main__":
    main()
