#!/usr/bin/python3
"""Builds the fortunes topic-classification data set from Debian's `fortunes` package.

Each fortune file is one label (computers, science, politics, ...). A fortune is the text
between two lines holding only "%". Texts are cleaned (terminal overstrike sequences removed,
whitespace collapsed), texts shorter than --min-chars are dropped, and a text found under two
labels is dropped from both (it would be a contradictory example). The split is
deterministic and independent of file order: a text goes to validation when the first 8 bytes
of its SHA-256, as an integer, fall in the lowest --validation-fraction of the range.

Writes OUT/train.jsonl and OUT/validation.jsonl, one {"text": ..., "label": ...} object per
line, plus OUT/labels.json (the labels in the order given) and prints a summary.

Usage: scripts/prepare-fortunes.py [--source /usr/share/games/fortunes] [--out DIR]
                                   [--labels computers,science,...] [--validation-fraction 0.2]
                                   [--min-chars 20]
Exit codes: 0 ok, 2 bad arguments or a missing/empty label file.
"""

import argparse
import hashlib
import json
import os
import re
import sys

DEFAULT_LABELS = ["computers", "science", "politics", "work", "art", "law", "food", "sports",
                  "love", "medicine"]
OVERSTRIKE = re.compile(r".\x08")


def read_fortunes(path):
    with open(path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8", errors="replace")
    out, current = [], []
    for line in text.splitlines():
        if line.strip() == "%":
            out.append("\n".join(current))
            current = []
        else:
            current.append(line)
    out.append("\n".join(current))
    return out


def clean(text):
    text = OVERSTRIKE.sub("", text)
    text = text.replace("\x08", "")
    return " ".join(text.split())


def is_validation(text, fraction):
    h = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    return h < fraction * 2**64


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default="/usr/share/games/fortunes")
    ap.add_argument("--out", default="build/data/fortunes")
    ap.add_argument("--labels", default=",".join(DEFAULT_LABELS))
    ap.add_argument("--validation-fraction", type=float, default=0.2)
    ap.add_argument("--min-chars", type=int, default=20)
    args = ap.parse_args()
    labels = [l for l in args.labels.split(",") if l]
    if len(labels) < 2:
        sys.exit("prepare-fortunes: --labels needs at least two labels")
    if not 0.0 < args.validation_fraction < 1.0:
        sys.exit(f"prepare-fortunes: --validation-fraction {args.validation_fraction} is not "
                 "in (0, 1)")

    by_text = {}
    for label in labels:
        path = None
        for candidate in (os.path.join(args.source, label + ".u8"),
                          os.path.join(args.source, label)):
            if os.path.isfile(candidate):
                path = candidate
                break
        if path is None:
            available = sorted(n for n in os.listdir(args.source)
                               if "." not in n) if os.path.isdir(args.source) else []
            print(f"prepare-fortunes: no fortune file for label '{label}' in {args.source} "
                  f"(install Debian's 'fortunes' package; available: "
                  f"{', '.join(available) or 'none'})", file=sys.stderr)
            return 2
        n = 0
        for fortune in read_fortunes(path):
            text = clean(fortune)
            if len(text) < args.min_chars:
                continue
            by_text.setdefault(text, set()).add(label)
            n += 1
        if n == 0:
            print(f"prepare-fortunes: {path} has no fortune of at least {args.min_chars} "
                  "characters", file=sys.stderr)
            return 2

    os.makedirs(args.out, exist_ok=True)
    counts = {label: [0, 0] for label in labels}
    ambiguous = 0
    rows = {"train": [], "validation": []}
    for text in sorted(by_text):  # sorted: output independent of file and label order
        owners = by_text[text]
        if len(owners) > 1:
            ambiguous += 1
            continue
        label = next(iter(owners))
        split = "validation" if is_validation(text, args.validation_fraction) else "train"
        rows[split].append({"text": text, "label": label})
        counts[label][split == "validation"] += 1
    for split, items in rows.items():
        with open(os.path.join(args.out, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            for item in items:
                f.write(json.dumps(item, ensure_ascii=False) + "\n")
    with open(os.path.join(args.out, "labels.json"), "w") as f:
        json.dump(labels, f)
    print(f"prepare-fortunes: {len(rows['train'])} train, {len(rows['validation'])} validation "
          f"examples in {args.out} ({ambiguous} texts under several labels dropped)")
    for label in labels:
        print(f"  {label:<10} {counts[label][0]:>5} train {counts[label][1]:>5} validation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
