#!/usr/bin/env python3
"""Packing benchmark (issues 17 and 32): the same list of configurations of the user reports'
criteria space (configs/criteria.json, heavy/base), brought to COMPLETE on one simulated shared
24 GiB card by PAR = 1-4 independent tune workers on one study (no ledger, no admission, as the
user reports ran them; a configuration that ran out of memory is re-enqueued, at most 5 attempts)
and by `tune --jobs auto` (admission, levers, reservations, calibration, shrink to start, the
compute rule max_busy). Every trial is bench/synthetic_trial.py on the card of
src/memory/simulated_card.h: compute is shared and memory is reached late.

One run: a list of --trials configurations drawn by tune's random sampler with the run's seed,
enqueued in every mode's study. Three runs (three seeds); each run's table and the medians go to
docs/benchmarks.md (section "packing"), with the constants and the verdict against the goal.
Then, with TPE instead of the list: best value so far against wall clock for --jobs auto and the
best fixed PAR.

Usage: bench/packing_bench.py --tune build/tune [--trials 300] [--seeds 1,2,3] [--time-scale S]
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

import benchdoc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CARD_BYTES = 24 * 2**30
ATTEMPTS = 5  # a configuration that ran out of memory runs at most this often (retry_oom 4)
AUTO = "--jobs auto"


class Mode:
    def __init__(self, name, par=None, max_busy=1.0, min_micro_batch=4, shrink=True):
        self.name, self.par, self.max_busy = name, par, max_busy
        self.min_micro_batch, self.shrink = min_micro_batch, shrink


MODES = {
    "1": Mode("PAR=1", par=1), "2": Mode("PAR=2", par=2), "3": Mode("PAR=3", par=3),
    "4": Mode("PAR=4", par=4),
    "auto": Mode(AUTO),
    # The variants behind the choices (first run only): memory alone decides how many run; no
    # floor under shrink to start; no shrink to start.
    "auto-memory": Mode("--jobs auto, max_busy 0 (memory only)", max_busy=0.0),
    "auto-floor1": Mode("--jobs auto, min_micro_batch 1", min_micro_batch=1),
    "auto-noshrink": Mode("--jobs auto, shrink_to_start false", shrink=False),
}


def criteria():
    with open(os.path.join(ROOT, "configs", "criteria.json")) as f:
        return json.load(f)


def sample_list(args, seed, workdir):
    """The run's configurations: tune's random sampler (seed) over the criteria space; the
    objective does nothing (each trial FAILs at once), only the sampled params are kept."""
    c = criteria()
    config = {"direction": "maximize", "sampler": {"name": "random", "seed": seed},
              "search_space": c["search_space"], "conditional": c["conditional"],
              "heartbeat_interval": 0, "objective": {"type": "command", "argv": ["/bin/true"]}}
    path = os.path.join(workdir, "sample.json")
    with open(path, "w") as f:
        json.dump(config, f)
    storage = f"sqlite:///{workdir}/sample.db"
    subprocess.run([args.tune, "--study", "sample", "--config", path, "--storage", storage,
                    "--n-trials", str(args.trials), "--log-level", "error"],
                   check=True, stdout=subprocess.DEVNULL)
    trials = trials_of(args.tune, "sample", storage)
    return [t["params"] for t in sorted(trials, key=lambda t: t["number"])]


def trials_of(tune, study, storage):
    out = subprocess.run([tune, "trials", "--study", study, "--storage", storage, "--format",
                          "json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def bench_config(args, mode, card, worker, enqueue, sampler):
    c = criteria()
    seed = args.seed_now + worker
    config = {
        "direction": "maximize",
        "sampler": ({"name": "tpe", "n_startup_trials": 20, "seed": seed} if sampler == "tpe"
                    else {"name": "random", "seed": seed}),
        "search_space": c["search_space"],
        "conditional": c["conditional"],
        "heartbeat_interval": 0,
        "retry_oom": ATTEMPTS - 1,
        "objective": {
            "type": "command",
            "argv": ["/usr/bin/python3", os.path.join(HERE, "synthetic_trial.py")],
            "env": {"TUNE_BINARY": args.tune, "BENCH_TIME_SCALE": str(args.time_scale),
                    "BENCH_ESTIMATE_CACHE": os.path.join(args.cache_dir, "estimates.json")},
            "memory": {"device_memory": CARD_BYTES, "simulate": card,
                       "admission": mode.par is None, "levers": ["grad_accum"],
                       "shrink_to_start": mode.shrink, "min_micro_batch": mode.min_micro_batch,
                       "model": "{model}", "batch_size": "{batch_size}",
                       "max_length": "{max_length}", "grad_accum": "{grad_accum}",
                       "precision": "bf16", "classifier_layers": "{classifier_layers}",
                       "dropout": "{dropout}"},
        },
    }
    if mode.par is None:
        config["max_busy"] = mode.max_busy
    if enqueue:
        config["enqueue_trials"] = enqueue
    return config


class CardMonitor(threading.Thread):
    """Samples the card's busy trials every 50 ms (real): the mean busy share min(1, Σu)."""

    def __init__(self, lib, card):
        super().__init__(daemon=True)
        self.lib, self.card, self.samples, self.stop = lib, card.encode(), [], threading.Event()

    def run(self):
        total = ctypes.c_double(0.0)
        while not self.stop.is_set():
            busy = self.lib.tune_simulated_card_load(self.card, CARD_BYTES, ctypes.byref(total))
            if busy >= 0:
                self.samples.append((time.time(), min(1.0, total.value)))
            time.sleep(0.05)

    def mean(self, begin, end):
        inside = [u for t, u in self.samples if begin <= t <= end]
        return sum(inside) / len(inside) if inside else 0.0


def run_mode(key, args, configs_list, sampler="random", trials=None):
    """Runs one mode in a fresh directory; returns its trials, card monitor and exit codes."""
    mode = MODES[key]
    workdir = tempfile.mkdtemp(prefix=f"packing-{key}-")
    card = f"packing-{os.getpid()}-{key}-{args.seed_now}-{sampler}"
    paths = []
    for worker in range(mode.par or 1):
        paths.append(os.path.join(workdir, f"study{worker}.json"))
        with open(paths[-1], "w") as f:
            json.dump(bench_config(args, mode, card, worker,
                                   configs_list if worker == 0 else None, sampler), f, indent=1)
    storage = f"sqlite:///{workdir}/study.db"
    n = trials or len(configs_list)
    command = lambda path: [args.tune, "--study", "packing", "--config", path, "--storage",
                            storage, "--n-trials", str(n), "--log-level", "warn"]
    monitor = CardMonitor(args.lib, card)
    monitor.start()
    if mode.par is None:
        procs = [subprocess.Popen(command(paths[0]) + ["--jobs", "auto", "--max-jobs",
                                                       str(args.max_jobs)],
                                  stdout=subprocess.DEVNULL)]
    else:  # independent workers: the first creates the study (and enqueues), the others join
        procs = [subprocess.Popen(command(paths[0]), stdout=subprocess.DEVNULL)]
        time.sleep(1.0)
        procs += [subprocess.Popen(command(p), stdout=subprocess.DEVNULL) for p in paths[1:]]
    codes = [p.wait() for p in procs]
    monitor.stop.set()
    monitor.join()
    if os.path.exists(f"/dev/shm/tune-card-{card}"):
        os.remove(f"/dev/shm/tune-card-{card}")
    return trials_of(args.tune, "packing", storage), monitor, codes


def when(text):
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").timestamp()


def ran(t):
    """(start, end) of the trial's process, real seconds; None if it never ran."""
    schedule = t["user_attrs"].get("schedule")
    if schedule and "started" in schedule:  # --jobs: the trial was created when it was queued
        return when(schedule["started"]), when(schedule["ended"])
    if schedule or not (t.get("datetime_start") and t.get("datetime_complete")):
        return None
    return when(t["datetime_start"]), when(t["datetime_complete"])


def summarise(name, trials, monitor, codes, scale):
    finished = [t for t in trials if t["state"] in ("COMPLETE", "PRUNED", "FAIL")]
    original = lambda t: (t["system_attrs"].get("retry_history") or [t["number"]])[0]
    configs = {original(t) for t in finished}
    done = {original(t) for t in finished if t["state"] == "COMPLETE"}
    oom = [t for t in finished if t["user_attrs"].get("reason") == "oom"]
    runs = [r for r in (ran(t) for t in finished) if r]
    begin = min(when(t["datetime_start"]) for t in finished)
    end = max(when(t["datetime_complete"]) for t in finished)
    waits = sorted(when(t["user_attrs"]["schedule"]["started"]) -
                   when(t["user_attrs"]["schedule"]["queued"])
                   for t in finished if "started" in t["user_attrs"].get("schedule", {}))
    shrunk = sum(1 for t in finished if "start beside" in
                 json.dumps(t["user_attrs"].get("memory", {})))
    complete = sum(1 for t in finished if t["state"] == "COMPLETE")
    return {
        "mode": name,
        "exit_codes": codes,
        "configurations": len(configs),
        "complete": len(done),
        "attempts": len(finished),
        "makespan": round((end - begin) / scale),
        "gpu_seconds_per_complete": round(sum(e - s for s, e in runs) / scale / max(1, complete)),
        "runtime_oom": len(oom),
        "runtime_oom_after_20": sum(1 for t in oom if t["number"] >= 20),
        "lost": len(configs - done),
        "fail": sum(1 for t in finished if t["state"] == "FAIL"),
        "mean_busy": round(monitor.mean(begin, end), 2),
        "p95_wait": round(waits[int(0.95 * (len(waits) - 1))] / scale) if waits else None,
        "wall_real": round(end - begin, 1),
    }


def best_curve(trials, scale):
    """(simulated seconds since the first start, best value so far) at each COMPLETE trial."""
    begin = min(when(t["datetime_start"]) for t in trials if t.get("datetime_start"))
    points, best = [], None
    for t in sorted((t for t in trials if t["state"] == "COMPLETE"),
                    key=lambda t: when(t["datetime_complete"])):
        v = t["values"][0] if t.get("values") else t.get("value")
        if best is None or v > best:
            best = v
        points.append(((when(t["datetime_complete"]) - begin) / scale, best))
    return points


def best_at(points, at):
    before = [v for s, v in points if s <= at]
    return f"{before[-1]:.4f}" if before else "-"


def card_library(tune):
    """libtune_train.so beside `tune`, with tune_simulated_card_load's signature."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(tune), "libtune_train.so"))
    lib.tune_simulated_card_load.argtypes = [ctypes.c_char_p, ctypes.c_int64,
                                             ctypes.POINTER(ctypes.c_double)]
    lib.tune_simulated_card_load.restype = ctypes.c_int64
    return lib


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tune", required=True)
    p.add_argument("--trials", type=int, default=300)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--time-scale", type=float, default=1 / 150)
    p.add_argument("--max-jobs", type=int, default=8)
    p.add_argument("--modes", default="1,2,3,4,auto")
    p.add_argument("--variants", default="auto-memory,auto-floor1,auto-noshrink",
                   help="extra --jobs auto modes, first run only")
    p.add_argument("--tpe-trials", type=int, default=150, help="0: no TPE comparison")
    p.add_argument("--no-doc", action="store_true")
    args = p.parse_args()
    args.tune = os.path.abspath(args.tune)
    args.lib = card_library(args.tune)
    args.cache_dir = tempfile.mkdtemp(prefix="packing-cache-")
    with open("/proc/loadavg") as f:
        args.loadavg = " ".join(f.read().split()[:3])
    start = time.time()
    runs = []
    for i, seed in enumerate(int(s) for s in args.seeds.split(",")):
        args.seed_now = seed
        configs_list = sample_list(args, seed, tempfile.mkdtemp(prefix="packing-list-"))
        keys = args.modes.split(",") + (args.variants.split(",") if i == 0 and args.variants else [])
        rows = []
        for key in keys:
            trials, monitor, codes = run_mode(key, args, configs_list)
            rows.append(summarise(MODES[key].name, trials, monitor, codes, args.time_scale))
            print(json.dumps({"seed": seed, **rows[-1]}), flush=True)
        runs.append((seed, rows))
    tpe = run_tpe(args, runs) if args.tpe_trials else None
    if not args.no_doc:
        import packing_doc
        packing_doc.write(args, runs, tpe, time.time() - start)


def run_tpe(args, runs):
    """TPE instead of the list: --jobs auto and the best fixed PAR (median makespan)."""
    pars = [k for k in args.modes.split(",") if MODES[k].par]
    median = lambda k: statistics.median(r["makespan"] for _, rows in runs for r in rows
                                         if r["mode"] == MODES[k].name)
    best = min(pars, key=median)
    args.seed_now = runs[0][0]
    curves = {}
    for key in ("auto", best):
        trials, monitor, codes = run_mode(key, args, [], sampler="tpe", trials=args.tpe_trials)
        curves[MODES[key].name] = (best_curve(trials, args.time_scale),
                                   summarise(MODES[key].name, trials, monitor, codes,
                                             args.time_scale))
        print(json.dumps({"tpe": key, **curves[MODES[key].name][1]}), flush=True)
    return curves


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
