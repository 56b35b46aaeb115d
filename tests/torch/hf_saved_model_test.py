#!/usr/bin/env python3
"""A model saved by --save-best loads into Hugging Face's *ForSequenceClassification.

hf_saved_model_test.py TUNE_BINARY

For a BERT, a RoBERTa and a DeBERTa-v3 checkpoint (tests/scripts/make_checkpoints.py), a one-trial
study fine-tunes it with --save-best. The saved directory is then read the way Hugging Face's
AutoModelForSequenceClassification.from_pretrained reads it: config.json's `architectures`,
`num_labels`, `id2label`, `label2id`, `problem_type` (and DeBERTa's pooler settings), and every
tensor of model.safetensors by the names of BertForSequenceClassification (bert.pooler.dense,
classifier), RobertaForSequenceClassification (classifier.dense, classifier.out_proj) or
DebertaV2ForSequenceClassification (pooler.dense, classifier): the transcription of
model_parity_test.py computes the logits from exactly those names, and must use every tensor of
the file (none missing, none left over: what from_pretrained would warn about). Its logits must
equal `tune predict`'s to 1e-5. Then the same directory rewritten in tune's older layout
(classifier.out.*, the pooler under the base model's prefix) must predict the same logits, and a
head with hidden layers (classifier_layers 1) must say in config.json that it is tune's own.
Exit 77 (skipped) without python3-torch.
"""
import json
import os
import shutil
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
sys.path.insert(0, HERE)
import make_checkpoints as mc  # noqa: E402
from checks import FAILURES, check  # noqa: E402
from model_parity_test import (TEXTS, batch, bert_logits, bpe_ids, deberta_logits, linear,  # noqa: E402
                               read_safetensors, wordpiece_ids)

# What each family's *ForSequenceClassification calls its base model and head.
FAMILIES = {
    "tiny-org/bert-wp": ("BertForSequenceClassification", "bert."),
    "tiny-org/roberta-bpe": ("RobertaForSequenceClassification", "roberta."),
    "tiny-org/deberta-wp": ("DebertaV2ForSequenceClassification", "deberta."),
}


class Recorded(dict):
    """The saved tensors; remembers which names were read."""

    def __init__(self, *a):
        super().__init__(*a)
        self.read = set()

    def __getitem__(self, k):
        self.read.add(k)
        return super().__getitem__(k)


def hf_head(W, cfg, x):
    """The head of the config's architecture, by Hugging Face's names (modeling_bert.py
    BertForSequenceClassification, modeling_roberta.py RobertaClassificationHead,
    modeling_deberta_v2.py ContextPooler + classifier); evaluation mode: no dropout."""
    cls = x[:, 0]
    arch = cfg["architectures"][0]
    if arch == "BertForSequenceClassification":
        return linear(W, "classifier", torch.tanh(linear(W, "bert.pooler.dense", cls)))
    if arch == "RobertaForSequenceClassification":
        return linear(W, "classifier.out_proj", torch.tanh(linear(W, "classifier.dense", cls)))
    if arch == "DebertaV2ForSequenceClassification":
        act = {"gelu": F.gelu}[cfg["pooler_hidden_act"]]
        return linear(W, "classifier", act(linear(W, "pooler.dense", cls)))
    raise ValueError(arch)


def token_ids(snap, cfg):
    if cfg["model_type"] == "roberta":
        vocab = json.load(open(os.path.join(snap, "vocab.json")))
        return batch([bpe_ids(vocab, t) for t in TEXTS], vocab["<pad>"])
    vocab = open(os.path.join(snap, "vocab.txt")).read().split("\n")[:-1]
    return batch([wordpiece_ids(vocab, t) for t in TEXTS], 0)


def predict(tune, model, texts):
    r = subprocess.run([tune, "predict", "--model", model, "--data", texts, "--threads", "1"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr
    return torch.tensor([json.loads(line)["logits"] for line in r.stdout.splitlines()]), ""


def train(tune, out, model, name, classifier_layers=0):
    config = {
        "direction": "maximize",
        "sampler": {"name": "random", "seed": 3},
        "search_space": {"model": [model], "learning_rate": [3e-3]},
        "objective": {"type": "train",
                      "data": {"train": "train.jsonl", "validation": "validation.jsonl",
                               "labels": ["neg", "pos"]},
                      "epochs": 1, "batch_size": 16, "max_length": 16, "threads": 1,
                      "classifier_layers": classifier_layers},
    }
    path = os.path.join(out, name + ".json")
    json.dump(config, open(path, "w"))
    best = os.path.join(out, name)
    r = subprocess.run([tune, "--study", name, "--config", path, "--storage", "memory",
                        "--n-trials", "1", "--save-best", best], capture_output=True, text=True,
                       cwd=out, env=dict(os.environ, HF_HUB_CACHE=os.path.join(out, "hub")))
    check(r.returncode == 0, f"{name}: the study with --save-best runs"
          + ("" if r.returncode == 0 else f": {r.stderr[-500:]}"))
    return best if r.returncode == 0 else None


def old_layout(best, prefix, out):
    """The saved directory with its head under tune's names before the Hugging Face layout."""
    old = best + "-old"
    shutil.copytree(best, old)
    W = read_safetensors(os.path.join(best, "model.safetensors"))
    renamed = {}
    for k, v in W.items():
        if k in ("classifier.weight", "classifier.bias"):
            k = "classifier.out." + k.split(".")[-1]
        elif k.startswith("classifier.out_proj."):
            k = "classifier.out." + k.split(".")[-1]
        elif k.startswith("classifier.dense."):
            k = prefix + "pooler.dense." + k.split(".")[-1]
        renamed[k] = v
    mc.write_safetensors(os.path.join(old, "model.safetensors"), renamed)
    return old


def main():
    tune = sys.argv[1]
    out = tempfile.mkdtemp(prefix="tune-hf-saved-")
    hub = os.path.join(out, "hub")
    os.makedirs(hub)
    mc.write_bert(hub)
    mc.write_roberta(hub)
    mc.write_deberta(hub)
    mc.write_data(out)
    texts = os.path.join(out, "texts.jsonl")
    with open(texts, "w") as f:
        for t in TEXTS:
            f.write(json.dumps({"text": t}) + "\n")
    for model, (arch, prefix) in FAMILIES.items():
        name = model.split("/")[1]
        best = train(tune, out, model, name)
        if best is None:
            continue
        cfg = json.load(open(os.path.join(best, "config.json")))
        print(f"  {name}/config.json: " + json.dumps(
            {k: cfg.get(k) for k in ("architectures", "model_type", "num_labels", "id2label",
                                     "label2id", "problem_type", "pooler_hidden_act")}))
        check(cfg.get("architectures") == [arch], f"{name}: architectures is [{arch}]")
        check(cfg.get("num_labels") == 2 and cfg.get("id2label") == {"0": "neg", "1": "pos"}
              and cfg.get("label2id") == {"neg": 0, "pos": 1},
              f"{name}: num_labels, id2label, label2id")
        check(cfg.get("problem_type") == "single_label_classification", f"{name}: problem_type")
        W = Recorded(read_safetensors(os.path.join(best, "model.safetensors")))
        ids, mask = token_ids(best, cfg)
        encode = deberta_logits if cfg["model_type"] == "deberta-v2" else bert_logits
        try:
            with torch.no_grad():
                ref = encode(W, cfg, ids, mask, prefix, head=hf_head)
        except KeyError as e:
            check(False, f"{name}: a tensor {arch} needs is missing: {e}")
            continue
        unused = sorted(set(W) - W.read)
        check(not unused, f"{name}: every tensor of the file is one {arch} reads"
              + (f" (unused: {unused})" if unused else ""))
        got, err = predict(tune, best, texts)
        if got is None:
            check(False, f"{name}: tune predict: {err[-300:]}")
            continue
        diff = (got - ref).abs().max().item()
        print(f"  {name}: logits max |tune predict - {arch}| = {diff:.3g}")
        check(diff <= 1e-5, f"{name}: the Hugging Face head's logits equal tune predict's to 1e-5")
        old, _ = predict(tune, old_layout(best, prefix, out), texts)
        check(old is not None and torch.equal(old, got),
              f"{name}: tune predict reads the older layout (classifier.out.*) to the same logits")
    best = train(tune, out, "tiny-org/bert-wp", "bert-deep-head", classifier_layers=1)
    if best is not None:
        cfg = json.load(open(os.path.join(best, "config.json")))
        note = cfg.get("tune_classifier_head", "")
        print(f"  bert-deep-head/config.json tune_classifier_head: {note}")
        check("tune's own head" in note and "tune predict" in note,
              "a head with hidden layers says in config.json that it is tune's own")
        W = read_safetensors(os.path.join(best, "model.safetensors"))
        check("classifier.hidden.0.weight" in W and "classifier.out.weight" in W,
              "its head keeps tune's names")
        got, err = predict(tune, best, texts)
        check(got is not None, "tune predict reads it" + ("" if got is not None else err[-300:]))
    if not FAILURES:
        shutil.rmtree(out, ignore_errors=True)
    else:
        print(f"kept {out}")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
