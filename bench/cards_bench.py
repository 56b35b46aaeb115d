#!/usr/bin/env python3
"""Issue 45: a 4-card workstation, simulated with the packing benchmark's card model
(bench/packing_bench.py, bench/synthetic_trial.py: each card shares its memory and its compute
between the trials on it, and an allocation over the card fails). The same list of criteria
configurations is brought to COMPLETE by:

  - one card, `tune --jobs auto` (the throughput of one card);
  - four cards, one `tune --jobs auto` per card (each its own card, as one would start them by
    hand with CUDA_VISIBLE_DEVICES=K, sharing one SQLite study);
  - four cards, one `tune --jobs auto` over all of them (device_memory as a list of four);

on four 24 GiB cards, and on four cards of different sizes. Prints one JSON line per run and a
Markdown table; --out DIR keeps the raw lines (bench/data/).

Usage: bench/cards_bench.py --tune build/tune [--trials 160] [--sizes 24,24,24,24 --sizes 48,24,24,16]
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import packing_bench as pb  # noqa: E402

GIB = 2**30


class Monitor(threading.Thread):
    """Samples each card's busy share min(1, Σu) every 50 ms."""

    def __init__(self, lib, cards):
        super().__init__(daemon=True)
        self.lib, self.cards = lib, [(n.encode(), b) for n, b in cards]
        self.samples, self.stop = [], threading.Event()

    def run(self):
        total = ctypes.c_double(0.0)
        while not self.stop.is_set():
            row = []
            for name, capacity in self.cards:
                busy = self.lib.tune_simulated_card_load(name, capacity, ctypes.byref(total))
                row.append(min(1.0, total.value) if busy >= 0 else 0.0)
            self.samples.append((time.time(), row))
            time.sleep(0.05)

    def mean(self, begin, end):
        inside = [r for t, r in self.samples if begin <= t <= end]
        if not inside:
            return [0.0] * len(self.cards)
        return [round(sum(r[k] for r in inside) / len(inside), 2) for k in range(len(self.cards))]


def config_for(args, card, sizes, enqueue):
    """packing_bench's --jobs auto config on `sizes` (GiB): one card, or a list of them."""
    c = pb.bench_config(args, pb.MODES["auto"], card, 0, enqueue, "random")
    c["objective"]["memory"]["device_memory"] = (sizes[0] * GIB if len(sizes) == 1
                                                 else [s * GIB for s in sizes])
    return c


def run(args, name, configs_list, sizes, per_card):
    workdir = tempfile.mkdtemp(prefix="cards-")
    base = f"cards-{os.getpid()}-{len(args.rows)}"
    storage = f"sqlite:///{workdir}/study.db"
    if per_card:
        cards = [(f"{base}-{k}", s) for k, s in enumerate(sizes)]
        configs = [config_for(args, cards[k][0], [s], configs_list if k == 0 else None)
                   for k, s in enumerate(sizes)]
    else:
        cards = [(base if len(sizes) == 1 else f"{base}-{k}", s) for k, s in enumerate(sizes)]
        configs = [config_for(args, base, sizes, configs_list)]
    paths = []
    for i, c in enumerate(configs):
        paths.append(os.path.join(workdir, f"study{i}.json"))
        with open(paths[-1], "w") as f:
            json.dump(c, f, indent=1)
    monitor = Monitor(args.lib, [(n, s * GIB) for n, s in cards])
    monitor.start()
    command = lambda p: [args.tune, "--study", "cards", "--config", p, "--storage", storage,
                         "--n-trials", str(len(configs_list)), "--log-level", "warn",
                         "--jobs", "auto", "--max-jobs", str(args.max_jobs)]
    procs = [subprocess.Popen(command(paths[0]), stdout=subprocess.DEVNULL)]
    if len(paths) > 1:
        time.sleep(1.0)  # the first creates the study and enqueues the list
        procs += [subprocess.Popen(command(p), stdout=subprocess.DEVNULL) for p in paths[1:]]
    codes = [p.wait() for p in procs]
    monitor.stop.set()
    monitor.join()
    for n, _ in cards:
        if os.path.exists(f"/dev/shm/tune-card-{n}"):
            os.remove(f"/dev/shm/tune-card-{n}")
    trials = pb.trials_of(args.tune, "cards", storage)
    row = pb.summarise(name, trials, pb.CardMonitor(args.lib, cards[0][0]), codes,
                       args.time_scale)
    finished = [t for t in trials if t["state"] in ("COMPLETE", "PRUNED", "FAIL")]
    begin = min(pb.when(t["datetime_start"]) for t in finished)
    end = max(pb.when(t["datetime_complete"]) for t in finished)
    row["cards_gib"] = sizes
    row["busy_per_card"] = monitor.mean(begin, end)
    per = {}
    for t in finished:
        card = t["system_attrs"].get("card")
        if card is not None:
            per[card] = per.get(card, 0) + 1
    row["trials_per_card"] = dict(sorted(per.items()))
    row.pop("mean_busy", None)
    return row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tune", required=True)
    p.add_argument("--trials", type=int, default=160)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--time-scale", type=float, default=1 / 150)
    p.add_argument("--max-jobs", type=int, default=8)
    p.add_argument("--sizes", action="append", help="GiB per card, e.g. 24,24,24,24")
    p.add_argument("--out", help="a directory for the raw JSON lines")
    args = p.parse_args()
    args.tune = os.path.abspath(args.tune)
    args.lib = pb.card_library(args.tune)
    args.cache_dir = tempfile.mkdtemp(prefix="cards-cache-")
    args.seed_now = args.seed
    args.rows = []
    sizes_list = [[int(x) for x in s.split(",")] for s in (args.sizes or ["24,24,24,24"])]
    configs_list = pb.sample_list(args, args.seed, tempfile.mkdtemp(prefix="cards-list-"))
    plan = [("1 card, --jobs auto", [sizes_list[0][0]], False)]
    for sizes in sizes_list:
        label = "+".join(str(s) for s in sizes) + " GiB"
        plan.append((f"{label}: one tune --jobs auto per card", sizes, True))
        plan.append((f"{label}: one tune --jobs auto over all cards", sizes, False))
    for name, sizes, per_card in plan:
        row = run(args, name, configs_list, sizes, per_card)
        args.rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "runs.jsonl"), "w") as f:
            for row in args.rows:
                f.write(json.dumps(row) + "\n")
    print()
    print("| Run | Makespan (sim. s) | COMPLETE | Run-time OOM | p95 wait (s) | Busy per card | Trials per card |")
    print("|---|---|---|---|---|---|---|")
    for r in args.rows:
        print(f"| {r['mode']} | {r['makespan']} | {r['complete']}/{r['configurations']} | "
              f"{r['runtime_oom']} | {r['p95_wait']} | {', '.join(str(b) for b in r['busy_per_card'])} | "
              f"{', '.join(f'{k}: {v}' for k, v in r['trials_per_card'].items()) or '-'} |")


if __name__ == "__main__":
    main()
