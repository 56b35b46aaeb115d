#!/usr/bin/python3
"""The train objective's metrics against scikit-learn and SciPy on fixed predictions.

    metrics_reference.py --driver BUILD/tests/tune_metrics_driver [--cases 300]

Single-label: labelled predictions (2, 3 and 5 classes; probabilities from small integer
weights, so that ties are frequent; classes that are never predicted or never occur), compared
with scikit-learn's accuracy_score, f1_score (macro, micro, weighted and per class,
zero_division=0), matthews_corrcoef and roc_auc_score (two classes: of class 1's probability;
more: one-vs-rest, macro; where scikit-learn raises, tune must say it cannot).
Multi-label: indicator targets and probabilities in eighths (ties with the threshold; labels
never true, always true or never predicted), the prediction probability >= threshold, compared
with accuracy_score (subset accuracy), f1_score (macro, micro, weighted, per label) and
roc_auc_score (macro over labels).
Regression: targets and predictions rounded to tenths (ties for the ranks; constant ones),
compared with mean_squared_error, its root, mean_absolute_error, r2_score and SciPy's pearsonr
and spearmanr (undefined: None).
The driver (metrics_driver.cpp) runs tune's metrics. Prints a table of the first cases of each
kind and a summary line per kind. Exit 0: every value within 1e-9; 1: differences; 77: skipped
(no sklearn).
"""
import argparse
import json
import random
import subprocess
import sys

try:
    import warnings

    import numpy as np
    from scipy import stats
    from sklearn import metrics as sk
    warnings.simplefilter("ignore")  # constant inputs: SciPy warns and returns nan
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
        "balanced_accuracy": sk.balanced_accuracy_score(y, pred),
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


def make_multi_label_case(rng):
    k = rng.choice([2, 3, 5])
    n = rng.choice([1, 3, 8, 30, 120])
    never = rng.randrange(k) if rng.random() < 0.2 else None   # a label on no example
    always = rng.randrange(k) if rng.random() < 0.1 else None  # a label on every example
    targets, probabilities = [], []
    skill = rng.random()
    for _ in range(n):
        row = [1 if rng.random() < 0.35 else 0 for _ in range(k)]
        if never is not None:
            row[never] = 0
        if always is not None:
            row[always] = 1
        # Eighths: exact in float32, so ties with the threshold and between scores are exact.
        p = [rng.randint(0, 8) / 8 for _ in range(k)]
        p = [min(1.0, x + 0.375) if y and rng.random() < skill else x for x, y in zip(p, row)]
        targets.append(row)
        probabilities.append(p)
    return {"kind": "multi_label", "targets": targets, "probabilities": probabilities,
            "threshold": rng.choice([0.5, 0.5, 0.25, 0.625])}


def make_regression_case(rng):
    n = rng.choice([2, 3, 10, 40, 200])
    targets = [round(rng.gauss(2.0, 1.5), 1) for _ in range(n)]
    noise = rng.choice([0.0, 0.3, 1.0, 5.0])
    predictions = [round(t * rng.choice([1.0, 0.8]) + rng.gauss(0, noise), 1) for t in targets]
    r = rng.random()
    if r < 0.05:
        predictions = [1.5] * n  # constant predictions: no correlation
    elif r < 0.1:
        targets = [3.0] * n      # constant targets: R2's special case, no correlation
    return {"kind": "regression", "targets": targets, "predictions": predictions}


def multi_label_reference(case):
    y = np.array(case["targets"])
    p = np.array(case["probabilities"])
    pred = (p >= case["threshold"]).astype(int)
    out = {
        "accuracy": sk.accuracy_score(y, pred),
        "macro_f1": sk.f1_score(y, pred, average="macro", zero_division=0),
        "micro_f1": sk.f1_score(y, pred, average="micro", zero_division=0),
        "weighted_f1": sk.f1_score(y, pred, average="weighted", zero_division=0),
        "class_f1": list(sk.f1_score(y, pred, average=None, zero_division=0)),
    }
    try:
        out["auroc"] = sk.roc_auc_score(y, p, average="macro")
        if not np.isfinite(out["auroc"]):
            out["auroc"] = None
    except ValueError:
        out["auroc"] = None  # a label on no example or on all of them
    return out


def regression_reference(case):
    y = np.array(case["targets"], dtype=float)
    p = np.array(case["predictions"], dtype=float)
    mse = sk.mean_squared_error(y, p)

    def finite(v):
        return float(v) if np.isfinite(v) else None
    return {
        "mse": mse,
        "rmse": float(np.sqrt(mse)),
        "mae": sk.mean_absolute_error(y, p),
        "r2": sk.r2_score(y, p),
        "pearson": finite(stats.pearsonr(y, p)[0]) if len(y) > 1 else None,
        "spearman": finite(stats.spearmanr(y, p)[0]) if len(y) > 1 else None,
    }


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
    kinds = [
        ("single-label", make_case, reference,
         ["accuracy", "macro_f1", "micro_f1", "weighted_f1", "balanced_accuracy", "mcc", "auroc",
          "class_f1", "predictions"], "2, 3 and 5 classes"),
        ("multi-label", make_multi_label_case, multi_label_reference,
         ["accuracy", "macro_f1", "micro_f1", "weighted_f1", "auroc", "class_f1"],
         "2, 3 and 5 labels, thresholds 0.25-0.625"),
        ("regression", make_regression_case, regression_reference,
         ["mse", "rmse", "mae", "r2", "pearson", "spearman"], "2-200 examples, ties"),
    ]
    failed = False
    for kind, make, ref, names, what in kinds:
        cases = [make(rng) for _ in range(args.cases)]
        payload = "".join(json.dumps(c) + "\n" for c in cases)
        proc = subprocess.run([args.driver], input=payload.encode(), capture_output=True)
        if proc.returncode != 0:
            print(f"FAIL: {args.driver}: exit {proc.returncode}: {proc.stderr.decode()}")
            return 1
        got = [json.loads(l) for l in proc.stdout.decode().splitlines()]
        shown = [n for n in names if n not in ("class_f1", "predictions")]
        print(f"{kind}: case    n  " + "  ".join(f"{n:>11}" for n in shown) +
              "   (reference)")
        problems, undefined = [], 0
        for i, (case, g) in enumerate(zip(cases, got)):
            want = ref(case)
            undefined += any(want[n] is None for n in shown)
            if i < 8:
                row = "  ".join("       none" if want[n] is None else f"{want[n]:11.6f}"
                                for n in shown)
                size = len(case.get("labels", case.get("targets")))
                print(f"{' ' * len(kind)}  {i:4d} {size:4d}  {row}")
            for n in names:
                if differs(g.get(n), want[n]):
                    problems.append(f"{kind} case {i} {n}: tune {g.get(n)} reference {want[n]}")
        if len(got) != len(cases):
            problems.append(f"{kind}: {len(got)} outputs for {len(cases)} cases")
        print(f"metrics, {kind}: {len(cases)} cases ({what}; {undefined} with an undefined "
              f"value), {len(cases) * len(names)} values, {len(problems)} differences from "
              f"scikit-learn/SciPy")
        for p in problems[:10]:
            print("  " + p)
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
