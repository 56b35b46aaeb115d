#!/usr/bin/env python3
"""A synthetic trial for the packing benchmark (bench/run_packing_bench.sh, issue 32): it behaves
like a fine-tuning script on a shared GPU, without training anything.

On the simulated card of the run (TUNE_SIMULATED_CARD, through libtune_train.so's
tune_simulated_trial_run) it first starts up -- imports and loads its model, holding the weights,
the optimizer state and the CUDA context -- then reaches its activation peak at its first
micro-step, then runs its micro-steps, whose GPU time the card stretches while other trials
compute beside it (src/memory/simulated_card.h). An out-of-memory error at the first step comes
after the start-up, as PyTorch's does: "CUDA out of memory" on stderr, exit status 1; the process
then frees its memory as a crashed one does. So does a trial over its own budget
(TUNE_MEMORY_BUDGET, set with --jobs).

The true peak is tune's estimate (`tune estimate`, CUDA device model) times a per-model factor
between 0.9 and 1.15 that tune is not told, so its calibration has something to learn. Every
constant below is stated with its source in docs/benchmarks.md, section "packing".

Environment: TUNE_PARAM_* (model, batch_size, max_length, grad_accum, learning_rate, ...),
TUNE_BINARY (the tune to ask for estimates), BENCH_TIME_SCALE (real seconds per simulated
second), BENCH_ESTIMATE_CACHE (a JSON file shared by the trials of a run).
"""
import ctypes
import fcntl
import json
import math
import os
import subprocess
import sys

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

# The simulated GPU and training loop (docs/benchmarks.md, "packing": the sources).
PEAK_FLOPS = 125e12         # NVIDIA A10 (24 GB): dense BF16 tensor-core peak
MFU = 0.40                  # the fraction of that peak a fine-tuning step reaches
HOST_SECONDS = 0.010        # per micro-step: Python, kernel launches, the data loader
IMPORT_SECONDS = 4.4        # `import torch; from transformers import ...`
LOAD_SECONDS_PER_110M = 2.6  # from_pretrained, per 110 M parameters (bert-base: 2.6 s)
SEQUENCES = 4000            # sequences each trial trains on (2 epochs of 2,000)


def param(name, kind=str, default=None):
    value = os.environ.get("TUNE_PARAM_" + name.upper())
    return default if value is None else kind(value)


def estimate(model, batch, length, accum, checkpointing, head):
    """tune's estimate of the configuration (cached per run): device_peak, num_parameters and
    the start-up's share (context, weights, optimizer state). `head`: the classifier's
    estimator flags (--classifier-layers, --dropout) when the trial has those params."""
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
    b = out["breakdown"]
    result = {"device_peak": out["device_peak"], "num_parameters": out["num_parameters"],
              "static": out["context"] + b["weights"] + b["optimizer_state"]}
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


def seconds_since_start():
    """Real seconds since this process started (/proc), counted in the start-up."""
    with open("/proc/self/stat") as f:
        started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime") as f:
        return max(0.0, float(f.read().split()[0]) - started)


def out_of_memory(message):
    print(f"torch.OutOfMemoryError: CUDA out of memory. {message}", file=sys.stderr)
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
    factor = TRUE_FACTOR.get(model, 1.0)
    peak = int(e["device_peak"] * factor)
    static = min(peak, int(e["static"] * factor))
    budget = os.environ.get("TUNE_MEMORY_BUDGET")
    card = os.environ["TUNE_SIMULATED_CARD"]
    capacity = int(os.environ["TUNE_SIMULATED_CARD_BYTES"])
    scale = float(os.environ.get("BENCH_TIME_SCALE", "1.0"))
    # Training FLOPs per micro-step: 6 x parameters x tokens (x 4/3 with checkpointing).
    flops = 6.0 * e["num_parameters"] * batch * length * (4 / 3 if checkpointing else 1)
    gpu = flops / (PEAK_FLOPS * MFU)
    startup = IMPORT_SECONDS + LOAD_SECONDS_PER_110M * e["num_parameters"] / 110e6
    lib = ctypes.CDLL(os.path.join(os.environ["TUNE_LIBRARY_DIR"], "libtune_train.so"))
    run = lib.tune_simulated_trial_run
    run.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                    ctypes.c_double, ctypes.c_double, ctypes.c_double, ctypes.c_double,
                    ctypes.c_double, ctypes.c_double, ctypes.POINTER(ctypes.c_double)]
    seconds = ctypes.c_double(0.0)
    if budget is not None and peak > int(budget):
        # Over its own reservation (capped there, only it fails): it starts up like any trial,
        # then fails at its first step.
        code = run(card.encode(), capacity, static, static, startup, 0.0, gpu, HOST_SECONDS,
                   scale, seconds_since_start(), ctypes.byref(seconds))
        if code == 0:
            out_of_memory(f"Tried to allocate beyond the trial's budget of {budget} bytes.")
    else:
        code = run(card.encode(), capacity, static, peak, startup, SEQUENCES / batch, gpu,
                   HOST_SECONDS, scale, seconds_since_start(), ctypes.byref(seconds))
    if code == 1:
        out_of_memory("The simulated card is full (see the line above).")
    if code != 0:
        sys.exit(2)
    print(json.dumps({"memory_peak": peak}))
    # A smooth made-up quality: larger models, a learning rate near 3e-5 and an effective batch
    # near 32 do better.
    lr = param("learning_rate", float, 3e-5)
    quality = (0.8 + 0.02 * math.log10(e["num_parameters"] / 1e8)
               - 0.01 * abs(math.log10(lr / 3e-5)) - 0.005 * abs(math.log2(batch * accum / 32)))
    print(json.dumps({"value": quality}), flush=True)


if __name__ == "__main__":
    main()
