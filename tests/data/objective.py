#!/usr/bin/env python3
"""Test program for the command objective. The first argument picks the behaviour."""
import json
import os
import sys
import time

mode = sys.argv[1]
if mode == "ok":  # value = x^2 from the TUNE_PARAM_X environment variable
    x = float(os.environ["TUNE_PARAM_X"])
    print("some log line")
    print(json.dumps({"value": x * x}))
elif mode == "args":  # record argv and the params file, report 1
    with open(os.path.join(os.environ["TUNE_TRIAL_DIR"], "argv.json"), "w") as f:
        json.dump({"argv": sys.argv[2:], "params": json.load(open(os.environ["TUNE_PARAMS_FILE"]))}, f)
    print(json.dumps({"value": 1.0}))
elif mode == "steps":  # intermediate reports, then a final value
    for step in range(3):
        print(json.dumps({"step": step, "value": 1.0 / (step + 1)}), flush=True)
    print(json.dumps({"value": 0.25}))
elif mode == "crash":
    print("Traceback (most recent call last):\nValueError: boom", file=sys.stderr)
    sys.exit(3)
elif mode == "segv":
    os.kill(os.getpid(), 11)
elif mode == "sleep":
    time.sleep(30)
    print(json.dumps({"value": 1.0}))
elif mode == "sleep_pid":  # append the pid to argv[2], sleep, then value = x^2 (a long trial)
    with open(sys.argv[2], "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else 30)
    x = float(os.environ["TUNE_PARAM_X"])
    print(json.dumps({"value": x * x}))
elif mode == "oom":
    print("Traceback (most recent call last):", file=sys.stderr)
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 360.00 MiB. "
          "GPU 0 has a total capacity of 23.56 GiB of which 259.88 MiB is free.", file=sys.stderr)
    sys.exit(1)
elif mode == "silent":
    pass
elif mode == "resultfile":
    with open(os.environ["TUNE_RESULT_FILE"], "w") as f:
        json.dump({"value": 7.5}, f)
elif mode == "inf":
    print('{"value": Infinity}')
elif mode == "badbytes":  # invalid UTF-8 on stderr and stdout, then a failure
    sys.stdout.buffer.write(b'{"step": 0, "value": 0.5} \xff\n')
    sys.stderr.buffer.write(b"Traceback: bad \xff\xfe bytes \xc3\n")
    sys.exit(3)
elif mode == "nan":  # json.dumps(float("nan")): a NaN final value
    print(json.dumps({"value": float("nan")}))
elif mode == "nan_str":  # the final value as str(float) writes it
    print('{"value": nan}')
elif mode == "nan_file":  # print(float("nan"), file=...): a bare nan in the result file
    with open(os.environ["TUNE_RESULT_FILE"], "w") as f:
        print(float("nan"), file=f)
elif mode == "nan_steps":  # NaN and infinite intermediate values, then a final value
    for step, v in enumerate([0.5, float("inf"), float("nan")]):
        print(json.dumps({"step": step, "value": v}), flush=True)
    print(json.dumps({"value": 0.25}))
else:
    sys.exit("unknown mode " + mode)
