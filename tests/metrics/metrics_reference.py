#!/usr/bin/python3
"""The train objective's metrics against scikit-learn on fixed predictions.

    metrics_reference.py --driver BUILD/tests/tune_metrics_driver [--cases 300]

Generates labelled predictions (2, 3 and 5 classes; probabilities from small integer weights, so
that ties are frequent; classes that are never predicted or never occur), runs the driver
(metrics_driver.cpp: tune's ComputeClassificationMetrics) on them and compares every metric with
scikit-learn's: accuracy_score, f1_score (macro, micro, weighted and per class, zero_division=0),
matthews_corrcoef and roc_auc_score (two classes: of class 1's probability; more: one-vs-rest,
macro; where scikit-learn raises, tune must say it cannot). Prints a table of the first cases
and a summary line. Exit 0: every value within 1e-9; 1: differences; 77: skipped (no sklearn).
"""
import argparse
import json
import random
import subprocess
import sys

try:
    import numpy as np
    from sklearn import metrics as sk
except ImportError as e:
    print(f"SKIPPED: {e.name} is missing (Debian: python3-sklearn)")
    sys.exit(77)


def make_case(rng):
    k = rng.choice([2, 2, 3, 5])
    n = rng.choice([1, 2, 5, 12, 40, 200])
    # Weights favour the true class now and then (a model that learned something).
    labels, probabilities = [], []
    skew = rng.random()
    absent = rng.randrange(k) if rng.random() < 0.2 else None  # a class with no example
    for _ in range(n):
        y = rng.randrange(k)
        while absent is not None and y == absent and k > 1:
            y = rng.randrange(k)
        w = [rng.randint(1, 4) for _ in range(k)]
        if rng.random() < skew:
            w[y] += rng.randint(0, 3)
        total = float(sum(w))
        labels.append(y)
        probabilities.append([x / total for x in w])
    return {"labels": labels, "probabilities": probabilities, "num_classes": k}


def reference(case):
    k = case["num_classes"]
    y = np.array(case["labels"])
    p = np.array(case["probabilities"])
    pred = p.argmax(axis=1)
    out = {
        "accuracy": sk.accuracy_score(y, pred),
        "macro_f1": sk.f1_score(y, pred, average="macro", zero_division=0),
        "micro_f1": sk.f1_score(y, pred, average="micro", zero_division=0),
        "weighted_f1": sk.f1_score(y, pred, average="weighted", zero_division=0),
        "mcc": sk.matthews_corrcoef(y, pred),
        "class_f1": list(sk.f1_score(y, pred, average=None, labels=list(range(k)),
                                     zero_division=0)),
        "predictions": pred.tolist(),
    }
    try:
        if k == 2:
            out["auroc"] = sk.roc_auc_score(y, p[:, 1])
        else:
            out["auroc"] = sk.roc_auc_score(y, p, multi_class="ovr", average="macro",
                                            labels=list(range(k)))
        if not np.isfinite(out["auroc"]):
            out["auroc"] = None
    except ValueError:
        out["auroc"] = None  # a class without examples (or with all of them)
    return out


def differs(a, b):
    if a is None or b is None:
        return a is not b
    if isinstance(a, list):
        return len(a) != len(b) or any(differs(x, y) for x, y in zip(a, b))
    return abs(a - b) > 1e-9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--driver", required=True)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=41)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    cases = [make_case(rng) for _ in range(args.cases)]
    payload = "".join(json.dumps(c) + "\n" for c in cases)
    proc = subprocess.run([args.driver], input=payload.encode(), capture_output=True)
    if proc.returncode != 0:
        print(f"FAIL: {args.driver}: exit {proc.returncode}: {proc.stderr.decode()}")
        return 1
    got = [json.loads(l) for l in proc.stdout.decode().splitlines()]
    names = ["accuracy", "macro_f1", "micro_f1", "weighted_f1", "mcc", "auroc", "class_f1",
             "predictions"]
    print("case  k    n  " + "  ".join(f"{n:>11}" for n in names[:6]) + "   (scikit-learn)")
    problems, undefined = [], 0
    for i, (case, g) in enumerate(zip(cases, got)):
        want = reference(case)
        undefined += want["auroc"] is None
        if i < 12:
            row = "  ".join("       none" if want[n] is None else f"{want[n]:11.6f}"
                            for n in names[:6])
            print(f"{i:4d} {case['num_classes']:2d} {len(case['labels']):4d}  {row}")
        for n in names:
            if differs(g.get(n), want[n]):
                problems.append(f"case {i} {n}: tune {g.get(n)} scikit-learn {want[n]}")
    if len(got) != len(cases):
        problems.append(f"{len(got)} outputs for {len(cases)} cases")
    print(f"metrics: {len(cases)} cases (2, 3 and 5 classes; {undefined} without an AUROC), "
          f"{len(cases) * len(names)} values, {len(problems)} differences from scikit-learn")
    for p in problems[:10]:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
