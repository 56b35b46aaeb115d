#!/usr/bin/env python3
"""A synthetic trial for the packing benchmark (bench/run_packing_bench.sh): it behaves like a
fine-tuning script on a shared card, without training anything.

It holds its configuration's true peak on the simulated card of the run (TUNE_SIMULATED_CARD,
through libtune_train.so's C entry point) for a time proportional to the configuration's
training FLOPs, then reports {"memory_peak": ...} and {"value": ...}. The true peak is tune's
estimate (`tune estimate`, CUDA device model) times a per-model factor between 0.9 and 1.15 that
tune is not told, so its calibration has something to learn. A configuration that does not fit
the card's free memory, or its own budget (TUNE_MEMORY_BUDGET, set with --jobs), fails the way
PyTorch does: "CUDA out of memory" on stderr, exit status 1.

Environment: TUNE_PARAM_* (model, batch_size, max_length, grad_accum, learning_rate, ...),
TUNE_BINARY (the tune to ask for estimates), BENCH_SECONDS_PER_PFLOP (time scale),
BENCH_ESTIMATE_CACHE (a JSON file shared by the trials of a run).
"""
import ctypes
import fcntl
import json
import math
import os
import subprocess
import sys
import time

# The factor tune's estimate misses for each model (not told to tune).
TRUE_FACTOR = {
    "bert-base-uncased": 1.05,
    "bert-large-uncased": 1.12,
    "roberta-base": 0.95,
    "roberta-large": 1.15,
    "microsoft/deberta-v3-base": 1.08,
    "microsoft/deberta-v3-large": 1.10,
    "xlm-roberta-base": 0.92,
}
PRECISION = "bf16"


def param(name, kind=str, default=None):
    value = os.environ.get("TUNE_PARAM_" + name.upper())
    return default if value is None else kind(value)


def estimate(model, batch, length, accum, checkpointing, head):
    """tune's estimate of the configuration (cached per run), as {device_peak, num_parameters}.
    `head`: the classifier's estimator flags (--classifier-layers, --dropout) when the trial has
    those params, so that the estimate is of the very configuration tune plans."""
    key = f"{model}|{batch}|{length}|{accum}|{checkpointing}|{'|'.join(head)}"
    cache = os.environ.get("BENCH_ESTIMATE_CACHE")
    if cache and os.path.exists(cache):
        with open(cache) as f:
            fcntl.flock(f, fcntl.LOCK_SH)
            known = json.load(f)
        if key in known:
            return known[key]
    argv = [os.environ["TUNE_BINARY"], "estimate", "--model", model, "--batch-size", str(batch),
            "--max-length", str(length), "--grad-accum", str(accum), "--precision", PRECISION,
            "--format", "json"]
    if checkpointing:
        argv.append("--gradient-checkpointing")
    argv += head
    out = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
    result = {"device_peak": out["device_peak"], "num_parameters": out["num_parameters"]}
    if cache:
        with open(cache, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            text = f.read()
            known = json.loads(text) if text.strip() else {}
            known[key] = result
            f.seek(0)
            f.truncate()
            json.dump(known, f)
    return result


def out_of_memory(tried, free):
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
          f"{tried / 2**20:.2f} MiB. GPU 0 has {free / 2**20:.2f} MiB free.", file=sys.stderr)
    sys.exit(1)


def main():
    model = param("model")
    batch = param("batch_size", int)
    length = param("max_length", int)
    accum = param("grad_accum", int, 1)
    checkpointing = param("gradient_checkpointing", str, "false").lower() == "true"
    head = []
    for name in ("classifier_layers", "dropout"):
        value = param(name)
        if value is not None:
            head += ["--" + name.replace("_", "-"), value]
    e = estimate(model, batch, length, accum, checkpointing, head)
    peak = int(e["device_peak"] * TRUE_FACTOR.get(model, 1.0))
    budget = os.environ.get("TUNE_MEMORY_BUDGET")
    if budget is not None and peak > int(budget):
        out_of_memory(peak - int(budget), int(budget))  # capped at its reservation: only it fails
    card = os.environ["TUNE_SIMULATED_CARD"]
    capacity = int(os.environ["TUNE_SIMULATED_CARD_BYTES"])
    lib = ctypes.CDLL(os.path.join(os.environ["TUNE_LIBRARY_DIR"], "libtune_train.so"))
    lib.tune_simulated_card_charge.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64]
    lib.tune_simulated_card_used.argtypes = [ctypes.c_char_p, ctypes.c_int64]
    lib.tune_simulated_card_used.restype = ctypes.c_int64
    if lib.tune_simulated_card_charge(card.encode(), capacity, peak) != 0:
        out_of_memory(peak, capacity - lib.tune_simulated_card_used(card.encode(), capacity))
    # Training FLOPs of one epoch-equivalent: 6 x parameters x tokens (x 1.33 with checkpointing).
    flops = 6.0 * e["num_parameters"] * batch * accum * length * (4 / 3 if checkpointing else 1)
    time.sleep(flops / 1e15 * float(os.environ.get("BENCH_SECONDS_PER_PFLOP", "1.0")))
    print(json.dumps({"memory_peak": peak}))
    # A smooth made-up quality: larger models and a learning rate near 3e-5 do better.
    lr = param("learning_rate", float, 3e-5)
    quality = 0.8 + 0.02 * math.log10(e["num_parameters"] / 1e8) - 0.01 * abs(math.log10(lr / 3e-5))
    print(json.dumps({"value": quality}), flush=True)


if __name__ == "__main__":
    main()
