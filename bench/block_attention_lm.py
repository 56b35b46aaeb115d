#!/usr/bin/env python3
"""The architecture of user report 003 as the user trained it, scaled to a CPU: a causal
language model whose layers each run 16 separate block attentions, one per 4-dimensional slice of
the 64-dimensional hidden state (2 heads each, own QKV projections), then a cross-block
attention over all 64 dimensions (8 heads), a feed-forward network and layer norms. The report
has 24 layers in fp16 on a 14.74 GiB card; here 4 layers in fp32 train on the CPU, on the
character-level text of tune's docs.

A `command` trial of tune (bench/block_attention.json): batch size and sequence length come
from TUNE_PARAM_BATCH_SIZE / TUNE_PARAM_MAX_LENGTH, the learning rate from
TUNE_PARAM_LEARNING_RATE. It trains STEPS optimizer steps, prints the peak memory of a training
step as tune's memory guard reads it ({"memory_peak": BYTES}: on CUDA
torch.cuda.max_memory_allocated(), on the CPU the process's peak resident set), then the
validation loss ({"value": ...}).

The simulated card (TUNE_SIMULATED_CARD, memory.simulate): the process charges its peak after
the first optimizer step, when PyTorch would have reached it on a GPU; a charge the card (or the
trial's reservation, TUNE_MEMORY_BUDGET) cannot hold ends the trial with PyTorch's out-of-memory
message, as the user's run ended."""
import ctypes
import glob
import json
import math
import os
import resource
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HIDDEN, BLOCKS, BLOCK_HEADS, CROSS_HEADS, LAYERS = 64, 16, 2, 8, 4
STEPS = int(os.environ.get("BLOCK_LM_STEPS", "4"))


class Attention(nn.Module):
    """Causal multi-head self-attention over `dim` features (explicit softmax, as the user's)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(b, t, d))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        width = HIDDEN // BLOCKS
        self.blocks = nn.ModuleList(Attention(width, BLOCK_HEADS) for _ in range(BLOCKS))
        self.cross = Attention(HIDDEN, CROSS_HEADS)
        self.ff = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(),
                                nn.Linear(4 * HIDDEN, HIDDEN))
        self.norms = nn.ModuleList(nn.LayerNorm(HIDDEN) for _ in range(3))

    def forward(self, x, mask):
        h = self.norms[0](x)
        slices = h.split(HIDDEN // BLOCKS, dim=-1)
        x = x + torch.cat([blk(s, mask) for blk, s in zip(self.blocks, slices)], dim=-1)
        x = x + self.cross(self.norms[1](x), mask)
        return x + self.ff(self.norms[2](x))


class BlockAttentionLM(nn.Module):
    def __init__(self, vocab, max_length):
        super().__init__()
        self.embed = nn.Embedding(vocab, HIDDEN)
        self.position = nn.Embedding(max_length, HIDDEN)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, vocab)

    def forward(self, ids):
        t = ids.shape[1]
        mask = torch.ones(t, t, dtype=torch.bool, device=ids.device).triu(1)
        x = self.embed(ids) + self.position(torch.arange(t, device=ids.device))
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


def corpus():
    here = os.path.dirname(os.path.abspath(__file__))
    text = "".join(open(p, encoding="utf-8").read() for p in sorted(glob.glob(
        os.path.join(here, "..", "docs", "*.md"))))
    chars = sorted(set(text))
    ids = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
    split = int(0.9 * len(ids))
    return len(chars), ids[:split], ids[split:]


def batch(ids, b, t, generator):
    starts = torch.randint(0, len(ids) - t - 1, (b,), generator=generator)
    x = torch.stack([ids[s:s + t] for s in starts])
    y = torch.stack([ids[s + 1:s + t + 1] for s in starts])
    return x, y


def peak_bytes(device):
    # The three lines docs/config.md shows ("Reporting the peak").
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def charge_card(bytes_):
    """Charges the simulated card, if any: False when it (or the reservation) cannot hold it."""
    budget = int(os.environ.get("TUNE_MEMORY_BUDGET", "0"))
    card = os.environ.get("TUNE_SIMULATED_CARD")
    if budget and bytes_ > budget:
        return False
    if not card:
        return True
    lib = ctypes.CDLL(os.path.join(os.environ["TUNE_LIBRARY_DIR"], "libtune_train.so"))
    lib.tune_simulated_card_charge.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64]
    return lib.tune_simulated_card_charge(card.encode(), int(os.environ["TUNE_SIMULATED_CARD_BYTES"]),
                                          bytes_) == 0


def main():
    b = int(os.environ.get("TUNE_PARAM_BATCH_SIZE", "4"))
    t = int(os.environ.get("TUNE_PARAM_MAX_LENGTH", "64"))
    lr = float(os.environ.get("TUNE_PARAM_LEARNING_RATE", "3e-3"))
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("BLOCK_LM_THREADS", "1")))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    vocab, train, valid = corpus()
    model = BlockAttentionLM(vocab, t).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(1)
    for step in range(STEPS):
        x, y = batch(train, b, t, generator)
        loss = F.cross_entropy(model(x.to(device)).flatten(0, 1), y.to(device).flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step == 0:
            peak = peak_bytes(device)
            if not charge_card(peak):
                print(f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                      f"{peak} bytes (simulated card {os.environ.get('TUNE_SIMULATED_CARD')})",
                      file=sys.stderr)
                sys.exit(1)
    print(json.dumps({"memory_peak": peak_bytes(device)}), flush=True)
    with torch.no_grad():
        x, y = batch(valid, 8, 64, torch.Generator().manual_seed(2))
        value = F.cross_entropy(model(x.to(device)).flatten(0, 1), y.to(device).flatten()).item()
    print(json.dumps({"value": value}))


if __name__ == "__main__":
    main()
