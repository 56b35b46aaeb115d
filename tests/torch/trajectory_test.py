#!/usr/bin/python3
"""The trainer's trajectory against a reference loop written from Hugging Face Trainer's rules.

trajectory_test.py TUNE_TRAJECTORY_DRIVER [VENV_PYTHON]

Runs with tune's Python environment (tests/testing/hf_stack.py: skipped, exit 77, only when there
is none). tune_trajectory_driver trains a model with tune's LibTorch trainer and reports every
optimizer step (its loss and micro-batches) and every epoch's validation metrics. This script
trains the same model from the same weights on the same batches, fp32, dropout off, with the rules
of transformers.Trainer (4.46+, whose gradient accumulation divides each micro-batch's summed loss
by the examples of the whole accumulated batch, num_items_in_batch):

  - decay groups: transformers' own Trainer.get_decay_parameter_names (weight decay for every
    parameter except biases, norms by name, and the parameters of LayerNorm modules);
  - torch.optim.AdamW(betas, eps), lr from transformers' own get_linear_schedule_with_warmup:
    warmup over ceil(warmup_ratio * total_steps) steps, then linear decay to 0; scheduler.step()
    after each optimizer step;
  - gradient accumulation: loss = cross_entropy(reduction="sum") / num_items_in_batch per
    micro-batch, backward, then clip_grad_norm_(max_grad_norm), step, zero_grad;
  - padding masks: every batch padded to its longest text, attention_mask 0 on the padding;
  - evaluation after every epoch: the mean loss over the validation examples, accuracy and
    macro-F1 (sklearn's average="macro" over the labels seen).

Models: the BERT checkpoint of tests/scripts/make_checkpoints.py (with its classifier head;
accumulation 2, warmup, clipping) as transformers' own BertForSequenceClassification (eager
attention, dropout 0); and the block-attention TorchScript classifier of
scripts/torchscript_models.py (its eager module with the file's weights; the file is written by
Debian's python3-torch, the PyTorch of the LibTorch tune links, so that tune can read it: exit 77
without it). Each step's loss and the final metrics must agree to 1e-4 over >= 30 steps.
"""
import json
import math
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing"))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import hf_stack  # noqa: E402

hf_stack.use("trainer_trajectory", sys.argv[2] if len(sys.argv) > 2 else None,
             ("torch", "transformers"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402

import make_checkpoints as mc  # noqa: E402
import torchscript_models as tm  # noqa: E402

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's python3-torch: writes TorchScript tune reads
TOLERANCE = 1e-4


def write_data(out):
    """Two labels, texts of 3-12 words from the checkpoint's vocabulary (padding matters)."""
    rng = random.Random(7)
    paths = {}
    for split, n in (("train", 64), ("validation", 24)):
        paths[split] = os.path.join(out, split + ".jsonl")
        with open(paths[split], "w") as f:
            for i in range(n):
                label = ("neg", "pos")[i % 2]
                words = [rng.choice(mc.WORDS[label] if rng.random() < 0.4 else mc.FILLER)
                         for _ in range(rng.randint(3, 12))]
                f.write(json.dumps({"text": " ".join(words), "label": label}) + "\n")
    return paths


def run_driver(driver, out, name, model, hyperparams, paths):
    spec = {"model": model, "train": paths["train"], "validation": paths["validation"],
            "labels": ["neg", "pos"], "hyperparams": hyperparams}
    spec_path = os.path.join(out, name + ".spec.json")
    json.dump(spec, open(spec_path, "w"))
    run = subprocess.run([driver, spec_path], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{name}: the driver failed ({run.returncode}):\n{run.stderr}")
    return json.loads(run.stdout.strip().splitlines()[-1])  # after any log lines


def token_batch(data, split, indices, max_length):
    """tune's BuildTokenBatch: [CLS] ids [SEP], padded to the batch's longest."""
    seqs = [[data["cls_id"]] + data[split + "_ids"][i][:max_length - 2] + [data["sep_id"]]
            for i in indices]
    T = max(len(s) for s in seqs)
    ids = torch.tensor([s + [data["pad_id"]] * (T - len(s)) for s in seqs])
    mask = torch.tensor([[1] * len(s) + [0] * (T - len(s)) for s in seqs])
    labels = torch.tensor([data[split + "_labels"][i] for i in indices])
    return ids, mask, labels


def macro_f1(labels, predictions):
    f1s = []
    for c in sorted(set(labels) | set(predictions)):
        tp = sum(1 for y, p in zip(labels, predictions) if y == c and p == c)
        fp = sum(1 for y, p in zip(labels, predictions) if y != c and p == c)
        fn = sum(1 for y, p in zip(labels, predictions) if y == c and p != c)
        f1s.append(2 * tp / (2 * tp + fp + fn))
    return sum(f1s) / len(f1s)


def evaluate(forward, data, batch_size, max_length):
    n = len(data["validation_ids"])
    loss, predictions = 0.0, []
    with torch.no_grad():
        for b in range(0, n, batch_size):
            ids, mask, labels = token_batch(data, "validation", list(range(b, min(n, b + batch_size))),
                                            max_length)
            logits = forward(ids, mask)
            loss += F.cross_entropy(logits, labels, reduction="sum").item()
            predictions += logits.argmax(1).tolist()
    labels = data["validation_labels"]
    return {"validation_loss": loss / n,
            "accuracy": sum(int(y == p) for y, p in zip(labels, predictions)) / n,
            "macro_f1": macro_f1(labels, predictions)}


def reference_run(model, forward, tune_run):
    """Hugging Face Trainer's loop over tune's batches; returns the step losses and epochs."""
    hp, data, steps = tune_run["hyperparams"], tune_run["data"], tune_run["steps"]
    params = dict(model.named_parameters())
    decay_names = set(transformers.Trainer.get_decay_parameter_names(None, model))
    groups = [{"params": [p for n, p in params.items() if n in decay_names],
               "weight_decay": hp["weight_decay"]},
              {"params": [p for n, p in params.items() if n not in decay_names],
               "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=hp["learning_rate"],
                                  betas=(hp["adam_beta1"], hp["adam_beta2"]), eps=hp["adam_epsilon"],
                                  foreach=False)
    per_epoch = math.ceil(math.ceil(len(data["train_ids"]) / hp["batch_size"]) / hp["grad_accum"])
    total = per_epoch * hp["epochs"]
    warmup = math.ceil(total * hp["warmup_ratio"])
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, warmup, total)
    losses, epochs, clipped = [], [], 0
    for s in steps:
        model.train()
        num_items = sum(len(mb) for mb in s["micro_batches"])
        step_loss = 0.0
        for mb in s["micro_batches"]:
            ids, mask, labels = token_batch(data, "train", mb, hp["max_length"])
            summed = F.cross_entropy(forward(ids, mask), labels, reduction="sum")
            (summed / num_items).backward()
            step_loss += summed.item()
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), hp["max_grad_norm"])
        clipped += int(norm.item() > hp["max_grad_norm"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(step_loss / num_items)
        if s["step"] % per_epoch == 0:
            model.eval()
            epochs.append(evaluate(forward, data, hp["batch_size"], hp["max_length"]))
    print(f"  reference: {total} steps, {warmup} of warmup, {clipped} clipped, "
          f"{len(decay_names)} of {len(params)} parameter tensors with weight decay")
    return losses, epochs


def compare(name, tune_run, losses, epochs):
    tune_losses = [s["loss"] for s in tune_run["steps"]]
    diff = max(abs(a - b) for a, b in zip(tune_losses, losses))
    last_tune, last_ref = tune_run["epochs"][-1], epochs[-1]
    metric_diff = max(abs(last_tune[k] - last_ref[k]) for k in ("validation_loss", "accuracy",
                                                                 "macro_f1"))
    print(f"{name}: {len(losses)} steps, max |loss difference| = {diff:.3g}; first/last step loss "
          f"tune {tune_losses[0]:.6f}/{tune_losses[-1]:.6f}, reference {losses[0]:.6f}/{losses[-1]:.6f}")
    for who, m in (("tune", last_tune), ("reference", last_ref)):
        print(f"  final metric ({who:9s}): macro_f1 {m['macro_f1']:.6f}, accuracy "
              f"{m['accuracy']:.6f}, validation loss {m['validation_loss']:.6f}")
    ok = (len(losses) >= 30 and len(losses) == len(tune_losses) and diff <= TOLERANCE and
          metric_diff <= TOLERANCE and len(epochs) == len(tune_run["epochs"]))
    if not ok:
        print(f"  FAILED: steps {len(losses)} vs {len(tune_losses)}, loss diff {diff:.3g}, metric "
              f"diff {metric_diff:.3g} (tolerance {TOLERANCE})")
    return ok


HYPERPARAMS = {"batch_size": 4, "grad_accum": 2, "epochs": 4, "learning_rate": 2e-3,
               "warmup_ratio": 0.2, "weight_decay": 0.05, "max_grad_norm": 0.5, "max_length": 16,
               "scheduler": "linear", "optimizer": "adamw", "dropout": 0.0,
               "attention_dropout": 0.0, "classifier_dropout": 0.0, "precision": "fp32", "seed": 3}


def bert(driver, out, paths, hub):
    snap = os.path.join(hub, "models--tiny-org--bert-wp", "snapshots",
                        os.listdir(os.path.join(hub, "models--tiny-org--bert-wp", "snapshots"))[0])
    run = run_driver(driver, out, "bert", {"checkpoint": snap}, HYPERPARAMS, paths)
    model, info = transformers.BertForSequenceClassification.from_pretrained(
        snap, attn_implementation="eager", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, classifier_dropout=0.0, output_loading_info=True)
    fresh = [*info["missing_keys"], *info["unexpected_keys"], *info["mismatched_keys"]]
    if fresh:
        raise SystemExit(f"BertForSequenceClassification does not load the checkpoint whole: {fresh}")
    forward = lambda ids, mask: model(input_ids=ids, attention_mask=mask).logits  # noqa: E731
    losses, epochs = reference_run(model, forward, run)
    return compare("BERT checkpoint (grad_accum 2, warmup, clipping)", run, losses, epochs)


def torchscript(driver, out, paths, hub):
    snap = os.path.join(hub, "models--tiny-org--bert-wp", "snapshots",
                        os.listdir(os.path.join(hub, "models--tiny-org--bert-wp", "snapshots"))[0])
    vocab = len(open(os.path.join(snap, "vocab.txt")).read().split())
    make = ("block-attention", vocab, 2)
    path = os.path.join(out, "block_attention.pt")
    script = (f"import sys, torch; sys.path.insert(0, {os.path.join(HERE, '..', '..', 'scripts')!r}); "
              f"import torchscript_models as tm; torch.jit.script(tm.make(*{make!r}, layers=2, "
              f"dropout=0.0, seed=5)).save({path!r})")
    made = subprocess.run([SYSTEM_PYTHON, "-c", script], capture_output=True, text=True)
    if made.returncode != 0:
        raise SystemExit(f"{SYSTEM_PYTHON} could not write the TorchScript module:\n{made.stderr}")
    run = run_driver(driver, out, "torchscript", {"torchscript": path, "tokenizer": snap},
                     HYPERPARAMS, paths)
    model = tm.make(*make, layers=2, dropout=0.0, seed=5)
    model.load_state_dict(torch.jit.load(path).state_dict())
    losses, epochs = reference_run(model, model, run)
    return compare("TorchScript block-attention classifier", run, losses, epochs)


def main():
    driver = sys.argv[1]
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import torch"], capture_output=True)
    if probe.returncode != 0:
        print(f"SKIPPED: {SYSTEM_PYTHON} has no torch (Debian: python3-torch), which writes the "
              "TorchScript module in the format of the LibTorch tune links")
        sys.exit(77)
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    out = tempfile.mkdtemp(prefix="tune-trajectory-")
    hub = os.path.join(out, "hub")
    os.makedirs(hub)
    mc.write_bert(hub)
    paths = write_data(out)
    ok = bert(driver, out, paths, hub)
    ok = torchscript(driver, out, paths, hub) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
