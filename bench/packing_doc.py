"""Writes the packing benchmark's section of docs/benchmarks.md (bench/packing_bench.py): the
model's constants with their sources, each run's table, the medians and the verdict."""
import os
import statistics

import benchdoc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
AUTO = "--jobs auto"

CONSTANTS = """The card and the trials (fixed before the measurement, the same for every mode; `bench/synthetic_trial.py`, `src/memory/simulated_card.h`):

| constant | value | source |
|---|---|---|
| card | 24 GiB, 125 TFLOP/s dense BF16 | NVIDIA A10 (24 GB GDDR6), datasheet peak as tabulated in [kimbochen's GPU table](https://gist.github.com/kimbochen) (A10: 125 TFLOP/s FP16/BF16 tensor, 24 GB) |
| fraction of peak a step reaches (MFU) | 0.40 | stated assumption (fine-tuning encoders in BF16 with eager PyTorch typically reaches 30-50 % of the tensor peak); not measured here |
| GPU time per micro-step, alone, `g` | 6 x parameters x (batch x length) / (125 TFLOP/s x 0.40); x 4/3 with gradient checkpointing | the usual 6 N T training-FLOPs count |
| host time per micro-step `h` | 10 ms | approximate: eager PyTorch spends about 5-25 us of CPU per op before its kernel runs ([from PyTorch op to kernel launch](https://jiahuanglin.xyz/all_lessons/gpu_kernel_serving/18_pytorch_to_kernel.html)) and a training step launches hundreds of kernels: ~500 launches at 3-15 us each is 1.5-7.5 ms per iteration ([CUDA graphs vs dynamic execution](https://bestlifepulse.com/blog/tech/cuda-graphs-vs-dynamic-execution-which-kernel-launch-strategy-reduces-gpu-overhead-for-ai-training)); with the optimizer step, the loss read-back and the data loader's collation we take 10 ms. Checked on an H200 since: a BERT-base step at 8 x 128 in a plain Python loop took 20.8-21.2 ms with the card 39 % busy, so h = 12.8 ms (`bench/gpu_corun.py`) |
| time-slicing overhead when more than one computes | +11 % GPU time | measured: BERT-base training processes sharing an H200 (`bench/gpu_corun.py`, [below](#co-running-trials-on-a-real-card-an-h200-issue-32-also)); with a saturated card, 2-4 of them take 1.10-1.11x the sum of their steps alone; fitted with the next row over 18 points, each within 6 % |
| wait per busy co-runner below saturation | +44 % GPU time each | measured there: processes' kernels time-slice rather than overlap, so two trials of u = 0.39 slow each other 1.18-1.31x with the card only 78 % demanded (NVML: 96-98 % busy) |
| start-up | 4.4 s + 2.6 s per 110 M parameters (bert-base 7.0 s, roberta-large 12.8 s), holding the CUDA context, the weights and the optimizer state | `import torch` + transformers: 4.38 s ([transformers PR 36380](https://github.com/huggingface/transformers/pull/36380)); loading a bert-base-sized model: 2.6 s on average ([sentence-transformers issue 149](https://github.com/huggingface/sentence-transformers/issues/149)) |
| memory | tune's estimate x a per-model factor of 0.90-1.15 tune is not told; the start-up holds context + weights + optimizer state, the whole peak comes at the first micro-step | as in issue 17's bench; an out-of-memory error there has cost the start-up, and the process frees its memory as a crashed one does |
| work per trial | 4,000 sequences (2 epochs of 2,000): 4,000 / batch_size micro-steps | stated choice; a smaller micro-batch (shrink to start) takes more micro-steps, each paying `h` |

With k >= 2 trials computing, each one's micro-step takes the longer of `h + g x 1.11 x (1 + 0.44 (k - 1))` (its own step, its kernels waiting for the others') and `(g + h) x Σu x 1.11` (its share of a saturated card); a trial that is starting up computes nothing. Until 2026-11-26 the card used `g x max(1, Σu) x (1 + 0.19 (k - 1)) x 1.05 + h` with Gandiva's 19 % per co-runner and an assumed 5 % slicing; the H200 showed it 1.4-1.5x too slow for four compute-bound trials and too fast for small ones."""


def fmt_row(r):
    wait = "-" if r["p95_wait"] is None else r["p95_wait"]
    return (f"| {r['mode']} | {r['makespan']} | {r['complete']} of {r['configurations']} | "
            f"{r['attempts']} | {r['gpu_seconds_per_complete']} | {r['runtime_oom']} "
            f"({r['runtime_oom_after_20']}) | {r['lost']} | {r['fail']} | {r['mean_busy']:.2f} | "
            f"{wait} |")


HEADER = ["| mode | makespan (s) | COMPLETE | attempts | GPU-s / COMPLETE | run-time OOMs (after trial 20) | lost | FAIL | mean busy share | p95 wait (s) |",
          "|---|---|---|---|---|---|---|---|---|---|"]


def medians(runs, names):
    rows = []
    for name in names:
        rs = [r for _, rows_ in runs for r in rows_ if r["mode"] == name]
        if len(rs) < len(runs):
            continue
        med = lambda k: statistics.median(r[k] for r in rs)
        waits = [r["p95_wait"] for r in rs if r["p95_wait"] is not None]
        rows.append({"mode": name, "makespan": round(med("makespan")),
                     "complete": round(med("complete")),
                     "configurations": round(med("configurations")),
                     "attempts": round(med("attempts")),
                     "gpu_seconds_per_complete": round(med("gpu_seconds_per_complete")),
                     "runtime_oom": round(med("runtime_oom")),
                     "runtime_oom_after_20": round(med("runtime_oom_after_20")),
                     "lost": round(med("lost")), "fail": round(med("fail")),
                     "mean_busy": med("mean_busy"),
                     "p95_wait": round(statistics.median(waits)) if waits else None})
    return rows


def verdict(median_rows):
    by = {r["mode"]: r for r in median_rows}
    pars = [r for r in median_rows if r["mode"].startswith("PAR")]
    best = min(pars, key=lambda r: r["makespan"])
    auto, par2 = by[AUTO], by.get("PAR=2")
    vs_best = auto["makespan"] / best["makespan"]
    vs_par2 = auto["makespan"] / par2["makespan"] if par2 else float("nan")
    checks = [(f"makespan <= 1.0x the best fixed PAR ({best['mode']})", vs_best <= 1.0,
               f"{vs_best:.2f}x"),
              ("makespan <= 0.8x PAR=2", vs_par2 <= 0.8, f"{vs_par2:.2f}x"),
              ("0 run-time OOMs after trial 20", auto["runtime_oom_after_20"] == 0,
               str(auto["runtime_oom_after_20"])),
              ("0 lost", auto["lost"] == 0, str(auto["lost"])),
              ("0 FAIL", auto["fail"] == 0, str(auto["fail"]))]
    lines = ["| goal (medians) | measured | met |", "|---|---|---|"]
    lines += [f"| {what} | {value} | {'yes' if ok else 'no'} |" for what, ok, value in checks]
    return lines, all(ok for _, ok, _ in checks), best


def tpe_lines(tpe):
    if not tpe:
        return []
    longest = max(points[-1][0] for points, _ in tpe.values() if points)
    marks = [round(longest * f) for f in (0.1, 0.25, 0.5, 0.75, 1.0)]
    lines = ["", "With TPE instead of the list (n_startup_trials 20, the first run's seed; "
             f"{next(iter(tpe.values()))[1]['configurations']} configurations per mode): best "
             "value so far against the makespan's clock (simulated seconds since the first start).",
             "", "| mode | " + " | ".join(f"best at {m} s" for m in marks) +
             " | makespan (s) | run-time OOMs | lost |",
             "|---|" + "---|" * (len(marks) + 3)]
    for name, (points, row) in tpe.items():
        lines.append(f"| {name} | " + " | ".join(best_at(points, m) for m in marks) +
                     f" | {row['makespan']} | {row['runtime_oom']} | {row['lost']} |")
    return lines


def best_at(points, at):
    before = [v for s, v in points if s <= at]
    return f"{before[-1]:.4f}" if before else "-"


def write(args, runs, tpe, total):
    names = []
    for _, rows in runs:
        names += [r["mode"] for r in rows if r["mode"] not in names]
    lines = [f"`bench/run_packing_bench.sh` (issue 32): {args.trials} configurations of the "
             "criteria space (`configs/criteria.json`, seven models, heavy/base), drawn once per "
             "run by tune's random sampler with the run's seed and enqueued in every mode's "
             "study, brought to COMPLETE on one simulated 24 GiB card by PAR = 1-4 independent "
             "`tune` workers (no ledger, no admission; `retry_oom` 4: a configuration that ran "
             "out of memory is re-enqueued, at most 5 attempts, then it is *lost*) and by "
             f"`tune --jobs auto` (admission, levers, reservations, calibration, shrink to start "
             f"with `memory.min_micro_batch` 4, `max_busy` 1, at most {args.max_jobs} at once). "
             f"Time runs {1 / args.time_scale:.0f}x faster than on the modelled card (one "
             f"simulated second is {1000 * args.time_scale:.1f} ms); every time below is "
             "simulated seconds.", "", CONSTANTS, "",
             "Metrics: *makespan*, from the first trial's start to the last trial's end (every "
             "configuration COMPLETE or lost); *GPU-s / COMPLETE*, the seconds trial processes "
             "held the card (start-ups and out-of-memory attempts included) per COMPLETE "
             "configuration; *run-time OOMs*, attempts that ran out of memory on the card (after "
             "trial 20: trial number >= 20); *mean busy share*, the card's min(1, Σu) averaged "
             "over the makespan (sampled every 50 ms of real time); *p95 wait*, `--jobs auto`'s "
             "time from a trial's planning to its start (fixed PAR workers do not queue)."]
    for seed, rows in runs:
        lines += ["", f"Run with list seed {seed}:", ""] + HEADER + [fmt_row(r) for r in rows]
    median_rows = medians(runs, names)
    lines += ["", f"Medians of the {len(runs)} runs:", ""] + HEADER + [fmt_row(r) for r in median_rows]
    goal, met, best = verdict(median_rows)
    lines += ["", f"Verdict against the goal (issue 32, item 4): {'met' if met else 'missed'}.",
              ""] + goal
    lines += tpe_lines(tpe)
    lines += ["", f"Whole benchmark: {total / 60:.0f} minutes of real time."]
    begin, end = benchdoc.markers("packing")
    section = "\n".join([begin, "## Packing trials on one card: --jobs auto vs fixed PAR", "",
                         f"Machine: {benchdoc.machine()}; load before the run: {args.loadavg}.",
                         ""] + lines + ["", "<!-- packing-notes -->", end])
    path = os.path.join(ROOT, "docs", "benchmarks.md")
    notes = existing_notes(path)
    if notes:
        section = section.replace("<!-- packing-notes -->", notes)
    benchdoc.write_section(path, "packing", section)


def existing_notes(path):
    """The hand-written reading of the results kept between runs (between the notes markers)."""
    with open(path) as f:
        text = f.read()
    begin, end = "<!-- packing-notes -->", "<!-- /packing-notes -->"
    if begin in text and end in text:
        return text[text.index(begin):text.index(end) + len(end)]
    return ""
