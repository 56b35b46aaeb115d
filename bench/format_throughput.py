#!/usr/bin/python3
"""Formats bench/run_throughput_table.sh's JSON lines as issue 63's table (markdown): per row
(model, batch x length, unpadded or padded) each side's samples/s after warm-up, model TFLOP/s
(6 x non-embedding parameters x T + 12 x layers x hidden x T^2 per sample), the MFU against
--peak-tflops, the ratios to PyTorch's fastest eager loop (a) and to torch.compile of it (b), and
the peak memory.

Usage: bench/format_throughput.py RESULTS.jsonl [--peak-tflops P]
"""
import argparse
import json
from collections import OrderedDict

SIDES = [("tune", "eager"), ("tune", "sdpa"), ("tune", "sdpa+fused_qkv"),
         ("tune", "sdpa+fused_qkv+fused_elementwise+cuda_graphs"), ("tune", "auto"),
         ("pytorch-eager", None),
         ("pytorch-compile", None), ("pytorch", None), ("pytorch-transformers", None)]
LABEL = {("pytorch-eager", None): "(a) PyTorch eager, SDPA",
         ("pytorch-compile", None): "(b) torch.compile of (a)",
         ("pytorch", None): "(c) hand-written loop",
         ("pytorch-transformers", None): "transformers (eager)"}
# A tune side's attention mode and switches ("sdpa+fused_qkv+cuda_graphs") in words.
PART = {"eager": "eager attention", "sdpa": "SDPA", "auto": "auto", "fused_qkv": "fused Q/K/V",
        "fused_elementwise": "fused kernels", "cuda_graphs": "CUDA graphs"}


def side_label(side):
    if side[0] == "tune" and side[1]:
        return "tune, " + ", ".join(PART.get(p, p) for p in side[1].split("+"))
    return LABEL.get(side, side[0])


def flops_per_sample(non_embedding, layers, hidden, t):
    return 6.0 * non_embedding * t + 12.0 * layers * hidden * t * t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--peak-tflops", type=float, default=0.0)
    a = ap.parse_args()
    rows = OrderedDict()
    for line in open(a.results):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        key = (r["name"], r["batch"], r["length"], bool(r.get("padded")))
        rows.setdefault(key, []).append(r)
    out = []
    head = "| side | samples/s | model TFLOP/s |" + (" MFU |" if a.peak_tflops else "") + \
        " vs (a) | vs (b) | peak memory |"
    for (name, b, t, padded), runs in rows.items():
        py = [r for r in runs if "non_embedding_parameters" in r]
        non_emb = py[0]["non_embedding_parameters"] if py else None
        best = {}
        for r in runs:
            attention = r.get("attention") if r["impl"] == "tune" else None
            if attention and r.get("fused_qkv"):
                attention += "+fused_qkv"
            if attention and r.get("fused_elementwise"):
                attention += "+fused_elementwise"
            if attention and r.get("cuda_graphs") == "on":
                attention += "+cuda_graphs"
            side = (r["impl"], attention, r.get("libtorch", ""))
            if side not in best or r["samples_per_second"] > best[side]["samples_per_second"]:
                best[side] = r
        ref_a = best.get(("pytorch-eager", None, ""), {}).get("samples_per_second")
        ref_b = best.get(("pytorch-compile", None, ""), {}).get("samples_per_second")
        out.append(f"\n**{name}, {b} x {t}, {'padded' if padded else 'unpadded'}**\n")
        out.append(head)
        out.append("|---" * (head.count("|") - 1) + "|")
        order = {s: i for i, s in enumerate(SIDES)}
        for side in sorted(best, key=lambda k: (order.get(k[:2], 99), k[2])):
            r = best[side]
            n = non_emb
            if n is None and "hidden" in r:  # tune alone: its parameters less the embeddings
                n = r["parameters"] - r["hidden"] * (r["vocab"] + r["max_positions"] +
                                                      r["type_vocab"])
            layers = r.get("layers")
            hidden = r.get("hidden")
            sps = r["samples_per_second"]
            tflops = (flops_per_sample(n, layers, hidden, t) * sps / 1e12
                      if n and layers and hidden else None)
            label = side_label(side[:2])
            if side[2]:
                label = label.replace("tune,", f"tune (LibTorch {side[2]}),")
            cells = [label, f"{sps:,.2f}", f"{tflops:.3f}" if tflops else "?"]
            if a.peak_tflops:
                cells.append(f"{100 * tflops / a.peak_tflops:.1f} %" if tflops else "?")
            cells.append(f"{sps / ref_a:.2f}x" if ref_a else "")
            cells.append(f"{sps / ref_b:.2f}x" if ref_b else "")
            peak = r.get("peak_memory_bytes", -1)
            cells.append(f"{peak / 2**20:,.0f} MiB" if peak and peak > 0 else "")
            out.append("| " + " | ".join(cells) + " |")
    print("\n".join(out).strip())


if __name__ == "__main__":
    main()
