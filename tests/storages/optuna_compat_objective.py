#!/usr/bin/env python3
"""Command objective for optuna_compat_test.py: behaves by trial number so the study holds every
kind of trial (COMPLETE, FAIL with attributes, PRUNED out of memory, an infinite value, infinite
and NaN intermediate values)."""
import json
import math
import os
import sys

number = int(os.environ["TUNE_TRIAL_NUMBER"])
params = json.load(open(os.environ["TUNE_PARAMS_FILE"]))


def value(p):
    """The same function as optuna_compat_test.py's Optuna objective."""
    v = (math.log10(p["lr"]) + 3.0) ** 2 + p["wd"] + 0.1 * p["layers"] + p["units"] / 1000.0
    return v + (0.05 if p["opt"] == "sgd" else 0.0) + p["bs"] / 640.0


def report(step, v):
    print(json.dumps({"step": step, "value": v}), flush=True)


if number == 2:
    print("Traceback (most recent call last):\nValueError: bad batch", file=sys.stderr)
    sys.exit(3)
if number == 3:
    report(0, 2.5)
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
          file=sys.stderr)
    sys.exit(1)
if number == 4:
    # -inf, not +inf: Optuna 3.1's RDB best_trial orders by the value column, where any infinite
    # value is NULL, so it takes a +inf trial as the minimum (on files Optuna writes too).
    print('{"value": -Infinity}')
    sys.exit(0)
final = value(params)
for step in range(3):
    if number == 1 and step == 0:
        print('{"step": 0, "value": Infinity}', flush=True)
    elif number == 5 and step == 1:
        print('{"step": 1, "value": NaN}', flush=True)
    else:
        report(step, final + (2 - step) * 0.5)
print(json.dumps({"value": final}))
