#!/usr/bin/env python3
"""Trial program for the command objective's memory section: records what it was started with
(argv, TUNE_PARAM_* values, its budget and CUDA_VISIBLE_DEVICES) in its trial directory, sleeps MEMORY_OBJECTIVE_SECONDS (default
0), reports a peak and a value."""
import json
import os
import sys
import time

record = {"argv": sys.argv[1:],
          "params": {k[len("TUNE_PARAM_"):].lower(): v for k, v in os.environ.items()
                     if k.startswith("TUNE_PARAM_")},
          "budget": os.environ.get("TUNE_MEMORY_BUDGET"),
          "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
with open(os.path.join(os.environ["TUNE_TRIAL_DIR"], "ran.json"), "w") as f:
    json.dump(record, f)
time.sleep(float(os.environ.get("MEMORY_OBJECTIVE_SECONDS", "0")))
print(json.dumps({"memory_peak": 123456789}))
print(json.dumps({"value": float(os.environ["TUNE_PARAM_BATCH_SIZE"])}))
