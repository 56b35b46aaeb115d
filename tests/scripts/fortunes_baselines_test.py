#!/usr/bin/python3
"""Checks scripts/fortunes-baselines.py on a data set small enough to score by hand: the
majority class and naive Bayes predictions, macro-F1 and accuracy, and exit 2 for a missing
split."""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "fortunes-baselines.py")


def write(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for text, label in rows:
            f.write(json.dumps({"text": text, "label": label}) + "\n")


def main():
    with tempfile.TemporaryDirectory() as d:
        write(os.path.join(d, "train.jsonl"),
              [("meow purr", "cat"), ("Purr meow", "cat"), ("meow", "cat"), ("woof woof", "dog")])
        write(os.path.join(d, "validation.jsonl"), [("meow", "cat"), ("woof", "dog")])
        out = subprocess.run([sys.executable, SCRIPT, d, "--format", "json"], capture_output=True,
                             text=True, check=True)
        b = json.loads(out.stdout)
        # Majority "cat" for both: cat's F1 2/3 (1 right, 1 wrong), dog's 0; half right.
        assert b["majority_class"]["label"] == "cat", b
        assert abs(b["majority_class"]["macro_f1"] - 1 / 3) < 1e-12, b
        assert b["majority_class"]["accuracy"] == 0.5, b
        # "woof": log(1/4) + log(3/5) for dog beats log(3/4) + log(1/8) for cat (vocabulary of 3).
        assert b["naive_bayes"]["macro_f1"] == 1.0 and b["naive_bayes"]["accuracy"] == 1.0, b
        os.remove(os.path.join(d, "validation.jsonl"))
        bad = subprocess.run([sys.executable, SCRIPT, d], capture_output=True, text=True)
        assert bad.returncode == 2 and "validation.jsonl: no such file" in bad.stderr, bad
    print("fortunes_baselines: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
