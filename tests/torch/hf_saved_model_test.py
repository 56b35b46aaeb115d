#!/usr/bin/python3
"""A model saved by --save-best loads into Hugging Face's AutoModelForSequenceClassification.

  hf_saved_model_test.py TUNE_BINARY [VENV_PYTHON]

Runs with tune's Python environment (tests/testing/hf_stack.py: skipped, exit 77, only when there
is none), whose transformers is the reference. For each family (BERT, RoBERTa and DeBERTa-v3
checkpoints of tests/scripts/make_checkpoints.py, the DeBERTa one with its SentencePiece
spm.model), problem type (single_label_classification, multi_label_classification, regression)
and head depth (classifier_layers 0, and 2 with widths 24 and 12), a one-trial study fine-tunes
the checkpoint with --save-best. Then

    AutoModelForSequenceClassification.from_pretrained(best, output_loading_info=True,
                                                       attn_implementation="eager")

(with trust_remote_code=True for a head with hidden layers, whose class config.json's auto_map
names in the tune_classifier.py tune writes) must build the family's class (Tune* for the deep
heads), report no missing, unexpected or mismatched tensor, and load every tensor of
model.safetensors; its logits on texts tokenized by AutoTokenizer.from_pretrained(best) must equal
`tune predict`'s to TOLERANCE. The table of the runs is printed (docs/config.md, save_best).

Also: a deep head loaded without trust_remote_code gets transformers' own class, which reports the
head's tensors as unused and its classifier as fresh (what the docs say happens); and the
directory rewritten in tune's older layout (classifier.out.*, the pooler under the base model's
prefix) still predicts the same logits with `tune predict`.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing"))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import hf_stack  # noqa: E402

# trust_remote_code copies tune_classifier.py into transformers' modules cache, which it locates
# when it is imported: a temporary one (made once, before hf_stack runs this script again with the
# environment's Python), not the user's.
if "TUNE_TEST_HF_MODULES" not in os.environ:
    os.environ["TUNE_TEST_HF_MODULES"] = tempfile.mkdtemp(prefix="tune-hf-modules-")
MODULES = os.environ["HF_MODULES_CACHE"] = os.environ["TUNE_TEST_HF_MODULES"]
hf_stack.use("hf_saved_model", sys.argv[2] if len(sys.argv) > 2 else None,
             ("torch", "transformers", "sentencepiece"))
import torch  # noqa: E402
import transformers  # noqa: E402

import make_checkpoints as mc  # noqa: E402
from checks import FAILURES, check  # noqa: E402

TOLERANCE = 1e-5
FAMILIES = [  # name, checkpoint, *ForSequenceClassification, base prefix, head activation
    ("BERT", "tiny-org/bert-wp", "BertForSequenceClassification", "bert.", "gelu"),
    ("RoBERTa", "tiny-org/roberta-bpe", "RobertaForSequenceClassification", "roberta.", "tanh"),
    ("DeBERTa-v3", "tiny-org/deberta-spm", "DebertaV2ForSequenceClassification", "deberta.",
     "relu"),
]
PROBLEMS = ["single_label_classification", "multi_label_classification", "regression"]
DEEP = {"classifier_layers": 2, "classifier_hidden_1": 24, "classifier_hidden_2": 12}


def write_problem_data(out):
    """train/validation files for each problem type, from the checkpoints' words: single labels
    (neg/pos), label lists (of neg, pos, filler) and a number (the share of positive words)."""
    rng = random.Random(5)
    paths = {}
    for problem in PROBLEMS:
        for split, n in (("train", 96), ("validation", 32)):
            path = os.path.join(out, f"{problem}.{split}.jsonl")
            paths[(problem, split)] = path
            with open(path, "w") as f:
                for i in range(n):
                    pos, neg = rng.randint(0, 3), rng.randint(0, 3)
                    words = (rng.sample(mc.WORDS["pos"], pos) + rng.sample(mc.WORDS["neg"], neg)
                             + rng.sample(mc.FILLER, 2))
                    rng.shuffle(words)
                    row = {"text": " ".join(words)}
                    if problem == "single_label_classification":
                        row["label"] = "pos" if pos >= neg else "neg"
                    elif problem == "multi_label_classification":
                        row["label"] = ([t for t, k in (("neg", neg), ("pos", pos)) if k]
                                        + (["filler"] if i % 3 == 0 else []))
                    else:
                        row["label"] = pos / max(1, pos + neg)
                    f.write(json.dumps(row) + "\n")
    return paths


def train(tune, out, model, name, problem, paths, head, activation):
    data = {"train": paths[(problem, "train")], "validation": paths[(problem, "validation")],
            "problem_type": problem}
    if problem == "single_label_classification":
        data["labels"] = ["neg", "pos"]
    config = {
        "direction": "minimize" if problem == "regression" else "maximize",
        "sampler": {"name": "random", "seed": 3},
        "search_space": {"model": [model], "learning_rate": [3e-3]},
        "objective": {"type": "train", "data": data, "epochs": 1, "batch_size": 16,
                      "max_length": 16, "threads": 1, "classifier_activation": activation,
                      **head},
    }
    path = os.path.join(out, name + ".json")
    json.dump(config, open(path, "w"))
    best = os.path.join(out, name)
    r = subprocess.run([tune, "--study", name, "--config", path, "--storage", "memory",
                        "--n-trials", "1", "--save-best", best], capture_output=True, text=True,
                       cwd=out, env=dict(os.environ, HF_HUB_CACHE=os.path.join(out, "hub")))
    check(r.returncode == 0, f"{name}: the study with --save-best runs"
          + ("" if r.returncode == 0 else f": {r.stderr[-800:]}"))
    return best if r.returncode == 0 else None


def predict(tune, model, texts):
    r = subprocess.run([tune, "predict", "--model", model, "--data", texts, "--threads", "1"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr[-800:]
    return torch.tensor([json.loads(line)["logits"] for line in r.stdout.splitlines()]), ""


def load(best, **kwargs):
    return transformers.AutoModelForSequenceClassification.from_pretrained(
        best, output_loading_info=True, attn_implementation="eager", **kwargs)


def hf_logits(model, best, texts):
    tokenizer = transformers.AutoTokenizer.from_pretrained(best)
    enc = tokenizer(texts, padding="longest", truncation=True, max_length=16,
                    return_tensors="pt")
    inputs = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}
    with torch.no_grad():
        return model(**inputs).logits


def old_layout(best, prefix):
    """The saved directory with its head under tune's names before the Hugging Face layout."""
    old = best + "-old"
    shutil.copytree(best, old)
    W = mc.read_safetensors(os.path.join(best, "model.safetensors"))
    renamed = {}
    for k, v in W.items():
        if k in ("classifier.weight", "classifier.bias") or k.startswith("classifier.out_proj."):
            k = "classifier.out." + k.split(".")[-1]
        elif k.startswith("classifier.dense."):
            k = prefix + "pooler.dense." + k.split(".")[-1]
        renamed[k] = v
    mc.write_safetensors(os.path.join(old, "model.safetensors"), renamed)
    return old


def one_model(tune, out, family, problem, deep, paths, texts, texts_path):
    """Trains, loads and compares one model; returns its table row, or None."""
    label, model, arch, prefix, activation = family
    name = f"{label.split('-')[0].lower()}-{problem.split('_')[0]}-{'deep' if deep else 'plain'}"
    best = train(tune, out, model, name, problem, paths, DEEP if deep else {}, activation)
    if best is None:
        return None
    cfg = json.load(open(os.path.join(best, "config.json")))
    expected = ("Tune" if deep else "") + arch
    check(cfg.get("architectures") == [expected] and cfg.get("problem_type") == problem,
          f"{name}: config.json says architectures [{expected}], problem_type {problem}")
    if deep:
        check(cfg.get("auto_map", {}).get("AutoModelForSequenceClassification")
              == f"tune_classifier.{expected}"
              and os.path.isfile(os.path.join(best, "tune_classifier.py")),
              f"{name}: auto_map names tune_classifier.{expected}, written beside the weights")
    hf, info = load(best, trust_remote_code=True) if deep else load(best)
    hf.eval()
    problems = {k: sorted(v) for k, v in info.items() if v}
    saved = mc.read_safetensors(os.path.join(best, "model.safetensors"))
    state = hf.state_dict()
    loaded = sum(1 for k in saved if k in state and torch.equal(state[k], saved[k]))
    check(type(hf).__name__ == expected and not problems and loaded == len(saved),
          f"{name}: from_pretrained builds {type(hf).__name__}, no tensor missing, unexpected or "
          f"mismatched, {loaded}/{len(saved)} tensors loaded"
          + (f" ({problems})" if problems else ""))
    got, err = predict(tune, best, texts_path)
    if got is None:
        check(False, f"{name}: tune predict: {err}")
        return None
    diff = (got - hf_logits(hf, best, texts)).abs().max().item()
    check(diff <= TOLERANCE, f"{name}: logits max |tune predict - {expected}| = {diff:.1e} "
          f"<= {TOLERANCE:g}")
    if problem == "single_label_classification":
        old, _ = predict(tune, old_layout(best, prefix), texts_path)
        check(old is not None and torch.equal(old, got),
              f"{name}: tune predict reads the older layout (classifier.out.*) to the same logits")
    if deep and problem == "single_label_classification":
        stock, stock_info = load(best)  # no trust_remote_code: transformers' own class
        check(type(stock).__name__ == arch and stock_info["unexpected_keys"]
              and stock_info["missing_keys"],
              f"{name}: without trust_remote_code, {arch} reports the head's tensors unused "
              f"({len(stock_info['unexpected_keys'])}) and its classifier fresh "
              f"({len(stock_info['missing_keys'])})")
    return (label, problem, DEEP["classifier_layers"] if deep else 0, expected,
            f"{loaded}/{len(saved)}", diff)


def main():
    tune = os.path.abspath(sys.argv[1])
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    out = tempfile.mkdtemp(prefix="tune-hf-saved-")
    hub = os.path.join(out, "hub")
    os.makedirs(hub)
    mc.write_bert(hub)
    mc.write_roberta(hub)
    mc.write_deberta_spm(hub, out)
    paths = write_problem_data(out)
    texts_path = os.path.join(out, "texts.jsonl")
    with open(texts_path, "w") as f:
        for t in mc.TEXTS:
            f.write(json.dumps({"text": t}) + "\n")
    rows = []
    for family in FAMILIES:
        for problem in PROBLEMS:
            for deep in (False, True):
                row = one_model(tune, out, family, problem, deep, paths, mc.TEXTS, texts_path)
                if row is not None:
                    rows.append(row)
    print("\n| Family | problem_type | classifier_layers | class | tensors loaded | "
          "max \\|logit diff\\| |\n|---|---|---|---|---|---|")
    for label, problem, depth, cls, loaded, diff in rows:
        print(f"| {label} | {problem} | {depth} | {cls} | {loaded} | {diff:.1e} |")
    shutil.rmtree(MODULES, ignore_errors=True)
    if not FAILURES:
        shutil.rmtree(out, ignore_errors=True)
    else:
        print(f"kept {out}")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
