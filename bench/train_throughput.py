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

--loop picks the PyTorch side (issue 63's references, measured in the same run as tune):
  hand     the hand-written attention above, the loop issue 5 measured (the default);
  eager    PyTorch's fastest eager loop: F.scaled_dot_product_attention (no mask for a batch
           without padding, a boolean key-padding mask otherwise; dropout inside the kernel),
           autocast, AdamW(fused=True) and clip_grad_norm_(foreach=True) where this torch has
           them, no .item() per step (the loss is checked once per epoch) -- on the CPU too;
  compile  torch.compile of the eager loop's model (compilation falls in the warm-up epoch);
  transformers  Hugging Face's own model of --model-type (DebertaV2ForSequenceClassification
           for deberta-v2), randomly initialised, trained by the eager loop (as users run it).
--padded 1 draws lengths as real text's (a lognormal with median length/3, sigma 0.6, clipped to
[3, length]) and pads each batch to --length, as tune_bench_train_throughput does.
--model NAME takes a catalog architecture (configs/models.json). The JSON line also carries the
model FLOPs per second: 6 x non-embedding parameters x T + 12 x layers x hidden x T^2 per sample
(the attention's two matmuls, forward and backward), and the MFU against --peak-tflops when given.

Run with Debian's /usr/bin/python3 (python3-torch 1.13) for --loop hand; the other loops need
torch >= 2.0 (tune's environment, .venv/bin/python).
"""
import argparse
import json
import math
import os
import random
import time

import torch
import torch.nn.functional as F
from torch import nn


class Layer(nn.Module):
    def __init__(self, h, heads, inter, p, sdpa=False):
        super().__init__()
        self.heads, self.d, self.p, self.sdpa = heads, h // heads, p, sdpa
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
        if self.sdpa:  # mask: a boolean key-padding mask (True: attend), or None without padding
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                 dropout_p=self.p if self.training else 0.0)
        else:
            scores = torch.matmul(q, k.transpose(-1, -2)).mul_(1.0 / math.sqrt(self.d)).add_(mask)
            probs = self.attn_drop(torch.softmax(scores, -1))
            ctx = torch.matmul(probs, v)
        ctx = ctx.transpose(1, 2).reshape(b, t, h)
        a = self.attn_ln(self.drop(self.attn_out(ctx)) + x)
        return self.out_ln(self.drop(self.out(F.gelu(self.inter(a)))) + a)


class Classifier(nn.Module):
    def __init__(self, layers, h, heads, inter, vocab, labels, p=0.1, sdpa=False,
                 positions=512, token_types=2):
        super().__init__()
        self.sdpa = sdpa
        self.word = nn.Embedding(vocab, h, padding_idx=0)
        self.pos = nn.Embedding(positions, h)
        self.token_type = nn.Embedding(max(token_types, 1), h)
        self.emb_ln, self.emb_drop = nn.LayerNorm(h, eps=1e-12), nn.Dropout(p)
        self.layers = nn.ModuleList(Layer(h, heads, inter, p, sdpa) for _ in range(layers))
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
        if self.sdpa:
            mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        else:
            if attention_mask is None:
                attention_mask = torch.ones_like(ids)
            mask = (1.0 - attention_mask.to(x.dtype)).mul_(-10000.0).unsqueeze(1).unsqueeze(2)
        for layer in self.layers:
            x = layer(x, mask)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return self.head(self.head_drop(pooled))


def catalog_model(name):
    """The architecture of a catalog model (configs/models.json)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "models.json")
    with open(path) as f:
        models = json.load(f)["models"]
    if name not in models:
        raise SystemExit(f"--model {name}: not in configs/models.json")
    return models[name]


def transformers_model(spec, labels):
    """Hugging Face's own classifier of the catalog architecture, randomly initialised."""
    import transformers
    if spec["model_type"] != "deberta-v2":
        raise SystemExit("--loop transformers: only deberta-v2 is wired here")
    config = transformers.DebertaV2Config(
        vocab_size=spec["vocab_size"], hidden_size=spec["hidden_size"],
        num_hidden_layers=spec["num_hidden_layers"],
        num_attention_heads=spec["num_attention_heads"],
        intermediate_size=spec["intermediate_size"],
        max_position_embeddings=spec["max_position_embeddings"], type_vocab_size=0,
        relative_attention=True, position_buckets=spec.get("position_buckets", 256),
        max_relative_positions=-1, pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm",
        share_att_key=True, position_biased_input=False, num_labels=labels)
    return transformers.DebertaV2ForSequenceClassification(config)


def model_flops_per_sample(non_embedding, layers, hidden, t):
    """6 N T for the weights' matmuls (forward and backward) + 12 L H T^2 for attention's two."""
    return 6.0 * non_embedding * t + 12.0 * layers * hidden * t * t


def main():
    ap = argparse.ArgumentParser()
    for k, d in [("layers", 4), ("hidden", 256), ("heads", 4), ("intermediate", 1024),
                 ("vocab", 16384), ("batch", 16), ("length", 64), ("steps", 8), ("threads", 1),
                 ("padded", 0)]:
        ap.add_argument("--" + k, type=int, default=d)
    ap.add_argument("--name", default="encoder")
    ap.add_argument("--model", default="", help="a catalog model's architecture")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--loop", default="hand", choices=["hand", "eager", "compile", "transformers"])
    ap.add_argument("--peak-tflops", type=float, default=0.0,
                    help="the device's dense peak for --precision, for the MFU")
    a = ap.parse_args()
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    two = version >= (2, 0)
    fast = a.loop != "hand"  # the fastest eager loop's habits, on any device
    if fast and not two:
        raise SystemExit(f"--loop {a.loop} needs torch >= 2.0 (this is {torch.__version__})")
    positions, token_types, model_type = 512, 2, "bert"
    if a.model:
        spec = catalog_model(a.model)
        a.layers, a.hidden = spec["num_hidden_layers"], spec["hidden_size"]
        a.heads, a.intermediate = spec["num_attention_heads"], spec["intermediate_size"]
        a.vocab, positions = spec["vocab_size"], spec["max_position_embeddings"]
        token_types, model_type = spec.get("type_vocab_size", 2), spec["model_type"]
        a.name = a.model
    if a.loop == "transformers" and not a.model:
        raise SystemExit("--loop transformers needs --model (a catalog architecture)")
    if model_type == "deberta-v2" and a.loop != "transformers":
        raise SystemExit("deberta-v2 runs with --loop transformers (Hugging Face's own model)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rng = random.Random(0)

    def example():
        n = a.length
        if a.padded:
            n = min(a.length, max(3, round(rng.lognormvariate(math.log(a.length / 3), 0.6))))
        return [2] + [rng.randrange(4, a.vocab) for _ in range(n - 2)] + [3]

    train = [(example(), i % 2) for i in range(a.steps * a.batch)]
    validation = [(example(), 0)]
    if a.loop == "transformers":
        model = transformers_model(spec, 2).to(device)
    else:
        model = Classifier(a.layers, a.hidden, a.heads, a.intermediate, a.vocab, 2,
                           sdpa=fast, positions=positions, token_types=token_types).to(device)
    parameters = sum(p.numel() for p in model.parameters())
    embedding = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Embedding))
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        low = name.lower()
        (no_decay if name.endswith("bias") or "_ln" in name or "layernorm" in low
         else decay).append(p)
    fused = two and (cuda or (fast and version >= (2, 4)))
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=5e-5, betas=(0.9, 0.999), eps=1e-8,
                            **({"fused": True} if fused else {}))
    scaler = torch.cuda.amp.GradScaler() if cuda and a.precision == "fp16" else None
    step_model = torch.compile(model) if a.loop == "compile" else model

    def to_device(t):
        return t.pin_memory().to(device, non_blocking=True) if cuda else t

    def batch_tensors(batch):
        width = a.length
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (e, _) in enumerate(batch):
            ids[i, :len(e)] = torch.tensor(e)
            mask[i, :len(e)] = 1
        unpadded = all(len(e) == width for e, _ in batch)  # known on the host: no sync
        return to_device(ids), (None if unpadded and fast else to_device(mask))

    def forward(m, ids, mask):
        if a.loop == "transformers":
            return m(input_ids=ids, attention_mask=mask).logits
        return m(ids, mask)

    total = 2 * a.steps
    step = 0
    seconds, cpu_seconds = [], []
    for epoch in range(2):
        start, cpu_start = time.perf_counter(), time.process_time()
        step_model.train()
        order = list(range(len(train)))
        rng.shuffle(order)
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        for s in range(a.steps):
            batch = [train[i] for i in order[s * a.batch:(s + 1) * a.batch]]
            ids, mask = batch_tensors(batch)
            labels = to_device(torch.tensor([e[1] for e in batch], dtype=torch.long))
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                logits = forward(step_model, ids, mask)
            summed = F.cross_entropy(logits.float(), labels, reduction="sum")
            if cuda or fast:
                loss_sum += summed.detach()
            elif not math.isfinite(summed.item()):
                raise SystemExit("loss diverged")
            loss = summed / len(batch)
            (scaler.scale(loss) if scaler else loss).backward()
            if scaler:
                scaler.unscale_(opt)
            if two and (cuda or fast):
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
        if (cuda or fast) and not math.isfinite(loss_sum.item()):
            raise SystemExit("loss diverged")
        step_model.eval()
        with torch.no_grad():
            ids, mask = batch_tensors(validation)
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                logits = forward(step_model, ids, mask).float()
            F.cross_entropy(logits, to_device(torch.tensor([e[1] for e in validation])),
                            reduction="sum").item()
            logits.argmax(1).tolist()
        if cuda:
            torch.cuda.synchronize(device)
        seconds.append(time.perf_counter() - start)
        cpu_seconds.append(time.process_time() - cpu_start)
    samples_per_second = a.steps * a.batch / seconds[1]
    flops = model_flops_per_sample(parameters - embedding, a.layers, a.hidden, a.length)
    tflops = flops * samples_per_second / 1e12
    impl = "pytorch" if a.loop == "hand" else f"pytorch-{a.loop}"
    print(json.dumps({"impl": impl, "name": a.name, "loop": a.loop,
                      "parameters": parameters, "non_embedding_parameters": parameters - embedding,
                      "layers": a.layers, "hidden": a.hidden,
                      "threads": a.threads, "batch": a.batch, "length": a.length, "steps": a.steps,
                      "padded": bool(a.padded),
                      "warmup_seconds": round(seconds[0], 4), "seconds": round(seconds[1], 4),
                      "samples_per_second": round(samples_per_second, 3),
                      "cpu_seconds": round(cpu_seconds[1], 4),
                      "samples_per_cpu_second": round(a.steps * a.batch / cpu_seconds[1], 3),
                      "model_tflops_per_second": round(tflops, 4),
                      "mfu": round(tflops / a.peak_tflops, 4) if a.peak_tflops > 0 else None,
                      "torch": torch.__version__, "device": a.device,
                      "precision": a.precision,
                      "peak_memory_bytes": torch.cuda.max_memory_allocated(device) if cuda else -1}))


if __name__ == "__main__":
    main()
