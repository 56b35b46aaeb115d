#!/usr/bin/env python3
"""Trial program for the --jobs tests: TUNE_PARAM_MODE picks the behaviour, and every trial
appends "<start> <end> <pid>" to $JOBS_LOG (so a test can see which trials overlapped)."""
import json
import os
import signal
import sys
import time

mode = os.environ.get("TUNE_PARAM_MODE", "sleep")
seconds = float(os.environ.get("TUNE_PARAM_SECONDS", "1"))
start = time.time()
print(f"pid {os.getpid()} mode {mode}", file=sys.stderr, flush=True)
if mode == "segv":
    os.kill(os.getpid(), signal.SIGSEGV)
elif mode == "abort":
    os.abort()
elif mode == "kill9":
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(seconds)
with open(os.environ["JOBS_LOG"], "a") as log:
    log.write(f"{start} {time.time()} {os.getpid()}\n")
print(json.dumps({"value": seconds}))
