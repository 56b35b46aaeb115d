#!/usr/bin/env python3
"""Issue 7: the memory guard's acceptance on CPU, with tune's counting allocator as the device.

Real studies of tiny transformers (tiny-bert, tiny-roberta, tiny-deberta-v3) trained in process
on the fortunes topic data (examples made long by joining 12 fortunes of one label, so batches
fill max_length), over a space where a large share of the configurations does not fit a
simulated 64 MiB card (--device-memory 64MiB). Four studies, each its own `tune` process:

  A  TPE, admission off, no retries: every misfit runs and hits a real c10::OutOfMemoryError
  B  TPE, admission on (levers: grad_accum, gradient_checkpointing), calibration on
  C  TPE, admission off, --oom-retry 3
  D  random sampler, admission off, a 48 MiB card: at least 100 run-time OOMs in one process

It reads every trial back with `tune trials --format json` and checks the issue's items: no
crash (exit 0, every trial finished, none FAIL), every OOM trial PRUNED with its oom_config, the
allocated memory before each trial flat over the OOMs, OOM share in the last 50 trials, run-time
OOMs with admission, retried trials keep their effective batch. Writes the <!-- guard:begin -->
section of docs/benchmarks.md.

Usage: bench/guard_acceptance.py --tune build/tune [--doc docs/benchmarks.md] [--trials 200]
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import time

from benchdoc import machine, write_section

MODELS = ["tiny-bert", "tiny-roberta", "tiny-deberta-v3"]
BATCHES = [8, 16, 32, 64, 128]
LENGTHS = [64, 128, 256, 512]
ACCUM = [1, 2]
OOM_CONFIG_KEYS = {"model", "batch_size", "grad_accum", "effective_batch_size", "max_length",
                   "precision", "gradient_checkpointing", "estimate"}
RUNTIME_KEYS = {"phase", "error", "peak_memory_bytes"}


def long_data(src, dst, per_example=12):
    """Joins `per_example` fortunes of one label into one example."""
    os.makedirs(dst, exist_ok=True)
    for split, limit in (("train", 8), ("validation", 3)):
        by_label = collections.defaultdict(list)
        with open(os.path.join(src, f"{split}.jsonl")) as f:
            for line in f:
                d = json.loads(line)
                by_label[d["label"]].append(d["text"])
        n = 0
        with open(os.path.join(dst, f"{split}.jsonl"), "w") as out:
            for label in sorted(by_label):
                texts = by_label[label]
                for k in range(limit):
                    chunk = texts[k * per_example:(k + 1) * per_example]
                    if len(chunk) < per_example:
                        break
                    out.write(json.dumps({"text": " ".join(chunk), "label": label}) + "\n")
                    n += 1
        print(f"guard bench: {n} {split} examples in {dst}", file=sys.stderr)


def study_config(data_dir, sampler, admission, seed):
    return {
        "direction": "maximize",
        "sampler": ({"name": "tpe", "seed": seed, "n_startup_trials": 10} if sampler == "tpe"
                    else {"name": "random", "seed": seed}),
        "pruner": {"name": "nop"},
        "search_space": {
            "model": {"type": "model", "choices": MODELS},
            "learning_rate": {"type": "float", "low": 3e-4, "high": 3e-3, "log": True},
            "batch_size": BATCHES,
            "grad_accum": ACCUM,
            "max_length": LENGTHS,
        },
        "objective": {
            "type": "train",
            "init": "scratch",
            "data": {"train": os.path.join(data_dir, "train.jsonl"),
                     "validation": os.path.join(data_dir, "validation.jsonl")},
            "metric": "macro_f1", "epochs": 2, "threads": 1, "seed": 0,
            "memory": {"admission": admission},
        },
    }


def estimate_grid(tune, budget):
    """Share of the space's (model, batch, length) grid whose estimate exceeds the budget."""
    over = total = 0
    for model in MODELS:
        for b in BATCHES:
            for t in LENGTHS:
                out = subprocess.run(
                    [tune, "estimate", "--model", model, "--batch-size", str(b), "--max-length",
                     str(t), "--device", "cpu", "--num-labels", "10", "--format", "json",
                     "--log-level", "off"], capture_output=True, text=True, check=True)
                total += 1
                over += json.loads(out.stdout)["device_peak"] > budget
    return over / total


def run_study(tune, name, config_path, storage, trials, extra):
    cmd = [tune, "--study", name, "--config", config_path, "--storage", storage, "--n-trials",
           str(trials), "--log-level", "warn"] + extra
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    out = subprocess.run([tune, "trials", "--study", name, "--storage", storage, "--format",
                          "json", "--log-level", "off"], capture_output=True, text=True,
                         check=True)
    return proc, wall, json.loads(out.stdout)


def analyse(trials):
    n = len(trials)
    states = collections.Counter(t["state"] for t in trials)
    ooms = [t for t in trials if t["user_attrs"].get("oom")]
    runtime = [t for t in ooms if t["user_attrs"].get("reason") == "oom"]
    predicted = [t for t in ooms if t["user_attrs"].get("reason") == "predicted"]
    bad_oom = []
    for t in ooms:
        cfg = t["user_attrs"].get("oom_config", {})
        need = OOM_CONFIG_KEYS | (RUNTIME_KEYS if t in runtime else {"predicted", "usable"})
        if t["state"] != "PRUNED" or not need <= set(cfg):
            bad_oom.append((t["number"], sorted(need - set(cfg))))
    before = [t["user_attrs"]["memory"]["before"] for t in trials
              if "before" in t["user_attrs"].get("memory", {})]
    after = [t["user_attrs"]["memory"]["after"] for t in trials
             if "after" in t["user_attrs"].get("memory", {})]
    ordered = sorted(trials, key=lambda t: t["number"])
    last = ordered[-50:]
    # The process's resident set after each trial that ran (user attribute memory.rss).
    rss = [t["user_attrs"]["memory"]["rss"] for t in ordered
           if "rss" in t["user_attrs"].get("memory", {})]
    retried = [t for t in trials if t["user_attrs"].get("memory", {}).get("oom_retries")]
    kept = 0
    for t in retried:
        m = t["user_attrs"]["memory"]
        kept += m["batch_size"] * m["grad_accum"] == (t["params"]["batch_size"] *
                                                      t["params"].get("grad_accum", 1))
    levers = [t for t in trials if t["user_attrs"].get("memory", {}).get("levers")]
    lever_kept = sum(
        t["user_attrs"]["memory"]["batch_size"] * t["user_attrs"]["memory"]["grad_accum"] ==
        t["params"]["batch_size"] * t["params"].get("grad_accum", 1) for t in levers)
    return {
        "trials": n,
        "states": dict(states),
        "ooms": len(ooms),
        "runtime_ooms": len(runtime),
        "predicted_ooms": len(predicted),
        "bad_oom_records": bad_oom,
        "rss_after_10": rss[min(9, len(rss) - 1)] if rss else None,
        "rss_last": rss[-1] if rss else None,
        "rss_max": max(rss) if rss else None,
        "before_min": min(before) if before else None,
        "before_max": max(before) if before else None,
        "after_max": max(after) if after else None,
        "last50_oom": sum(bool(t["user_attrs"].get("oom")) for t in last) / max(len(last), 1),
        "last50_runtime_oom": sum(t["user_attrs"].get("reason") == "oom" for t in last) /
                              max(len(last), 1),
        "runtime_oom_share": len(runtime) / max(n, 1),
        "retried": len(retried),
        "retried_kept_effective_batch": kept,
        "retried_completed": sum(t["state"] == "COMPLETE" for t in retried),
        "levers": len(levers),
        "levers_kept_effective_batch": lever_kept,
        "first50_runtime_oom": sum(t["user_attrs"].get("reason") == "oom"
                                   for t in sorted(trials, key=lambda t: t["number"])[:50]) / 50,
    }


def mib(n):
    return "-" if n is None else f"{n / 2**20:.0f} MiB"


def yes(ok):
    return "yes" if ok else "**no**"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tune", required=True)
    ap.add_argument("--fortunes", default="build/data/fortunes")
    ap.add_argument("--work", default="build/bench-guard")
    ap.add_argument("--doc")
    ap.add_argument("--trials", type=int, default=200)
    args = ap.parse_args()
    tune = os.path.abspath(args.tune)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    data = os.path.join(work, "data")
    long_data(args.fortunes, data)
    storage_path = os.path.join(work, "guard.db")
    if os.path.exists(storage_path):
        os.remove(storage_path)
    storage = f"sqlite:///{storage_path}"
    budget = 64 * 2**20
    misfit = estimate_grid(tune, budget)
    load = os.getloadavg()
    modes = [
        ("A", "TPE, admission off", "tpe", False, ["--device-memory", "64MiB"], args.trials),
        ("B", "TPE, admission on", "tpe", True, ["--device-memory", "64MiB"], args.trials),
        ("C", "TPE, admission off, --oom-retry 3", "tpe", False,
         ["--device-memory", "64MiB", "--oom-retry", "3"], args.trials),
        ("D", "random, admission off, 48 MiB", "random", False, ["--device-memory", "48MiB"],
         args.trials),
    ]
    results = {}
    t_all = time.time()
    for key, label, sampler, admission, extra, n in modes:
        path = os.path.join(work, f"guard-{key}.json")
        with open(path, "w") as f:
            json.dump(study_config(data, sampler, admission, seed=7), f, indent=1)
        proc, wall, trials = run_study(tune, f"guard-{key}", path, storage, n, extra)
        r = analyse(trials)
        r.update(exit=proc.returncode, wall=wall, label=label,
                 stderr_tail=proc.stderr[-400:])
        results[key] = r
        print(f"guard bench {key} ({label}): exit {proc.returncode}, {wall:.0f}s, "
              f"{json.dumps({k: v for k, v in r.items() if k != 'stderr_tail'})}", file=sys.stderr)
    total = time.time() - t_all
    print(json.dumps(results, indent=1))
    if args.doc:
        write_doc(args.doc, results, misfit, load, total, args.trials)


def write_doc(doc, results, misfit, load, total, n_trials):
    A, B, C, D = (results[k] for k in "ABCD")
    lines = ["<!-- guard:begin -->", "## Memory guard: acceptance on CPU (issue 7)", ""]
    lines.append(
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
        f"`bench/run_guard_bench.sh` (`bench/guard_acceptance.py`), {total / 60:.1f} min in all. "
        f"Machine: {machine()}; LibTorch 1.13 (Debian, CPU); load average at the start "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.")
    lines.append("")
    lines.append(
        "Real studies, each one `tune` process: tiny-bert, tiny-roberta and tiny-deberta-v3 "
        "trained in process (2 epochs) on the fortunes topic data, examples made of 12 fortunes "
        "each so that batches fill max_length; space: model × batch_size {8…128} × grad_accum "
        "{1, 2} × max_length {64…512} × learning rate. The device is tune's counting CPU "
        "allocator with a budget (`--device-memory`): an allocation above it throws a real "
        "`c10::OutOfMemoryError`, as a card would. "
        f"**{misfit:.0%} of the (model, batch, length) grid does not fit 64 MiB** by the "
        "estimator.")
    lines.append("")
    lines.append("| study | trials | exit | COMPLETE / PRUNED / FAIL | OOM trials (run-time / predicted) "
                 "| run-time OOMs, first 50 → last 50 | OOM share, last 50 | allocated before a "
                 "trial (min–max) | process RSS after trial 10 → last (max) | wall |")
    lines.append("|---|---:|---:|---|---|---|---:|---|---:|---:|")
    for key in "ABCD":
        r = results[key]
        s = r["states"]
        lines.append(
            f"| {key}: {r['label']} | {r['trials']} | {r['exit']} | {s.get('COMPLETE', 0)} / "
            f"{s.get('PRUNED', 0)} / {s.get('FAIL', 0)} | {r['ooms']} ({r['runtime_ooms']} / "
            f"{r['predicted_ooms']}) | {r['first50_runtime_oom']:.0%} → "
            f"{r['last50_runtime_oom']:.0%} | {r['last50_oom']:.0%} | {r['before_min']}–"
            f"{r['before_max']} B | {mib(r['rss_after_10'])} → {mib(r['rss_last'])} "
            f"({mib(r['rss_max'])}) | {r['wall']:.0f} s |")
    lines.append("")
    every_oom_ok = all(not results[k]["bad_oom_records"] for k in "ABCD")
    no_crash = all(results[k]["exit"] == 0 and results[k]["trials"] == n_trials and
                   results[k]["states"].get("FAIL", 0) == 0 for k in "ABCD")
    lines.append("Acceptance items:")
    lines.append("")
    lines.append(f"- Zero crashes (exit 0, {n_trials} finished trials, no FAIL, in all four): "
                 f"{yes(no_crash)}.")
    lines.append(f"- Every OOM trial PRUNED with its oom_config (model, batch_size, grad_accum, "
                 f"effective batch, max_length, precision, checkpointing, estimate; phase, error "
                 f"and measured peak at run time; predicted and usable memory when predicted): "
                 f"{yes(every_oom_ok)} ({sum(results[k]['ooms'] for k in 'ABCD')} OOM trials).")
    lines.append(f"- No growth of baseline memory over 100 OOMs: study D ran {D['runtime_ooms']} "
                 f"run-time OOMs in one process; the allocated bytes before each trial stayed "
                 f"{D['before_min']}–{D['before_max']} B and at most {D['after_max']} B after, and "
                 f"the process's resident set went from {mib(D['rss_after_10'])} after trial 10 "
                 f"to {mib(D['rss_last'])} after the last (largest {mib(D['rss_max'])}): "
                 f"{yes(D['runtime_ooms'] >= 100 and D['before_max'] == D['before_min'])}.")
    lines.append(f"- OOM share in the last 50 trials below 5% (A, the sampler alone learning "
                 f"from run-time OOMs: oom_feasibility and TPE ranking OOM trials worst): "
                 f"{A['last50_oom']:.0%} ({yes(A['last50_oom'] < 0.05)}); B, with admission, "
                 f"counting predicted OOMs too: {B['last50_oom']:.0%} "
                 f"({yes(B['last50_oom'] < 0.05)}).")
    lines.append(f"- With admission on, fewer than 2% of trials OOM at run time: "
                 f"{B['runtime_oom_share']:.1%} ({B['runtime_ooms']} of {B['trials']}; "
                 f"{yes(B['runtime_oom_share'] < 0.02)}); {B['levers']} trials ran with levers, "
                 f"{B['levers_kept_effective_batch']} of them with their effective batch.")
    lines.append(f"- With oom_retry on, retried trials keep their effective batch: "
                 f"{C['retried_kept_effective_batch']} of {C['retried']} "
                 f"({yes(C['retried'] > 0 and C['retried_kept_effective_batch'] == C['retried'])}); "
                 f"{C['retried_completed']} of them COMPLETE.")
    lines.append("<!-- guard:end -->")
    write_section(doc, "guard", "\n".join(lines))


if __name__ == "__main__":
    main()
