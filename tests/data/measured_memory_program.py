#!/usr/bin/env python3
"""A training script tune has no formula for, without training anything: its peak is
a + b*B*T + c*B*T^2 (MEASURED_A, _B, _C; plus a deterministic +-1% wobble per shape), reached on
the simulated card of the run (TUNE_SIMULATED_CARD, through libtune_train.so). A peak the card
or the trial's reservation (TUNE_MEMORY_BUDGET) cannot hold is an out-of-memory error, as
PyTorch's; otherwise it reports {"memory_peak": peak} and a value that prefers more tokens."""
import ctypes
import json
import math
import os
import sys
import time

B = int(os.environ["TUNE_PARAM_BATCH_SIZE"])
T = int(os.environ["TUNE_PARAM_MAX_LENGTH"])
a, b, c = (float(os.environ[k]) for k in ("MEASURED_A", "MEASURED_B", "MEASURED_C"))
wobble = 1 + 0.01 * math.sin(7 * B + 3 * T)
peak = int((a + b * B * T + c * B * T * T) * wobble)

budget = int(os.environ.get("TUNE_MEMORY_BUDGET", "0"))
card = os.environ.get("TUNE_SIMULATED_CARD")
lib = ctypes.CDLL(os.path.join(os.environ["TUNE_LIBRARY_DIR"], "libtune_train.so"))
lib.tune_simulated_card_charge.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64]
capacity = int(os.environ["TUNE_SIMULATED_CARD_BYTES"])
if (budget and peak > budget) or \
        lib.tune_simulated_card_charge(card.encode(), capacity, peak) != 0:
    print(f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {peak} bytes",
          file=sys.stderr)
    sys.exit(1)
time.sleep(float(os.environ.get("MEASURED_SECONDS", "0.05")))
lib.tune_simulated_card_charge(card.encode(), capacity, -peak)
print(json.dumps({"memory_peak": peak}))
print(json.dumps({"value": -math.log(B * T)}))
