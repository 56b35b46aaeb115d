#!/usr/bin/env python3
"""What tracking costs a study (docs/benchmarks.md, "Tracking overhead"; issue 66).

Runs the same study of function-objective trials (sphere, 2 dimensions, 5 intermediate values
per trial, random sampler, SQLite storage) without tracking, with TensorBoard, and with MLflow
(a real `mlflow server` of tune's Python environment: SQLite backend, loopback) plus TensorBoard,
alternating, ROUNDS times each. Per run it reads tune's own summary ("This run: N trial(s)
finished in S s": the study's wall time, from the first trial to the last) and the process's
wall time, which adds the end of the run's wait for the tracker's queue. Prints a Markdown table
and, with --write, replaces the `tracking` section of docs/benchmarks.md.

    .venv/bin/python bench/tracking_overhead.py --tune build/tune [--trials 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(tmp: str):
    port = free_port()
    log = open(os.path.join(tmp, "server.log"), "ab")
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "1", "--backend-store-uri",
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


def run(tune: str, tmp: str, name: str, trials: int, tracking: dict | None) -> dict:
    config = {"direction": "minimize", "sampler": {"name": "random", "seed": 1},
              "objective": {"type": "function", "name": "sphere", "dims": 2, "n_steps": 5},
              "n_trials": trials, "progress": "off"}
    if tracking:
        config["tracking"] = tracking
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(config, f)
    start = time.perf_counter()
    r = subprocess.run([tune, "--study", name, "--config", path, "--storage",
                        f"sqlite:///{tmp}/{name}.db"], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    m = re.search(r"This run: (\d+) trial\(s\) finished in ([0-9.]+)s", r.stderr)
    missed = re.search(r"(\d+) of (\d+) trial\(s\) of this run not recorded", r.stderr)
    return {"study_s": float(m.group(2)), "wall_s": wall,
            "missed": int(missed.group(1)) if missed else 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tune", required=True)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="replace docs/benchmarks.md's section")
    args = ap.parse_args()
    tune = os.path.abspath(args.tune)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="tune-tracking-bench-") as tmp:
        server, uri = start_server(tmp)
        try:
            kinds = {"none": None,
                     "tensorboard": {"tensorboard": os.path.join(tmp, "tb")},
                     "mlflow+tensorboard": {"mlflow": {"uri": uri},
                                            "tensorboard": os.path.join(tmp, "tb")}}
            results = {k: [] for k in kinds}
            for i in range(args.rounds):
                for kind, tracking in kinds.items():
                    res = run(tune, tmp, f"{kind.replace('+', '_')}_{i}", args.trials, tracking)
                    results[kind].append(res)
                    print(kind, i, res, flush=True)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait()
    load1 = os.getloadavg()
    base = statistics.median(r["study_s"] for r in results["none"])
    lines = ["| Tracking | Study wall time (median) | vs none | Process wall time, with the "
             "queue's end (median) | Trials not recorded |", "|---|---|---|---|---|"]
    for kind, rs in results.items():
        study = statistics.median(r["study_s"] for r in rs)
        wall = statistics.median(r["wall_s"] for r in rs)
        lines.append(f"| {kind} | {study:.2f} s | {100 * (study - base) / base:+.1f} % | "
                     f"{wall:.2f} s | {sum(r['missed'] for r in rs)} |")
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    machine = (f"{platform.node()}: {cpu}, {os.cpu_count()} cores, load average "
               f"{load0[0]:.1f} at the start and {load1[0]:.1f} at the end; "
               f"{args.trials} trials per run, {args.rounds} runs of each, alternating")
    table = "\n".join(lines)
    print(table + "\n\n" + machine)
    if args.write:
        doc = os.path.join(HERE, "..", "docs", "benchmarks.md")
        with open(doc) as f:
            text = f.read()
        section = (f"<!-- tracking:begin -->\n{table}\n\nMachine: {machine}.\n"
                   f"<!-- tracking:end -->")
        text = re.sub(r"<!-- tracking:begin -->.*<!-- tracking:end -->", lambda _: section, text,
                      flags=re.S)
        with open(doc, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
