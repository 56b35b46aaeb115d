#!/usr/bin/env python3
"""Model parity: tune's forward logits against a PyTorch reference of Hugging Face's modeling code.

model_parity_test.py TUNE_BINARY

For a BERT, a RoBERTa and a DeBERTa-v2 (v3 settings) checkpoint (tests/scripts/make_checkpoints.py,
each given a classifier head), `tune predict` prints the logits of a few texts; this script
computes the same logits with its own transcription of Hugging Face's BertModel /
RobertaModel / DebertaV2Model (modeling_bert.py, modeling_roberta.py, modeling_deberta_v2.py)
plus BertForSequenceClassification's pooler + classifier (RoBERTa's classification head has the
same dense-tanh-out_proj form; DeBERTa's ContextPooler is dense-gelu) on the same
model.safetensors, and requires them equal to 1e-4. Exit 77 (skipped) without python3-torch.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIPPED: python3-torch is not installed")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import make_checkpoints as mc  # noqa: E402

TEXTS = ["good day the", "bad awful rainy day was very dark", "sunny", "it was a happy and bright day today"]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:e]), dtype=torch.float32)
        out[name] = t.reshape(info["shape"]).clone()
    return out


def layer_norm(x, w, b, eps):
    return F.layer_norm(x, (x.size(-1),), w, b, eps)


def linear(W, prefix, x):
    return F.linear(x, W[prefix + ".weight"], W[prefix + ".bias"])


# --- BERT / RoBERTa (modeling_bert.py BertModel; modeling_roberta.py position ids) -------------
def bert_logits(W, cfg, ids, mask, p, head=None):
    eps = cfg["layer_norm_eps"]
    if cfg["model_type"] == "roberta":
        pad = cfg.get("pad_token_id", 1)
        m = (ids != pad).long()  # create_position_ids_from_input_ids
        pos = torch.cumsum(m, dim=1) * m + pad
    else:
        pos = torch.arange(ids.size(1)).unsqueeze(0).expand_as(ids)
    x = W[p + "embeddings.word_embeddings.weight"][ids] + \
        W[p + "embeddings.position_embeddings.weight"][pos] + \
        W[p + "embeddings.token_type_embeddings.weight"][torch.zeros_like(ids)]
    x = layer_norm(x, W[p + "embeddings.LayerNorm.weight"], W[p + "embeddings.LayerNorm.bias"], eps)
    heads = cfg["num_attention_heads"]
    d = cfg["hidden_size"] // heads
    ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    B, T, H = x.shape
    for i in range(cfg["num_hidden_layers"]):
        l = f"{p}encoder.layer.{i}."
        split = lambda t: t.view(B, T, heads, d).permute(0, 2, 1, 3)
        q = split(linear(W, l + "attention.self.query", x))
        k = split(linear(W, l + "attention.self.key", x))
        v = split(linear(W, l + "attention.self.value", x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + ext
        ctx = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(B, T, H)
        a = layer_norm(linear(W, l + "attention.output.dense", ctx) + x,
                       W[l + "attention.output.LayerNorm.weight"], W[l + "attention.output.LayerNorm.bias"], eps)
        h = F.gelu(linear(W, l + "intermediate.dense", a))
        x = layer_norm(linear(W, l + "output.dense", h) + a,
                       W[l + "output.LayerNorm.weight"], W[l + "output.LayerNorm.bias"], eps)
    if head is not None:  # another head on the encoder's output (hf_saved_model_test.py)
        return head(W, cfg, x)
    pooled = torch.tanh(linear(W, p + "pooler.dense", x[:, 0]))
    return linear(W, "classifier", pooled)


# --- DeBERTa-v2 (modeling_deberta_v2.py DebertaV2Model, v3 settings) -------------------------
def make_log_bucket_position(relative_pos, bucket_size, max_position):
    sign = torch.sign(relative_pos)
    mid = bucket_size // 2
    abs_pos = torch.where((relative_pos < mid) & (relative_pos > -mid),
                          torch.tensor(mid - 1).type_as(relative_pos), torch.abs(relative_pos))
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid)) *
                         (mid - 1)) + mid
    return torch.where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign)


def build_relative_position(q, k, bucket_size, max_position):
    rel = torch.arange(q)[:, None] - torch.arange(k)[None, :]
    rel = make_log_bucket_position(rel, bucket_size, max_position)
    return rel.to(torch.long)


def deberta_logits(W, cfg, ids, mask, p, head=None):
    eps = cfg["layer_norm_eps"]
    heads = cfg["num_attention_heads"]
    H = cfg["hidden_size"]
    d = H // heads
    buckets = cfg["position_buckets"]
    max_rel = cfg.get("max_relative_positions", -1)
    if max_rel < 1:
        max_rel = cfg["max_position_embeddings"]
    x = W[p + "embeddings.word_embeddings.weight"][ids]
    x = layer_norm(x, W[p + "embeddings.LayerNorm.weight"], W[p + "embeddings.LayerNorm.bias"], eps)
    x = x * mask.unsqueeze(2).float()
    B, T, _ = x.shape
    att_mask = (mask[:, None, None, :] * mask[:, None, :, None]).bool()  # get_attention_mask
    rel_pos = build_relative_position(T, T, buckets, max_rel)
    rel = layer_norm(W[p + "encoder.rel_embeddings.weight"], W[p + "encoder.LayerNorm.weight"],
                     W[p + "encoder.LayerNorm.bias"], eps)[: 2 * buckets]
    scale_factor = 3  # 1 + c2p + p2c
    span = buckets
    for i in range(cfg["num_hidden_layers"]):
        l = f"{p}encoder.layer.{i}."
        t4 = lambda t: t.view(t.size(0), -1, heads, d).permute(0, 2, 1, 3)
        q = t4(linear(W, l + "attention.self.query_proj", x))
        k = t4(linear(W, l + "attention.self.key_proj", x))
        v = t4(linear(W, l + "attention.self.value_proj", x))
        scale = math.sqrt(d * scale_factor)
        scores = q @ k.transpose(-1, -2) / scale
        pos_q = t4(linear(W, l + "attention.self.query_proj", rel.unsqueeze(0)))[0]  # share_att_key
        pos_k = t4(linear(W, l + "attention.self.key_proj", rel.unsqueeze(0)))[0]
        c2p = q @ pos_k.transpose(-1, -2)  # [B, h, T, 2*span]
        c2p_pos = torch.clamp(rel_pos + span, 0, 2 * span - 1)
        c2p = torch.gather(c2p, -1, c2p_pos.expand(B, heads, T, T))
        p2c = k @ pos_q.transpose(-1, -2)
        p2c_pos = torch.clamp(-rel_pos + span, 0, 2 * span - 1)
        p2c = torch.gather(p2c, -1, p2c_pos.expand(B, heads, T, T)).transpose(-1, -2)
        scores = scores + c2p / scale + p2c / scale
        scores = scores.masked_fill(~att_mask, torch.finfo(torch.float32).min)  # XSoftmax
        probs = scores.softmax(-1).masked_fill(~att_mask, 0)
        ctx = (probs @ v).permute(0, 2, 1, 3).reshape(B, T, H)
        a = layer_norm(linear(W, l + "attention.output.dense", ctx) + x,
                       W[l + "attention.output.LayerNorm.weight"], W[l + "attention.output.LayerNorm.bias"], eps)
        h = F.gelu(linear(W, l + "intermediate.dense", a))
        x = layer_norm(linear(W, l + "output.dense", h) + a,
                       W[l + "output.LayerNorm.weight"], W[l + "output.LayerNorm.bias"], eps)
    if head is not None:
        return head(W, cfg, x)
    pooled = F.gelu(linear(W, "pooler.dense", x[:, 0]))  # ContextPooler, pooler_hidden_act gelu
    return linear(W, "classifier", pooled)


# --- Tokenization of the test texts (whole words of the test vocabularies) ---------------------
def wordpiece_ids(vocab, text):
    index = {t: i for i, t in enumerate(vocab)}
    return [index["[CLS]"]] + [index[w] for w in text.split()] + [index["[SEP]"]]


def bpe_ids(vocab, text):
    b2u = mc.bytes_to_unicode()
    words = text.split()
    ids = [vocab["<s>"]] + [vocab[b2u[c]] for c in words[0].encode()]
    ids += [vocab["\u0120" + w] for w in words[1:]]
    return ids + [vocab["</s>"]]


def batch(seqs, pad):
    T = max(len(s) for s in seqs)
    ids = torch.tensor([s + [pad] * (T - len(s)) for s in seqs])
    mask = torch.tensor([[1] * len(s) + [0] * (T - len(s)) for s in seqs])
    return ids, mask


def main():
    tune = sys.argv[1]
    out = tempfile.mkdtemp(prefix="tune-parity-")
    hub = os.path.join(out, "hub")
    os.makedirs(hub)
    mc.write_bert(hub)
    mc.write_roberta(hub)
    mc.write_deberta(hub)
    with open(os.path.join(out, "texts.jsonl"), "w") as f:
        for t in TEXTS:
            f.write(json.dumps({"text": t}) + "\n")
    failures = 0
    for name, prefix in (("tiny-org--bert-wp", "bert."), ("tiny-org--roberta-bpe", "roberta."),
                         ("tiny-org--deberta-wp", "deberta.")):
        snap = os.path.join(hub, "models--" + name, "snapshots", os.listdir(os.path.join(hub, "models--" + name, "snapshots"))[0])
        path = os.path.join(snap, "model.safetensors")
        W = read_safetensors(path)
        if "classifier.weight" not in W:  # give every model a head, so tune reads it too
            g = torch.Generator().manual_seed(11)
            W["classifier.weight"] = torch.randn(2, mc.HIDDEN, generator=g)
            W["classifier.bias"] = torch.randn(2, generator=g) * 0.1
            mc.write_safetensors(path, W)
        cfg = json.load(open(os.path.join(snap, "config.json")))
        run = subprocess.run([tune, "predict", "--model", snap, "--data", os.path.join(out, "texts.jsonl"),
                              "--threads", "1"], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{name}: tune predict failed ({run.returncode}):\n{run.stderr}")
            failures += 1
            continue
        got = torch.tensor([json.loads(line)["logits"] for line in run.stdout.splitlines()])
        if cfg["model_type"] == "roberta":
            vocab = json.load(open(os.path.join(snap, "vocab.json")))
            ids, mask = batch([bpe_ids(vocab, t) for t in TEXTS], vocab["<pad>"])
        else:
            vocab = open(os.path.join(snap, "vocab.txt")).read().split("\n")[:-1]
            ids, mask = batch([wordpiece_ids(vocab, t) for t in TEXTS], 0)
        with torch.no_grad():
            ref = (deberta_logits if cfg["model_type"] == "deberta-v2" else bert_logits)(W, cfg, ids, mask, prefix)
        diff = (got - ref).abs().max().item()
        print(f"{cfg['model_type']:10s} {len(TEXTS)} texts, logits max |tune - reference| = {diff:.3g}")
        if not diff <= 1e-4:
            print("  tune:", got.tolist(), "\n  reference:", ref.tolist())
            failures += 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
