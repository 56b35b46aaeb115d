#!/usr/bin/python3
"""Checks scripts/prepare-fortunes.py on Debian's real fortune files: deterministic output
independent of label order, disjoint train/validation texts, every label present in both
splits, about the requested validation share, and a clear exit 2 for an unknown label.
Exit 77 (skipped) when the fortunes package is not installed."""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "prepare-fortunes.py")
SOURCE = "/usr/share/games/fortunes"
LABELS = "computers,science,politics,work,art,law,food,sports,love,medicine"


def run(out, labels, check=True):
    return subprocess.run([sys.executable, SCRIPT, "--out", out, "--labels", labels],
                          capture_output=True, text=True, check=check)


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def main():
    if not os.path.isfile(os.path.join(SOURCE, "computers")):
        print(f"SKIP: {SOURCE} has no fortune files (Debian package 'fortunes')")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        run(a, LABELS)
        run(b, ",".join(reversed(LABELS.split(","))))
        for split in ("train", "validation"):
            with open(os.path.join(a, f"{split}.jsonl"), "rb") as fa, \
                    open(os.path.join(b, f"{split}.jsonl"), "rb") as fb:
                assert fa.read() == fb.read(), f"{split}.jsonl depends on the label order"
        train, valid = load(os.path.join(a, "train.jsonl")), load(os.path.join(a, "validation.jsonl"))
        overlap = {r["text"] for r in train} & {r["text"] for r in valid}
        assert not overlap, f"{len(overlap)} texts in both splits"
        for rows, name in ((train, "train"), (valid, "validation")):
            assert {r["label"] for r in rows} == set(LABELS.split(",")), f"labels missing in {name}"
            assert all(len(r["text"]) >= 20 and "\x08" not in r["text"] for r in rows)
        share = len(valid) / (len(train) + len(valid))
        assert 0.15 < share < 0.25, f"validation share {share:.3f}"
        bad = run(os.path.join(tmp, "c"), "computers,no-such-topic", check=False)
        assert bad.returncode == 2 and "no-such-topic" in bad.stderr, bad
        print(f"ok: {len(train)} train, {len(valid)} validation, share {share:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
