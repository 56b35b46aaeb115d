#!/usr/bin/env python3
"""TorchScript text classifiers for tune's "train" objective (docs/config.md, "TorchScript models").

    torchscript_models.py block-attention --out m.pt --vocab-size 8000 --num-labels 10 [--layers 4]
    torchscript_models.py bag --out m.pt --vocab-size 8000 --num-labels 10
    torchscript_models.py lstm --out m.pt --vocab-size 8000 --num-labels 10
    torchscript_models.py cnn --out m.pt --vocab-size 8000 --num-labels 10

Each module's forward(input_ids: Tensor[B, T] int64, attention_mask: Tensor[B, T] int64) returns
the logits, Tensor[B, num_labels], as tune requires; the file is written with
torch.jit.script(model).save(path).

block-attention is the architecture of a user report, scaled to CPU: every layer splits the
hidden state into 16 blocks of 4 dimensions, runs a separate self-attention over each block (its
own QKV projections, 2 heads), then a cross-block attention over all 64 dimensions (8 heads),
then a feed-forward network; post-LN residuals. A masked mean over the tokens feeds a
classification head. lstm is a bidirectional two-layer LSTM classifier and cnn a convolutional
text classifier (Kim-style, two 1-D convolutions and a masked max-pool): the benchmark's other
architectures (docs/benchmarks.md, bench/torchscript_memory.py). bag is a small embedding-bag
classifier (tests).
"""
import argparse
import math
from typing import List

import torch
from torch import nn


class SelfAttention(nn.Module):
    """Multi-head self-attention over `dim` features; padded keys are masked out."""

    def __init__(self, dim: int, heads: int, dropout: float = 0.0):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(key_mask[:, None, None, :] == 0, -1e9)
        probs = self.dropout(scores.softmax(-1))
        return self.out((probs @ v).transpose(1, 2).reshape(B, T, D))


class BlockLayer(nn.Module):
    def __init__(self, blocks: int, block_dim: int, block_heads: int, cross_heads: int,
                 ffn: int, dropout: float):
        super().__init__()
        dim = blocks * block_dim
        self.block_dim = block_dim
        self.block_attention = nn.ModuleList(
            [SelfAttention(block_dim, block_heads, dropout) for _ in range(blocks)])
        self.block_norm = nn.LayerNorm(dim)
        self.cross_attention = SelfAttention(dim, cross_heads, dropout)
        self.cross_norm = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn), nn.GELU(), nn.Linear(ffn, dim))
        self.ffn_norm = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        outs: List[torch.Tensor] = []
        for i, attention in enumerate(self.block_attention):
            block = x[:, :, i * self.block_dim:(i + 1) * self.block_dim]
            outs.append(attention(block, mask))
        x = self.block_norm(x + self.dropout(torch.cat(outs, dim=-1)))
        x = self.cross_norm(x + self.dropout(self.cross_attention(x, mask)))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))


class BlockAttentionClassifier(nn.Module):
    def __init__(self, vocab_size: int, num_labels: int, layers: int = 4, blocks: int = 16,
                 block_dim: int = 4, block_heads: int = 2, cross_heads: int = 8,
                 max_positions: int = 512, dropout: float = 0.1):
        super().__init__()
        dim = blocks * block_dim
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size, dim)
        self.position = nn.Embedding(max_positions, dim)
        self.embed_norm = nn.LayerNorm(dim)
        self.layers = nn.ModuleList([BlockLayer(blocks, block_dim, block_heads, cross_heads,
                                                4 * dim, dropout) for _ in range(layers)])
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.embed_norm(self.embed(input_ids) + self.position(positions)[None])
        for layer in self.layers:
            x = layer(x, attention_mask)
        m = attention_mask.to(x.dtype).unsqueeze(-1)
        pooled = (x * m).sum(1) / m.sum(1).clamp(min=1.0)
        return self.classifier(pooled)


class BagClassifier(nn.Module):
    """Embeddings, LayerNorm, a masked mean and a two-layer head."""

    def __init__(self, vocab_size: int, num_labels: int, dim: int = 16):
        super().__init__()
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size, dim)
        self.norm = nn.LayerNorm(dim)
        self.hidden = nn.Linear(dim, dim)
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.embed(input_ids))
        m = attention_mask.to(x.dtype).unsqueeze(-1)
        pooled = (x * m).sum(1) / m.sum(1).clamp(min=1.0)
        return self.classifier(torch.tanh(self.hidden(pooled)))


class LstmClassifier(nn.Module):
    """Embeddings, a bidirectional LSTM, a masked mean over the tokens and a linear head."""

    def __init__(self, vocab_size: int, num_labels: int, dim: int = 64, hidden: int = 128,
                 layers: int = 2, dropout: float = 0.1):
        super().__init__()
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=layers, batch_first=True,
                            bidirectional=True, dropout=dropout)
        self.classifier = nn.Linear(2 * hidden, num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        x, _ = self.lstm(self.embed(input_ids))
        m = attention_mask.to(x.dtype).unsqueeze(-1)
        pooled = (x * m).sum(1) / m.sum(1).clamp(min=1.0)
        return self.classifier(pooled)


class CnnClassifier(nn.Module):
    """Embeddings, two 1-D convolutions with GELU, a masked max-pool and a linear head."""

    def __init__(self, vocab_size: int, num_labels: int, dim: int = 64, channels: int = 128,
                 dropout: float = 0.1):
        super().__init__()
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size, dim)
        self.conv1 = nn.Conv1d(dim, channels, kernel_size=5, padding=2)
        self.conv2 = nn.Conv1d(channels, channels, kernel_size=3, padding=1)
        self.act = nn.GELU()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(channels, num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids).transpose(1, 2)  # [B, dim, T]
        x = self.act(self.conv1(x))
        x = self.act(self.conv2(self.dropout(x)))
        x = x.masked_fill(attention_mask[:, None, :] == 0, -1e4)
        return self.classifier(self.dropout(x.max(dim=2).values))


def make(kind: str, vocab_size: int, num_labels: int, layers: int = 4, dropout: float = 0.1,
         seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    if kind == "block-attention":
        return BlockAttentionClassifier(vocab_size, num_labels, layers=layers, dropout=dropout)
    if kind == "bag":
        return BagClassifier(vocab_size, num_labels)
    if kind == "lstm":
        return LstmClassifier(vocab_size, num_labels, dropout=dropout)
    if kind == "cnn":
        return CnnClassifier(vocab_size, num_labels, dropout=dropout)
    raise ValueError(f"unknown model kind {kind!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind", choices=["block-attention", "bag", "lstm", "cnn"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--num-labels", type=int, required=True)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    model = make(args.kind, args.vocab_size, args.num_labels, args.layers, args.dropout, args.seed)
    torch.jit.script(model).save(args.out)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out}: {args.kind}, {n} parameters, vocab {args.vocab_size}, "
          f"{args.num_labels} labels")


if __name__ == "__main__":
    main()
