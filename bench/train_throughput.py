"""PyTorch eager side of the training-throughput benchmark (issue 5).

The same model, data shape, optimizer, schedule and step as tune's trainer
(src/torch/torch_models.cpp, src/torch/torch_trainer.cpp), written in plain PyTorch:
BERT-style post-LN encoder (word + position + token-type embeddings, LayerNorm eps 1e-12,
dropout 0.1), tanh pooler on [CLS], a linear head; N(0, 0.02) encoder init; AdamW with
weight decay 0.01 except biases and LayerNorms; loss summed over the batch and divided by
its size; gradient clipping at 1.0; a linear schedule; zero_grad(set_to_none=True). Two
epochs of `steps` optimizer steps; the first warms up, the second is timed, and each
epoch ends with the evaluation of one example (as in tune_bench_train_throughput). The
timed epoch's wall time and the process's CPU time are both reported.
Prints one JSON line.

--device cuda runs PyTorch's fastest eager loop for this model on a card: inputs from pinned
memory copied non_blocking, torch.autocast for --precision bf16/fp16 (GradScaler for fp16),
AdamW(fused=True) and clip_grad_norm_(foreach=True) where this torch has them (>= 2.0), no
.item() per step (the loss is checked once per epoch), and the epoch timed after
torch.cuda.synchronize(). On the CPU the loop is the one issue 5 measured.

Run with Debian's /usr/bin/python3 (python3-torch 1.13).
"""
import argparse
import json
import math
import random
import time

import torch
import torch.nn.functional as F
from torch import nn


class Layer(nn.Module):
    def __init__(self, h, heads, inter, p):
        super().__init__()
        self.heads, self.d = heads, h // heads
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.attn_out, self.attn_ln = nn.Linear(h, h), nn.LayerNorm(h, eps=1e-12)
        self.inter, self.out, self.out_ln = nn.Linear(h, inter), nn.Linear(inter, h), nn.LayerNorm(h, eps=1e-12)
        self.drop = nn.Dropout(p)
        self.attn_drop = nn.Dropout(p)

    def forward(self, x, mask):
        b, t, h = x.shape

        def split(y):
            return y.view(b, t, self.heads, self.d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)).mul_(1.0 / math.sqrt(self.d)).add_(mask)
        probs = self.attn_drop(torch.softmax(scores, -1))
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, h)
        a = self.attn_ln(self.drop(self.attn_out(ctx)) + x)
        return self.out_ln(self.drop(self.out(F.gelu(self.inter(a)))) + a)


class Classifier(nn.Module):
    def __init__(self, layers, h, heads, inter, vocab, labels, p=0.1):
        super().__init__()
        self.word = nn.Embedding(vocab, h, padding_idx=0)
        self.pos = nn.Embedding(512, h)
        self.token_type = nn.Embedding(2, h)
        self.emb_ln, self.emb_drop = nn.LayerNorm(h, eps=1e-12), nn.Dropout(p)
        self.layers = nn.ModuleList(Layer(h, heads, inter, p) for _ in range(layers))
        self.pooler = nn.Linear(h, h)
        self.head_drop, self.head = nn.Dropout(p), nn.Linear(h, labels)
        with torch.no_grad():
            for m in [self.word, self.pos, self.token_type, self.layers, self.pooler]:
                for mod in m.modules():
                    if isinstance(mod, (nn.Linear, nn.Embedding)):
                        mod.weight.normal_(0.0, 0.02)
                    if isinstance(mod, nn.Linear):
                        mod.bias.zero_()
            self.word.weight[0].zero_()

    def forward(self, ids, attention_mask):
        positions = torch.arange(ids.size(1), device=ids.device).unsqueeze(0)
        x = self.word(ids) + self.pos(positions) + self.token_type.weight[0]
        x = self.emb_drop(self.emb_ln(x))
        mask = (1.0 - attention_mask.to(x.dtype)).mul_(-10000.0).unsqueeze(1).unsqueeze(2)
        for layer in self.layers:
            x = layer(x, mask)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return self.head(self.head_drop(pooled))


def main():
    ap = argparse.ArgumentParser()
    for k, d in [("layers", 4), ("hidden", 256), ("heads", 4), ("intermediate", 1024),
                 ("vocab", 16384), ("batch", 16), ("length", 64), ("steps", 8), ("threads", 1)]:
        ap.add_argument("--" + k, type=int, default=d)
    ap.add_argument("--name", default="encoder")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    a = ap.parse_args()
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    two = tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 0)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rng = random.Random(0)

    def example():
        return [2] + [rng.randrange(4, a.vocab) for _ in range(a.length - 2)] + [3]

    train = [(example(), i % 2) for i in range(a.steps * a.batch)]
    validation = [(example(), 0)]
    model = Classifier(a.layers, a.hidden, a.heads, a.intermediate, a.vocab, 2).to(device)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or "_ln" in name else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=5e-5, betas=(0.9, 0.999), eps=1e-8,
                            **({"fused": True} if cuda and two else {}))
    scaler = torch.cuda.amp.GradScaler() if cuda and a.precision == "fp16" else None

    def to_device(t):
        return t.pin_memory().to(device, non_blocking=True) if cuda else t
    total = 2 * a.steps
    step = 0
    seconds, cpu_seconds = [], []
    for epoch in range(2):
        start, cpu_start = time.perf_counter(), time.process_time()
        model.train()
        order = list(range(len(train)))
        rng.shuffle(order)
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        for s in range(a.steps):
            batch = [train[i] for i in order[s * a.batch:(s + 1) * a.batch]]
            ids = to_device(torch.tensor([e[0] for e in batch], dtype=torch.long))
            mask = torch.ones_like(ids)
            labels = to_device(torch.tensor([e[1] for e in batch], dtype=torch.long))
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                logits = model(ids, mask)
            summed = F.cross_entropy(logits.float(), labels, reduction="sum")
            if cuda:
                loss_sum += summed.detach()
            elif not math.isfinite(summed.item()):
                raise SystemExit("loss diverged")
            loss = summed / len(batch)
            (scaler.scale(loss) if scaler else loss).backward()
            if scaler:
                scaler.unscale_(opt)
            if cuda and two:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
            else:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            lr = 5e-5 * max(0.0, (total - step) / total)
            for g in opt.param_groups:
                g["lr"] = lr
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            model.zero_grad(set_to_none=True)
            step += 1
        if cuda and not math.isfinite(loss_sum.item()):
            raise SystemExit("loss diverged")
        model.eval()
        with torch.no_grad():
            ids = to_device(torch.tensor([e[0] for e in validation], dtype=torch.long))
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                logits = model(ids, torch.ones_like(ids)).float()
            F.cross_entropy(logits, to_device(torch.tensor([e[1] for e in validation])),
                            reduction="sum").item()
            logits.argmax(1).tolist()
        if cuda:
            torch.cuda.synchronize(device)
        seconds.append(time.perf_counter() - start)
        cpu_seconds.append(time.process_time() - cpu_start)
    print(json.dumps({"impl": "pytorch", "name": a.name,
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "threads": a.threads, "batch": a.batch, "length": a.length, "steps": a.steps,
                      "warmup_seconds": round(seconds[0], 4), "seconds": round(seconds[1], 4),
                      "samples_per_second": round(a.steps * a.batch / seconds[1], 3),
                      "cpu_seconds": round(cpu_seconds[1], 4),
                      "samples_per_cpu_second": round(a.steps * a.batch / cpu_seconds[1], 3),
                      "torch": torch.__version__, "device": a.device,
                      "precision": a.precision,
                      "peak_memory_bytes": torch.cuda.max_memory_allocated(device) if cuda else -1}))


if __name__ == "__main__":
    main()
