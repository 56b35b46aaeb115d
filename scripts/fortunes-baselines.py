#!/usr/bin/python3
"""The baselines a text classifier on a JSONL data set has to beat: the majority class and a
multinomial naive Bayes over lowercase words (Laplace smoothing), both trained on the training
split and scored on the validation split with the metric the train objective reports
(macro-F1: the unweighted mean of the per-label F1 scores, a label never predicted nor present
counting 0), and accuracy.

Usage: scripts/fortunes-baselines.py DIR            (reads DIR/train.jsonl, DIR/validation.jsonl)
       scripts/fortunes-baselines.py DIR --format json
Exit codes: 0 ok, 2 a missing or malformed file.
"""

import argparse
import collections
import json
import math
import os
import re
import sys

WORD = re.compile(r"[a-z0-9']+")


def load(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                rows.append((row["text"], str(row["label"])))
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"fortunes-baselines: {path}:{n}: not a {{\"text\", \"label\"}} object ({e})")
    return rows


def macro_f1(gold, predicted, labels):
    scores = []
    for label in labels:
        tp = sum(g == label and p == label for g, p in zip(gold, predicted))
        fp = sum(g != label and p == label for g, p in zip(gold, predicted))
        fn = sum(g == label and p != label for g, p in zip(gold, predicted))
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(scores) / len(scores)


def accuracy(gold, predicted):
    return sum(g == p for g, p in zip(gold, predicted)) / len(gold)


def naive_bayes(train, texts, labels):
    words = {label: collections.Counter() for label in labels}
    docs = collections.Counter(label for _, label in train)
    for text, label in train:
        words[label].update(WORD.findall(text.lower()))
    vocab = set().union(*words.values())
    totals = {label: sum(words[label].values()) for label in labels}
    out = []
    for text in texts:
        tokens = WORD.findall(text.lower())

        def score(label):
            s = math.log(docs[label] / len(train))
            for t in tokens:
                s += math.log((words[label][t] + 1) / (totals[label] + len(vocab)))
            return s

        out.append(max(labels, key=score))
    return out


def baselines(train, validation):
    labels = sorted({label for _, label in train} | {label for _, label in validation})
    gold = [label for _, label in validation]
    majority = collections.Counter(label for _, label in train).most_common(1)[0][0]
    always = [majority] * len(gold)
    nb = naive_bayes(train, [text for text, _ in validation], labels)
    return {
        "majority_class": {"label": majority, "macro_f1": macro_f1(gold, always, labels),
                           "accuracy": accuracy(gold, always)},
        "naive_bayes": {"macro_f1": macro_f1(gold, nb, labels), "accuracy": accuracy(gold, nb)},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--format", choices=["text", "json"], default="text")
    args = ap.parse_args()
    paths = [os.path.join(args.dir, f"{s}.jsonl") for s in ("train", "validation")]
    for p in paths:
        if not os.path.isfile(p):
            print(f"fortunes-baselines: {p}: no such file (run scripts/prepare-fortunes.py "
                  f"--out {args.dir} first)", file=sys.stderr)
            return 2
    train, validation = load(paths[0]), load(paths[1])
    if not train or not validation:
        print(f"fortunes-baselines: {args.dir}: an empty split", file=sys.stderr)
        return 2
    b = baselines(train, validation)
    if args.format == "json":
        print(json.dumps(b, indent=2))
    else:
        m, nb = b["majority_class"], b["naive_bayes"]
        print(f"Baselines on the validation split ({len(validation)} texts): majority class "
              f"('{m['label']}') macro-F1 {m['macro_f1']:.3f} (accuracy {m['accuracy']:.3f}); "
              f"naive Bayes over words macro-F1 {nb['macro_f1']:.3f} "
              f"(accuracy {nb['accuracy']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
