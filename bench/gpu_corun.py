#!/usr/bin/env python3
"""How training trials that share one CUDA card slow each other down: the measurement behind the
simulated card's compute model (docs/benchmarks.md, "packing").

For each configuration, K worker processes each build a BERT-base-shaped encoder classifier
(12 layers, hidden 768, 12 heads, FFN 3072, vocabulary 30522; torch.nn.TransformerEncoderLayer),
train it with AdamW under bf16 autocast in a plain Python loop (loss.item() every step, as a
user's loop logs it), and join in phases: worker i starts computing at phase i and runs to the
end, so phase k has k trials computing at once while the others wait, holding their memory. Each
worker records the start and end time of every step; this process samples the card's
utilisation from NVML (nvidia-ml-py) every 50 ms.

Per phase (the first 0.5 s after a phase starts left out): each computing worker's mean step time,
its slowdown against phase 1 (alone), the summed throughput, and the card's mean utilisation. A
trial alone gives u = utilisation (its busy share), so g = u * step and h = (1 - u) * step.

Usage: gpu_corun.py [--configs 8x128,32x256] [--workers 4] [--phase 2.5] [--out FILE.json]
Needs: torch with CUDA, a CUDA device; nvidia-ml-py for the utilisation (else it is left out).
"""
import argparse
import json
import multiprocessing as mp
import os
import sys
import time


def worker(index, batch, length, start, phase, phases, queue, device):
    import torch
    from torch import nn

    torch.manual_seed(index)
    dev = torch.device(device)
    cuda = dev.type == "cuda"

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(30522, 768)
            self.pos = nn.Embedding(512, 768)
            self.norm = nn.LayerNorm(768)
            layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.1, activation="gelu",
                                               batch_first=True)
            self.layers = nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
            self.head = nn.Linear(768, 2)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device)
            x = self.norm(self.tok(ids) + self.pos(pos))
            return self.head(self.layers(x)[:, 0])

    model = Encoder().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    ids = torch.randint(5, 30522, (batch, length), device=dev)
    labels = torch.randint(0, 2, (batch,), device=dev)

    def step():
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(ids), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for _ in range(3):  # kernels chosen, memory reserved, optimizer state built
        step()
    if cuda:
        torch.cuda.synchronize()
    queue.put(("ready", index, torch.cuda.max_memory_allocated() if cuda else None))
    while start.value <= 0:  # the common start, set once every worker is ready
        time.sleep(0.005)
    start_at = start.value
    begin = start_at + index * phase
    end = start_at + phases * phase
    while time.time() < begin:
        time.sleep(0.005)
    steps = []
    while time.time() < end:
        t0 = time.time()
        step()
        steps.append((t0, time.time()))
    queue.put(("steps", index, steps))


def sample_utilization(until, out):
    try:
        import pynvml
    except ImportError:
        return
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    while time.time() < until:
        out.append((time.time(), pynvml.nvmlDeviceGetUtilizationRates(handle).gpu))
        time.sleep(0.05)
    pynvml.nvmlShutdown()


def run_config(batch, length, workers, phase, ctx, device):
    queue = ctx.Queue()
    start = ctx.Value("d", 0.0)  # the common start time, set once every worker is ready
    procs = []
    for i in range(workers):
        p = ctx.Process(target=worker, args=(i, batch, length, start, phase, workers, queue, device))
        p.start()
        procs.append(p)
    peaks = {}
    for _ in range(workers):
        kind, i, peak = queue.get(timeout=120)
        peaks[i] = peak
    start_at = time.time() + 0.5
    with start.get_lock():
        start.value = start_at
    util = []
    sample_utilization(start_at + workers * phase, util)
    steps = {}
    for _ in range(workers):
        kind, i, s = queue.get(timeout=120)
        steps[i] = s
    for p in procs:
        p.join(timeout=60)
    rows = []
    for k in range(1, workers + 1):
        lo, hi = start_at + (k - 1) * phase + 0.5, start_at + k * phase
        times = {i: [e - b for b, e in steps[i] if b >= lo and e <= hi] for i in range(k)}
        per_step = {i: sum(t) / len(t) for i, t in times.items() if t}
        u = [v for t, v in util if lo <= t <= hi]
        rows.append({
            "batch": batch, "length": length, "computing": k,
            "step_s": {str(i): round(v, 5) for i, v in per_step.items()},
            "mean_step_s": round(sum(per_step.values()) / max(len(per_step), 1), 5),
            "steps": sum(len(t) for t in times.values()),
            "sequences_per_s": round(sum(batch / v for v in per_step.values()), 2),
            "utilization": round(sum(u) / len(u) / 100, 3) if u else None,
            "peak_allocated_bytes": peaks.get(0),
        })
    alone = rows[0]["mean_step_s"]
    for r in rows:
        r["slowdown"] = round(r["mean_step_s"] / alone, 3) if alone else None
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="8x128,32x256,64x512")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--phase", type=float, default=2.5)
    ap.add_argument("--out")
    ap.add_argument("--device", default="cuda", help="cuda (default), or cpu to try the script")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    rows = []
    for c in args.configs.split(","):
        b, t = (int(x) for x in c.split("x"))
        t0 = time.time()
        got = run_config(b, t, args.workers, args.phase, ctx, args.device)
        rows += got
        for r in got:
            print(json.dumps(r), flush=True)
        print(f"# {c}: {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "workers": args.workers, "phase_s": args.phase}, f, indent=1)


if __name__ == "__main__":
    main()
