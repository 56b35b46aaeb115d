#!/usr/bin/env python3
"""Packing benchmark (issue 17): trials of the user reports' criteria space on one simulated
shared 24 GiB card, run as the user reports ran them -- PAR = 1, 2, 3, 4 independent tune
workers on one study, no ledger, no admission -- and with `tune --jobs auto` (admission, levers,
reservations, calibration). Every trial is bench/synthetic_trial.py: it holds its configuration's
true peak on the card (tune's estimate x a per-model factor tune is not told) for a time
proportional to its FLOPs. Trials are sampled by the random sampler (default: every mode runs
the same mix of configurations) or by TPE (--sampler tpe: the mix then follows what each mode
completed, so throughput differences partly measure the sampler's drift).

Prints one JSON line per mode and writes the table to docs/benchmarks.md (section "packing").

Usage: bench/packing_bench.py --tune build/tune [--trials 300] [--seconds-per-pflop 60] [--sampler random|tpe]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime

import benchdoc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CARD_BYTES = 24 * 2**30
AUTO = "--jobs auto"
AUTO_WAIT = "--jobs auto, shrink_to_start false"


def bench_config(tune, workdir, card, admission, args, worker=0, shrink=True):
    with open(os.path.join(ROOT, "configs", "criteria.json")) as f:
        criteria = json.load(f)
    return {
        "direction": "maximize",
        "sampler": ({"name": "tpe", "n_startup_trials": 20, "seed": args.seed + worker}
                    if args.sampler == "tpe" else {"name": "random", "seed": args.seed + worker}),
        "search_space": criteria["search_space"],
        "conditional": criteria["conditional"],
        "heartbeat_interval": 0,
        "objective": {
            "type": "command",
            "argv": ["/usr/bin/python3", os.path.join(HERE, "synthetic_trial.py")],
            "env": {"TUNE_BINARY": tune,
                    "BENCH_SECONDS_PER_PFLOP": str(args.seconds_per_pflop),
                    "BENCH_ESTIMATE_CACHE": os.path.join(args.cache_dir, "estimates.json")},
            "memory": {"device_memory": CARD_BYTES, "simulate": card, "admission": admission,
                       "levers": ["grad_accum"], "shrink_to_start": shrink, "model": "{model}",
                       "batch_size": "{batch_size}", "max_length": "{max_length}",
                       "grad_accum": "{grad_accum}", "precision": "bf16",
                       "classifier_layers": "{classifier_layers}", "dropout": "{dropout}"},
        },
    }


def run_mode(name, tune, args, par=None, jobs=None, shrink=True):
    """Runs one mode in a fresh directory; returns its trials (tune trials --format json)."""
    workdir = tempfile.mkdtemp(prefix=f"packing-{name}-")
    card = f"packing-{os.getpid()}-{name}"
    # One config per worker: the same study, each worker its own sampler seed (worker 0 and
    # --jobs auto: --seed, so they sample the same trials).
    configs = []
    for worker in range(par or 1):
        configs.append(os.path.join(workdir, f"study{worker}.json"))
        with open(configs[-1], "w") as f:
            json.dump(bench_config(tune, workdir, card, jobs is not None, args, worker, shrink), f,
                      indent=1)
    storage = f"sqlite:///{workdir}/study.db"
    command = lambda config: [tune, "--study", "packing", "--config", config, "--storage", storage,
                              "--n-trials", str(args.trials), "--log-level", "warn"]
    base = command(configs[0])
    start = time.time()
    if jobs is not None:
        procs = [subprocess.Popen(base + ["--jobs", jobs, "--max-jobs", str(args.max_jobs)],
                                  stdout=subprocess.DEVNULL)]
    else:
        # Independent workers: the first creates the study, the others join it.
        procs = [subprocess.Popen(base, stdout=subprocess.DEVNULL)]
        time.sleep(1.0)
        procs += [subprocess.Popen(command(c), stdout=subprocess.DEVNULL) for c in configs[1:]]
    codes = [p.wait() for p in procs]
    wall = time.time() - start
    out = subprocess.run([tune, "trials", "--study", "packing", "--storage", storage, "--format",
                          "json"], check=True, capture_output=True, text=True).stdout
    if os.path.exists(f"/dev/shm/tune-card-{card}"):
        os.remove(f"/dev/shm/tune-card-{card}")
    return json.loads(out), wall, codes


def when(text):
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").timestamp()


def trained_pflop(trial, tune, known):
    """The training FLOPs a COMPLETE trial did, as bench/synthetic_trial.py counts them (6 x
    parameters x tokens; the grad_accum lever keeps batch x accumulation), in PFLOP."""
    p = trial["params"]
    key = (p["model"], p.get("classifier_layers", 0))
    if key not in known:
        out = subprocess.run([tune, "estimate", "--model", p["model"], "--batch-size", "1",
                              "--max-length", "128", "--classifier-layers", str(key[1]),
                              "--format", "json"], check=True, capture_output=True, text=True)
        known[key] = json.loads(out.stdout)["num_parameters"]
    tokens = p["batch_size"] * p.get("grad_accum", 1) * p["max_length"]
    return 6.0 * known[key] * tokens / 1e15


def summarise(name, trials, wall, codes, tune):
    finished = [t for t in trials if t["state"] in ("COMPLETE", "PRUNED", "FAIL")]
    parameters = {}
    complete = [t for t in finished if t["state"] == "COMPLETE"]
    reason = lambda t: t["user_attrs"].get("reason")
    runtime_oom = [t for t in finished if reason(t) == "oom"]
    predicted = [t for t in finished if reason(t) == "predicted"]
    fail = [t for t in finished if t["state"] == "FAIL"]
    starts = [when(t["datetime_start"]) for t in finished if t.get("datetime_start")]
    ends = [when(t["datetime_complete"]) for t in finished if t.get("datetime_complete")]
    span = max(ends) - min(starts) if starts and ends else wall
    used = reserved = 0.0
    waits = []
    for t in finished:
        if not (t.get("datetime_start") and t.get("datetime_complete")):
            continue
        seconds = when(t["datetime_complete"]) - when(t["datetime_start"])
        schedule = t["user_attrs"].get("schedule")
        if schedule and "started" in schedule:  # --jobs: the trial is created when it is queued
            seconds = when(schedule["ended"]) - when(schedule["started"])
        peak = t["user_attrs"].get("memory", {}).get("peak", -1)
        if t["state"] == "COMPLETE" and peak > 0:
            used += peak * seconds
        if schedule and "started" in schedule:
            run = when(schedule["ended"]) - when(schedule["started"])
            reserved += schedule["reservation"] * run
            waits.append(when(schedule["started"]) - when(schedule["queued"]))
    waits.sort()
    late_oom = [t for t in runtime_oom if t["number"] >= 20]
    return {
        "mode": name,
        "exit_codes": codes,
        "trials": len(finished),
        "complete": len(complete),
        "runtime_oom": len(runtime_oom),
        "runtime_oom_after_20": len(late_oom),
        "predicted_misfit": len(predicted),
        "fail": len(fail),
        "wall_seconds": round(span, 1),
        "complete_per_hour": round(len(complete) / span * 3600, 1),
        "trained_pflop_per_hour": round(
            sum(trained_pflop(t, tune, parameters) for t in complete) / span * 3600, 1),
        "finished_per_hour": round(len(finished) / span * 3600, 1),
        "mean_used_share": round(used / (CARD_BYTES * span), 3),
        "mean_reserved_share": round(reserved / (CARD_BYTES * span), 3) if waits else None,
        # A perfect packer of the same COMPLETE trials on the whole card: their peak x duration
        # summed over the card's bytes is the shortest wall time that could hold them.
        "packing_bound_per_hour": round(len(complete) / (used / CARD_BYTES) * 3600, 1) if used else None,
        "p95_wait_seconds": round(waits[int(0.95 * (len(waits) - 1))], 2) if waits else 0.0,
    }


def write_doc(rows, args, total):
    best = max((r for r in rows if r["mode"].startswith("PAR")), key=lambda r: r["complete_per_hour"])
    auto = next(r for r in rows if r["mode"] == AUTO)
    lines = [
        "`bench/run_packing_bench.sh` runs "
        f"{args.trials} trials of the criteria space (seven models, heavy/base) on one simulated "
        "24 GiB card: PAR = 1-4 independent `tune` workers on one study (no ledger, no admission, "
        "as the user reports ran them) and `tune --jobs auto` (admission, levers, shrink to "
        "start, reservations, "
        f"at most {args.max_jobs} at once). Trials are sampled by the {args.sampler} sampler "
        f"(seed {args.seed}; PAR worker k: seed {args.seed} + k)"
        + (", so every mode runs the same mix of configurations: with TPE the mix follows the "
           "mode (it converges on what completed), and a mode's throughput then measures "
           "which configurations it drifted to more than how it packs them"
           if args.sampler == "random" else "") + ". "
        "Each trial holds its true peak on the card (tune's "
        "estimate times a per-model factor of 0.90-1.15 that tune is not told) for a time "
        f"proportional to its FLOPs ({args.seconds_per_pflop} s per PFLOP). Throughput counts "
        "COMPLETE trials; run-time OOMs are trials that ran out of memory on the card or over "
        "their own reservation; used share = the true peaks held, averaged over the run; "
        "trained PFLOP / h = the training FLOPs of the COMPLETE trials (6 x parameters x "
        "tokens, what sets a trial's duration) per hour, the work that produced results.",
        "",
        "| mode | finished | COMPLETE | COMPLETE / h | trained PFLOP / h | run-time OOMs (after trial 20) | predicted misfits | FAIL | mean used share | mean reserved share | p95 wait (s) | wall (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        reserved = "-" if r["mean_reserved_share"] is None else f"{r['mean_reserved_share']:.2f}"
        lines.append(f"| {r['mode']} | {r['trials']} | {r['complete']} | {r['complete_per_hour']} | "
                     f"{r['trained_pflop_per_hour']} | "
                     f"{r['runtime_oom']} ({r['runtime_oom_after_20']}) | {r['predicted_misfit']} | "
                     f"{r['fail']} | {r['mean_used_share']:.2f} | {reserved} | "
                     f"{r['p95_wait_seconds']} | {r['wall_seconds']} |")
    ratio = auto["complete_per_hour"] / best["complete_per_hour"] if best["complete_per_hour"] else 0
    best_work = max((r for r in rows if r["mode"].startswith("PAR")),
                    key=lambda r: r["trained_pflop_per_hour"])
    work_ratio = (auto["trained_pflop_per_hour"] / best_work["trained_pflop_per_hour"]
                  if best_work["trained_pflop_per_hour"] else 0)
    lines += ["",
              f"`--jobs auto` / best fixed PAR ({best['mode']}): {ratio:.2f}x COMPLETE trials per "
              f"hour (goal >= 1.25x); {work_ratio:.2f}x trained PFLOP per hour (best: "
              f"{best_work['mode']}); run-time OOMs after trial 20: "
              f"{auto['runtime_oom_after_20']} (goal 0); FAIL: {auto['fail']} (goal 0). A perfect "
              f"packer of `--jobs auto`'s COMPLETE trials on the whole card (their true peak x "
              f"duration summed, over 24 GiB) would reach {auto['packing_bound_per_hour']} "
              f"COMPLETE / h. Whole benchmark: {total:.0f} s."]
    wait = next((r for r in rows if r["mode"] == AUTO_WAIT), None)
    if wait:
        lines[-1] += (f" Without shrink to start (`{AUTO_WAIT}`: a waiting trial waits for memory "
                      f"with its own micro-batch) `--jobs auto` reaches "
                      f"{wait['complete_per_hour']} COMPLETE / h and "
                      f"{wait['trained_pflop_per_hour']} trained PFLOP / h.")
    lines += ["",
              "Reading the table: a fixed-PAR trial that finds the card full dies at once (its "
              "run-time OOM costs only its start-up), so the COMPLETE trials of PAR = 2-4 are "
              "mostly the ones small enough to survive beside their neighbours; `--jobs auto` "
              "runs the large configurations to the end too, and they take most of the card's "
              "memory x time. COMPLETE / h therefore compares different "
              "sets of trials; the packing bound is the ceiling for any scheduler that completes "
              "`--jobs auto`'s trials. `--jobs auto` starts the oldest waiting trial when it "
              "fits, else starts it at once at a smaller micro-batch that fits the memory left "
              "(`memory.shrink_to_start`: batch_size halved, grad_accum doubled, the same "
              "FLOPs), else backfills later trials beside a large one (at most max_jobs passes; "
              "[cli.md, Several trials at once](cli.md#several-trials-at-once)). The simulated "
              "card shares memory only: a trial's duration does not depend on how many run "
              "beside it, so on this card every extra trial held at once is free throughput, "
              "which a real GPU's shared compute does not give."]
    begin, end = benchdoc.markers("packing")
    section = "\n".join([begin, "## Packing trials on one card: --jobs auto vs fixed PAR", "",
                          f"Machine: {benchdoc.machine()}; load before the run: {args.loadavg}.",
                          ""] + lines + [end])
    benchdoc.write_section(os.path.join(ROOT, "docs", "benchmarks.md"), "packing", section)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tune", required=True)
    p.add_argument("--trials", type=int, default=300)
    p.add_argument("--seconds-per-pflop", type=float, default=60.0)
    p.add_argument("--max-jobs", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sampler", choices=["random", "tpe"], default="random")
    p.add_argument("--modes", default="1,2,3,4,auto-wait,auto")
    p.add_argument("--no-doc", action="store_true")
    args = p.parse_args()
    args.tune = os.path.abspath(args.tune)
    args.cache_dir = tempfile.mkdtemp(prefix="packing-cache-")
    with open("/proc/loadavg") as f:
        args.loadavg = " ".join(f.read().split()[:3])
    start = time.time()
    rows = []
    for mode in args.modes.split(","):
        if mode in ("auto", "auto-wait"):
            name = AUTO if mode == "auto" else AUTO_WAIT
            trials, wall, codes = run_mode(mode, args.tune, args, jobs="auto",
                                           shrink=mode == "auto")
        else:
            name = f"PAR={mode}"
            trials, wall, codes = run_mode(f"par{mode}", args.tune, args, par=int(mode))
        rows.append(summarise(name, trials, wall, codes, args.tune))
        print(json.dumps(rows[-1]), flush=True)
    if not args.no_doc and any(r["mode"] == AUTO for r in rows):
        write_doc(rows, args, time.time() - start)


if __name__ == "__main__":
    main()
