#!/usr/bin/env python3
"""A training script that runs out of memory above a batch size, for the command objective's
out-of-memory retries (tests/cli/command_oom_retry_cli_test.cpp). No training: it checks that the
three ways its params arrive agree (argv --batch-size/--grad-accum, TUNE_PARAM_*, the params
file), appends the attempt to $OOM_RETRY_LOG, reports step 0 (the micro-batch), and then either
runs out of memory (batch_size > $OOM_RETRY_FITS; as tune_trial's memory_guard reports it, or on
stderr as PyTorch prints it with $OOM_RETRY_STDERR) or reports steps 1 and 2 and the effective
batch as its value."""
import argparse
import json
import os
import sys

cli = argparse.ArgumentParser()
cli.add_argument("--batch-size", type=int, required=True)
cli.add_argument("--grad-accum", type=int, required=True)
a = cli.parse_args()
with open(os.environ["TUNE_PARAMS_FILE"], encoding="utf-8") as f:
    params = json.load(f)
env = (int(os.environ["TUNE_PARAM_BATCH_SIZE"]), int(os.environ["TUNE_PARAM_GRAD_ACCUM"]))
if not (a.batch_size, a.grad_accum) == env == (params["batch_size"], params["grad_accum"]):
    print(f"params disagree: argv {(a.batch_size, a.grad_accum)}, env {env}, file {params}",
          file=sys.stderr)
    sys.exit(3)
if os.path.exists(os.path.join(os.environ["TUNE_TRIAL_DIR"], "pruner.jsonl")):
    print("an earlier attempt's pruner answers are still there", file=sys.stderr)
    sys.exit(4)
with open(os.environ["OOM_RETRY_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps({"trial": int(os.environ["TUNE_TRIAL_NUMBER"]),
                          "batch_size": a.batch_size, "grad_accum": a.grad_accum}) + "\n")
print(json.dumps({"step": 0, "value": a.batch_size}), flush=True)
if a.batch_size > int(os.environ["OOM_RETRY_FITS"]):
    message = f"CUDA out of memory. Tried to allocate {a.batch_size} MiB."
    if os.environ.get("OOM_RETRY_STDERR"):
        print(f"torch.OutOfMemoryError: {message}", file=sys.stderr)
    else:
        print(json.dumps({"out_of_memory": f"OutOfMemoryError: {message}"}), flush=True)
    sys.exit(1)
for step in (1, 2):
    print(json.dumps({"step": step, "value": a.batch_size * step}), flush=True)
print(json.dumps({"value": a.batch_size * a.grad_accum}))
