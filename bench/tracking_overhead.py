#!/usr/bin/env python3
"""What tracking costs a study (docs/benchmarks.md, "Tracking overhead"; issue 66).

Runs the same study of function-objective trials (sphere, 2 dimensions, 5 intermediate values
per trial, random sampler, SQLite storage) without tracking, with TensorBoard, and with MLflow
(a real `mlflow server` of tune's Python environment: SQLite backend, loopback, its default 4
workers unless --server-workers) plus TensorBoard at tracking.mlflow.concurrency 1 and 4,
alternating, ROUNDS times each. Per run it reads tune's own summary ("This run: N trial(s)
finished in S s": the study's wall time, from the first trial to the last) and the process's
wall time, which adds the end of the run's wait for the tracker's queue; the MLflow rows' rate
is trials over the process's whole wall time. Prints a Markdown table and, with --write,
replaces the `tracking` section of docs/benchmarks.md.

    .venv/bin/python bench/tracking_overhead.py --tune build/tune [--trials 1000] [--rounds 3]

Two control rows tell tune's cost from the machine's: --tmpfs adds TensorBoard writing to
/dev/shm (the same work without the disk's file system: a directory and a file made per trial),
and --background-duty PCT adds the untracked study beside a process that is busy PCT % of every
millisecond (work of the tracker's size on the other core, none of it tune's). The "paired"
column is the median over rounds of each run's study time against the untracked run of the same
round, with its quartiles: the rounds alternate, so this cancels the machine's drift.
"""

from __future__ import annotations

import argparse
import sqlite3
import json
import os
import platform
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(tmp: str, workers: int, pin: bool):
    port = free_port()
    log = open(os.path.join(tmp, "server.log"), "ab")
    proc = subprocess.Popen((["taskset", "-c", "1"] if pin else []) + [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1",
                             "--port", str(port), "--workers", str(workers), "--backend-store-uri",
                             f"sqlite:///{tmp}/mlflow.db", "--default-artifact-root",
                             f"{tmp}/artifacts"], stdout=log, stderr=log, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    for _ in range(1200):
        try:
            with urllib.request.urlopen(uri + "/health", timeout=1):
                return proc, uri
        except OSError:
            time.sleep(0.1)
    raise SystemExit("mlflow server did not start")


def start_busy_work(duty_percent: float) -> subprocess.Popen:
    """A process busy `duty_percent` of every millisecond, asleep for the rest."""
    code = ("import time\n"
            f"busy = {duty_percent / 100 * 1e-3!r}\n"
            "while True:\n"
            "    t = time.perf_counter()\n"
            "    while time.perf_counter() - t < busy: pass\n"
            "    time.sleep(max(0.0, 1e-3 - busy))\n")
    return subprocess.Popen([sys.executable, "-c", code])


def study_seconds(db: str) -> float:
    """The study's wall time from its storage: the first trial's start to the last one's end."""
    with sqlite3.connect(db) as c:
        first, last = c.execute("select min(datetime_start), max(datetime_complete) "
                                "from trials").fetchone()
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    return (datetime.strptime(last, fmt) - datetime.strptime(first, fmt)).total_seconds()


def run(tune: str, tmp: str, name: str, trials: int, tracking: dict | None,
        trial_seconds: float, pin: bool) -> dict:
    if trial_seconds > 0:  # a command objective: a program that sleeps, then prints its value
        objective = {"type": "command",
                     "argv": ["/bin/sh", "-c", f'sleep {trial_seconds}; echo "{{x}}"']}
        space = {"x": {"type": "float", "low": 0, "high": 1}}
    else:
        objective = {"type": "function", "name": "sphere", "dims": 2, "n_steps": 5}
        space = None
    config = {"direction": "minimize", "sampler": {"name": "random", "seed": 1},
              "objective": objective, "n_trials": trials, "progress": "off"}
    if space:
        config["search_space"] = space
    if tracking:
        config["tracking"] = tracking
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(config, f)
    start = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    db = f"{tmp}/{name}.db"
    r = subprocess.run((["taskset", "-c", "0"] if pin else []) +
                       [tune, "--study", name, "--config", path, "--storage", f"sqlite:///{db}"],
                       capture_output=True, text=True)
    wall = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    missed = re.search(r"(\d+) of (\d+) trial\(s\) of this run not recorded", r.stderr)
    return {"study_s": study_seconds(db), "wall_s": wall, "cpu_s": cpu,
            "missed": int(missed.group(1)) if missed else 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tune", required=True)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-workers", type=int, default=4, help="mlflow server --workers")
    ap.add_argument("--concurrency", default="1,4",
                    help="tracking.mlflow.concurrency values; empty: no MLflow rows, no server")
    ap.add_argument("--trial-seconds", type=float, default=0,
                    help="> 0: command-objective trials that sleep this long, instead of the "
                         "function objective")
    ap.add_argument("--section", default="tracking", help="the docs/benchmarks.md markers")
    ap.add_argument("--pin", action="store_true",
                    help="tune (and its trials) on CPU 0, the MLflow server on CPU 1: the study's "
                         "time then shows tune's own cost, not the server's share of the cores")
    ap.add_argument("--tmpfs", action="store_true",
                    help="a row with TensorBoard's directory on /dev/shm")
    ap.add_argument("--background-duty", type=float, default=0,
                    help="> 0: a row without tracking beside a process busy this percentage of "
                         "every millisecond")
    ap.add_argument("--write", action="store_true", help="replace docs/benchmarks.md's section")
    args = ap.parse_args()
    tune = os.path.abspath(args.tune)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="tune-tracking-bench-") as tmp, \
            tempfile.TemporaryDirectory(prefix="tune-tracking-bench-",
                                        dir="/dev/shm" if args.tmpfs else None) as shm:
        concurrency = [c for c in args.concurrency.split(",") if c.strip()]
        server, uri = (start_server(tmp, args.server_workers, args.pin) if concurrency
                       else (None, ""))
        try:
            kinds = {"none": None,
                     "tensorboard": {"tensorboard": os.path.join(tmp, "tb")},
                     **({"tensorboard on tmpfs": {"tensorboard": os.path.join(shm, "tb")}}
                        if args.tmpfs else {}),
                     **({f"none, beside {args.background_duty:g} % busy work": None}
                        if args.background_duty > 0 else {}),
                     **{f"mlflow+tensorboard, concurrency {c}": {
                         "mlflow": {"uri": uri, "concurrency": int(c)},
                         "tensorboard": os.path.join(tmp, "tb")}
                        for c in concurrency}}
            results = {k: [] for k in kinds}
            for i in range(args.rounds):
                for kind, tracking in kinds.items():
                    name = re.sub(r"[^a-z0-9]+", "_", kind)
                    busy = (start_busy_work(args.background_duty)
                            if kind.startswith("none, beside") else None)
                    try:
                        res = run(tune, tmp, f"{name}_{i}", args.trials, tracking,
                                  args.trial_seconds, args.pin)
                    finally:
                        if busy:
                            busy.kill()
                            busy.wait()
                    results[kind].append(res)
                    print(kind, i, res, flush=True)
        finally:
            if server:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait()
    load1 = os.getloadavg()
    base = statistics.median(r["study_s"] for r in results["none"])
    lines = ["| Tracking | Study wall time (median) | vs none | Paired: median (quartiles) | "
             "tune's CPU time (median) | "
             "Process wall time, with the queue's end (median) | Trials recorded per second | "
             "Trials not recorded |", "|---|---|---|---|---|---|---|---|"]
    base_runs = [r["study_s"] for r in results["none"]]
    for kind, rs in results.items():
        study = statistics.median(r["study_s"] for r in rs)
        wall = statistics.median(r["wall_s"] for r in rs)
        rate = f"{args.trials / wall:.0f}" if kind.startswith("mlflow") else "–"
        cpu = statistics.median(r["cpu_s"] for r in rs)
        paired = sorted(100 * (r["study_s"] / b - 1) for r, b in zip(rs, base_runs))
        n = len(paired)
        paired_cell = ("–" if kind == "none" else
                       f"{paired[n // 2]:+.1f} % ({paired[n // 4]:+.1f} to "
                       f"{paired[(3 * n) // 4]:+.1f} %)")
        lines.append(f"| {kind} | {study:.3f} s | {100 * (study - base) / base:+.1f} % | "
                     f"{paired_cell} | "
                     f"{cpu:.2f} s | {wall:.2f} s | {rate} | {sum(r['missed'] for r in rs)} |")
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    machine = (f"{platform.node()}: {cpu}, {os.cpu_count()} cores, load average "
               f"{load0[0]:.1f} at the start and {load1[0]:.1f} at the end; "
               f"{args.trials} trials per run, {args.rounds} runs of each, alternating; " +
               (f"mlflow server --workers {args.server_workers}; " if concurrency else "") +
               (f"command trials of {args.trial_seconds} s" if args.trial_seconds > 0
                else "function trials") +
               ("; tune pinned to CPU 0, the server to CPU 1" if args.pin else ""))
    table = "\n".join(lines)
    print(table + "\n\n" + machine)
    if args.write:
        doc = os.path.join(HERE, "..", "docs", "benchmarks.md")
        with open(doc) as f:
            text = f.read()
        tag = args.section
        section = (f"<!-- {tag}:begin -->\n{table}\n\nMachine: {machine}.\n"
                   f"<!-- {tag}:end -->")
        text = re.sub(f"<!-- {tag}:begin -->.*<!-- {tag}:end -->", lambda _: section, text,
                      flags=re.S)
        with open(doc, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
