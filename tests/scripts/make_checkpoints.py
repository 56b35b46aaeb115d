#!/usr/bin/env python3
"""Small random Hugging Face checkpoints in the Hugging Face cache layout, for tune's tests.

make_checkpoints.py OUT writes
  OUT/hub/models--tiny-org--bert-wp/{refs/main, snapshots/<rev>/...}   BERT + WordPiece vocab.txt,
      with a classifier head (num_labels 2, id2label neg/pos)
  OUT/hub/models--tiny-org--roberta-bpe/...   RoBERTa + byte-level BPE vocab.json/merges.txt,
      no classifier head (tune initialises it)
  OUT/hub/models--tiny-org--deberta-wp/...    DeBERTa-v2 (v3 settings) + WordPiece vocab.txt
  OUT/hub/models--tiny-org--deberta-spm/...   DeBERTa-v2 (v3 settings) + SentencePiece spm.model
      trained by python3-sentencepiece on Debian's fortunes and the data's words (only when
      python3-sentencepiece is installed; without the fortunes package, on the words alone)
  OUT/train.jsonl, OUT/validation.jsonl      a two-label text set
Weights are random (torch.manual_seed), written as safetensors by hand: an 8-byte little-endian
header length, the JSON header, then the raw little-endian F32 data. Needs python3-torch only.
"""
import json
import os
import struct
import sys

import torch

from fortunes_text import fortune_lines

WORDS = {"pos": ["good", "great", "fine", "happy", "sunny", "bright"],
         "neg": ["bad", "awful", "poor", "sad", "rainy", "dark"]}
FILLER = ["the", "a", "day", "was", "and", "very", "today", "it"]
HIDDEN, LAYERS, HEADS, INTER, POSITIONS = 32, 2, 2, 64, 64
SPM_PIECES = 400  # the spm.model's pieces (fewer when the corpus is too small for them)
# A few texts of the checkpoints' words, of different lengths (padding matters).
TEXTS = ["good day the", "bad awful rainy day was very dark", "sunny",
         "it was a happy and bright day today"]


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """The F32 tensors of a safetensors file (as write_safetensors writes them), by name."""
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


def encoder_tensors(prefix, vocab, absolute_positions, type_vocab, deberta):
    g = torch.Generator().manual_seed(sum(map(ord, prefix)))
    r = lambda *shape: torch.randn(*shape, generator=g) * 0.2
    t = {}
    e = prefix + "embeddings."
    t[e + "word_embeddings.weight"] = r(vocab, HIDDEN)
    if absolute_positions:
        t[e + "position_embeddings.weight"] = r(POSITIONS, HIDDEN)
    if type_vocab:
        t[e + "token_type_embeddings.weight"] = r(type_vocab, HIDDEN)
    t[e + "LayerNorm.weight"] = 1 + r(HIDDEN)
    t[e + "LayerNorm.bias"] = r(HIDDEN)
    for i in range(LAYERS):
        l = f"{prefix}encoder.layer.{i}."
        for part in ("query", "key", "value"):
            name = {"query": "query_proj", "key": "key_proj", "value": "value_proj"}[part] if deberta else part
            t[l + f"attention.self.{name}.weight"] = r(HIDDEN, HIDDEN)
            t[l + f"attention.self.{name}.bias"] = r(HIDDEN)
        t[l + "attention.output.dense.weight"] = r(HIDDEN, HIDDEN)
        t[l + "attention.output.dense.bias"] = r(HIDDEN)
        t[l + "attention.output.LayerNorm.weight"] = 1 + r(HIDDEN)
        t[l + "attention.output.LayerNorm.bias"] = r(HIDDEN)
        t[l + "intermediate.dense.weight"] = r(INTER, HIDDEN)
        t[l + "intermediate.dense.bias"] = r(INTER)
        t[l + "output.dense.weight"] = r(HIDDEN, INTER)
        t[l + "output.dense.bias"] = r(HIDDEN)
        t[l + "output.LayerNorm.weight"] = 1 + r(HIDDEN)
        t[l + "output.LayerNorm.bias"] = r(HIDDEN)
    if deberta:
        t[prefix + "encoder.rel_embeddings.weight"] = r(2 * 8, HIDDEN)
        t[prefix + "encoder.LayerNorm.weight"] = 1 + r(HIDDEN)
        t[prefix + "encoder.LayerNorm.bias"] = r(HIDDEN)
        t["pooler.dense.weight"] = r(HIDDEN, HIDDEN)
        t["pooler.dense.bias"] = r(HIDDEN)
    else:
        t[prefix + "pooler.dense.weight"] = r(HIDDEN, HIDDEN)
        t[prefix + "pooler.dense.bias"] = r(HIDDEN)
    return t, g


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def snapshot(hub, name):
    repo = os.path.join(hub, "models--" + name.replace("/", "--"))
    rev = "0123456789abcdef0123456789abcdef01234567"
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(rev)
    d = os.path.join(repo, "snapshots", rev)
    os.makedirs(d, exist_ok=True)
    return d


def config(model_type, vocab, **extra):
    c = {"model_type": model_type, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
         "num_attention_heads": HEADS, "intermediate_size": INTER, "vocab_size": vocab,
         "max_position_embeddings": POSITIONS, "hidden_act": "gelu",
         "id2label": {"0": "neg", "1": "pos"}, "label2id": {"neg": 0, "pos": 1}}
    c.update(extra)
    return c


def wordpiece_vocab():
    words = sorted({w for ws in WORDS.values() for w in ws} | set(FILLER))
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words + ["##s", "##ly"]


def write_bert(hub):
    d = snapshot(hub, "tiny-org/bert-wp")
    vocab = wordpiece_vocab()
    open(os.path.join(d, "vocab.txt"), "w").write("\n".join(vocab) + "\n")
    json.dump(config("bert", len(vocab) + 3, type_vocab_size=2, layer_norm_eps=1e-12),
              open(os.path.join(d, "config.json"), "w"))
    t, g = encoder_tensors("bert.", len(vocab) + 3, True, 2, False)
    t["classifier.weight"] = torch.randn(2, HIDDEN, generator=g)
    t["classifier.bias"] = torch.randn(2, generator=g) * 0.1
    write_safetensors(os.path.join(d, "model.safetensors"), t)


def write_roberta(hub):
    d = snapshot(hub, "tiny-org/roberta-bpe")
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for ch in bytes_to_unicode().values():
        vocab[ch] = len(vocab)
    merges = []
    for w in sorted({w for ws in WORDS.values() for w in ws} | set(FILLER)):
        piece = "\u0120" + w[0]
        merges.append(f"\u0120 {w[0]}")
        for ch in w[1:]:
            merges.append(f"{piece} {ch}")
            piece += ch
        for p in (f"\u0120{w[0]}",) + tuple("\u0120" + w[:k] for k in range(2, len(w) + 1)):
            vocab.setdefault(p, len(vocab))
    merges = list(dict.fromkeys(merges))
    json.dump(vocab, open(os.path.join(d, "vocab.json"), "w"))
    open(os.path.join(d, "merges.txt"), "w").write("#version: 0.2\n" + "\n".join(merges) + "\n")
    json.dump(config("roberta", len(vocab), type_vocab_size=1, layer_norm_eps=1e-5,
                     pad_token_id=1), open(os.path.join(d, "config.json"), "w"))
    t, _ = encoder_tensors("roberta.", len(vocab), True, 1, False)
    write_safetensors(os.path.join(d, "model.safetensors"), t)


def write_deberta(hub):
    d = snapshot(hub, "tiny-org/deberta-wp")
    vocab = wordpiece_vocab()
    open(os.path.join(d, "vocab.txt"), "w").write("\n".join(vocab) + "\n")
    json.dump(config("deberta-v2", len(vocab), type_vocab_size=0, layer_norm_eps=1e-7,
                     relative_attention=True, position_biased_input=False, share_att_key=True,
                     pos_att_type="p2c|c2p", norm_rel_ebd="layer_norm", position_buckets=8,
                     max_relative_positions=-1),
              open(os.path.join(d, "config.json"), "w"))
    t, _ = encoder_tensors("deberta.", len(vocab), False, 0, True)
    write_safetensors(os.path.join(d, "model.safetensors"), t)


def write_deberta_spm(hub, out):
    try:
        import sentencepiece
    except ImportError:
        return
    d = snapshot(hub, "tiny-org/deberta-spm")
    corpus = os.path.join(out, "spm_corpus.txt")
    with open(corpus, "w") as f:
        for line in fortune_lines()[:4000]:
            f.write(line + "\n")
        for ws in list(WORDS.values()) + [FILLER]:
            f.write(" ".join(ws) + "\n")
    sentencepiece.SentencePieceTrainer.train(
        input=corpus, model_prefix=os.path.join(d, "spm"), vocab_size=SPM_PIECES,
        hard_vocab_limit=False,
        minloglevel=2, pad_id=0, pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]", eos_id=2,
        eos_piece="[SEP]", unk_id=3, unk_piece="[UNK]")
    os.remove(os.path.join(d, "spm.vocab"))
    pieces = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(d, "spm.model")).get_piece_size()
    vocab = pieces + 1  # [MASK]: the id after the last piece, as in deberta-v3
    json.dump(config("deberta-v2", vocab, type_vocab_size=0, layer_norm_eps=1e-7,
                     relative_attention=True, position_biased_input=False, share_att_key=True,
                     pos_att_type="p2c|c2p", norm_rel_ebd="layer_norm", position_buckets=8,
                     max_relative_positions=-1),
              open(os.path.join(d, "config.json"), "w"))
    t, _ = encoder_tensors("deberta.", vocab, False, 0, True)
    write_safetensors(os.path.join(d, "model.safetensors"), t)


def write_data(out):
    import random
    rng = random.Random(5)
    for split, n in (("train", 160), ("validation", 60)):
        with open(os.path.join(out, split + ".jsonl"), "w") as f:
            for i in range(n):
                label = "pos" if i % 2 else "neg"
                words = rng.sample(WORDS[label], 2) + rng.sample(FILLER, 3)
                rng.shuffle(words)
                f.write(json.dumps({"text": " ".join(words), "label": label}) + "\n")


def main():
    out = sys.argv[1]
    hub = os.path.join(out, "hub")
    os.makedirs(hub, exist_ok=True)
    write_bert(hub)
    write_roberta(hub)
    write_deberta(hub)
    write_deberta_spm(hub, out)
    write_data(out)


if __name__ == "__main__":
    main()
