#!/usr/bin/env python3
"""Mutates model directories and runs `tune predict` on each, counting crashes and hangs.

    bench/model_dir_mutations.py --tune build/tune [--cases 36] [--seed 1] [--timeout 30]
                                 [--work DIR] [--json FILE] [--keep-findings DIR]

A model directory is what a user hands `tune predict`: a --save-best directory or a Hugging Face
checkpoint with a classifier head. The bases are small random checkpoints
(tests/scripts/make_checkpoints.py) trained for one epoch by `tune --save-best` (BERT with
WordPiece, RoBERTa with byte-level BPE, DeBERTa-v3 with SentencePiece when python3-sentencepiece
is there), and the BERT one converted to a zip and a legacy `pytorch_model.bin` (torch.save).
Each case copies one base and mutates one of its files (model.safetensors, pytorch_model.bin,
vocab.txt, vocab.json, merges.txt, spm.model, config.json, trial.json) in one way:

    flip       a few random bits flipped
    truncate   cut at a random offset
    duplicate  a random slice inserted again after itself
    overwrite  a random range overwritten (random bytes, 0xff, zeros, or float32 NaN / inf)
    header     (model.safetensors) the 8-byte header length, or a byte of the JSON header

then runs `tune predict` on the validation file under a timeout. Outcomes:

    accepted   exit status 0 (the mutation missed what predict reads, or still made sense)
    clean      exit status 1 or 2 with a message (`[error] ...`)
    garbled    exit status 0, 1 or 2, but stderr is not valid UTF-8 (a message quoting the
               file's bytes as they are, which a terminal or a log parser chokes on)
    crash      any other exit status, or a signal (SIGSEGV, SIGABRT, ...), or a failure
               without a message
    hang       still running at the timeout (killed)

Exit status: 0 when there was no crash, hang or garbled message, 1 otherwise, 77 when python3-torch is
missing (the bases cannot be written). --keep-findings copies each crashing or hanging case's
directory there, with the command, for a regression test.
"""
import argparse
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
MAKE_CHECKPOINTS = os.path.join(SOURCE, "tests", "scripts", "make_checkpoints.py")
MUTATIONS = ["flip", "truncate", "duplicate", "overwrite", "header"]
MUTABLE = ["model.safetensors", "pytorch_model.bin", "vocab.txt", "vocab.json", "merges.txt",
           "spm.model", "config.json", "trial.json"]


def run(cmd, timeout=600, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, **kw)


def snapshot(work, name):
    folder = "models--" + name.replace("/", "--")
    return os.path.join(work, "hub", folder, "snapshots",
                        "0123456789abcdef0123456789abcdef01234567")


def train_base(tune, work, model, out):
    """One trial of one epoch on `model`'s checkpoint, kept with --save-best at `out`."""
    config = {
        "direction": "maximize",
        "sampler": {"name": "random", "seed": 1},
        "search_space": {"model": [model], "learning_rate": [3e-3]},
        "objective": {"type": "train",
                      "data": {"train": "train.jsonl", "validation": "validation.jsonl",
                               "labels": ["neg", "pos"]},
                      "epochs": 1, "batch_size": 16, "max_length": 16, "threads": 1},
    }
    path = os.path.join(work, "base.json")
    with open(path, "w") as f:
        json.dump(config, f)
    env = dict(os.environ, HF_HUB_CACHE=os.path.join(work, "hub"))
    r = run([tune, "--study", "base", "--config", path, "--storage", "memory", "--n-trials", "1",
             "--save-best", out], cwd=work, env=env)
    if r.returncode != 0:
        sys.exit(f"model_dir_mutations.py: training the base on {model} failed:\n{r.stderr}")


def write_bins(saved, out_zip, out_legacy):
    """The saved BERT's model.safetensors as pytorch_model.bin, zip and legacy (torch.save)."""
    import torch
    with open(os.path.join(saved, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    state = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32)
        state[name] = t.reshape(info["shape"]).clone()
    for out, zipped in ((out_zip, True), (out_legacy, False)):
        shutil.copytree(saved, out)
        os.remove(os.path.join(out, "model.safetensors"))
        torch.save(state, os.path.join(out, "pytorch_model.bin"),
                   _use_new_zipfile_serialization=zipped)


def make_bases(tune, work):
    r = run(["/usr/bin/python3", MAKE_CHECKPOINTS, work])
    if r.returncode != 0:
        sys.exit(f"model_dir_mutations.py: make_checkpoints.py failed:\n{r.stderr}")
    bases = {}
    models = {"bert": "tiny-org/bert-wp", "roberta": "tiny-org/roberta-bpe",
              "deberta-spm": "tiny-org/deberta-spm"}
    for key, model in models.items():
        if key == "deberta-spm" and not os.path.exists(os.path.join(snapshot(work, model),
                                                                    "spm.model")):
            continue
        out = os.path.join(work, "bases", key)
        train_base(tune, work, model, out)
        bases[key] = out
    write_bins(bases["bert"], os.path.join(work, "bases", "bert-zip"),
               os.path.join(work, "bases", "bert-legacy"))
    bases["bert-zip"] = os.path.join(work, "bases", "bert-zip")
    bases["bert-legacy"] = os.path.join(work, "bases", "bert-legacy")
    return bases


def mutate(data, kind, rng, name):
    """`data` (bytes) mutated by `kind`; returns (new bytes, a short description)."""
    n = len(data)
    if n == 0:
        return b"\x00", "empty file given one byte"
    if kind == "flip":
        out = bytearray(data)
        k = rng.randint(1, 8)
        for _ in range(k):
            i = rng.randrange(n)
            out[i] ^= 1 << rng.randrange(8)
        return bytes(out), f"{k} bits flipped"
    if kind == "truncate":
        at = rng.randrange(n)
        return data[:at], f"truncated at {at} of {n}"
    if kind == "duplicate":
        a = rng.randrange(n)
        b = min(n, a + rng.randint(1, max(1, n // 4)))
        return data[:b] + data[a:b] + data[b:], f"bytes {a}:{b} duplicated"
    if kind == "header" and name == "model.safetensors":
        out = bytearray(data)
        if rng.random() < 0.5:
            value = rng.choice([0, 1, 7, n, n - 8, 2 ** 31, 2 ** 63 - 1, 2 ** 64 - 1,
                                rng.randrange(2 ** 64)])
            out[0:8] = struct.pack("<Q", value)
            return bytes(out), f"header length {value}"
        length = struct.unpack("<Q", data[:8])[0]
        i = 8 + rng.randrange(max(1, min(length, n - 8)))
        out[i] = rng.choice(b'{}[]":,0123456789-eE. \x00\xff')
        return bytes(out), f"header byte {i} = {out[i]:#04x}"
    # overwrite (also "header" on other files)
    a = rng.randrange(n)
    b = min(n, a + rng.randint(1, max(1, min(4096, n // 2))))
    fill = rng.choice(["random", "ff", "zero", "nan", "inf"])
    if fill == "random":
        chunk = bytes(rng.randrange(256) for _ in range(b - a))
    elif fill == "ff":
        chunk = b"\xff" * (b - a)
    elif fill == "zero":
        chunk = b"\x00" * (b - a)
    else:
        word = struct.pack("<f", float("nan") if fill == "nan" else float("inf"))
        a -= a % 4
        chunk = (word * ((b - a) // 4 + 1))[: b - a]
    return data[:a] + chunk + data[b:], f"bytes {a}:{b} overwritten ({fill})"


def classify(returncode, timed_out):
    if timed_out:
        return "hang"
    if returncode == 0:
        return "accepted"
    if returncode in (1, 2):
        return "clean"
    return "crash"


def run_case(tune, base, file_name, kind, rng, case_dir, data_file, timeout):
    shutil.copytree(base, case_dir)
    path = os.path.join(case_dir, file_name)
    with open(path, "rb") as f:
        original = f.read()
    mutated, what = mutate(original, kind, rng, file_name)
    with open(path, "wb") as f:
        f.write(mutated)
    cmd = [tune, "predict", "--model", case_dir, "--data", data_file, "--output",
           os.path.join(case_dir, "predictions.jsonl"), "--threads", "1"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    timed_out = False
    try:
        _, raw = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        _, raw = proc.communicate()
    seconds = time.monotonic() - start
    outcome = classify(proc.returncode, timed_out)
    try:
        err = raw.decode("utf-8")
    except UnicodeDecodeError:  # a message that quotes the file's bytes as they are
        err = raw.decode("utf-8", errors="replace")
        if outcome in ("accepted", "clean"):
            outcome = "garbled"
    message = ""
    for line in (err or "").splitlines():
        if "error" in line.lower():
            message = line.strip()
    if outcome == "clean" and not message:
        outcome = "crash"  # a failure without a message is not a clean error
    return {"file": file_name, "mutation": what, "kind": kind, "outcome": outcome,
            "returncode": proc.returncode, "seconds": round(seconds, 2), "message": message[:300],
            "command": " ".join(cmd)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tune", required=True)
    ap.add_argument("--cases", type=int, default=36)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--work")
    ap.add_argument("--json")
    ap.add_argument("--keep-findings")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401  (torch.save writes the pytorch_model.bin bases)
    except ImportError:
        print("model_dir_mutations.py: SKIPPED: python3-torch is not installed", file=sys.stderr)
        return 77
    tune = os.path.abspath(args.tune)
    work = args.work or tempfile.mkdtemp(prefix="tune-mutations-")
    os.makedirs(work, exist_ok=True)
    started = time.monotonic()
    bases = make_bases(tune, work)
    data_file = os.path.join(work, "validation.jsonl")
    rng = random.Random(args.seed)
    choices = [(key, name) for key, base in sorted(bases.items())
               for name in MUTABLE if os.path.exists(os.path.join(base, name))]
    results = []
    counts = {"accepted": 0, "clean": 0, "garbled": 0, "crash": 0, "hang": 0}
    for i in range(args.cases):
        key, name = rng.choice(choices)
        kind = rng.choice(MUTATIONS)
        case_dir = os.path.join(work, "cases", f"{i:05d}")
        r = run_case(tune, bases[key], name, kind, rng, case_dir, data_file, args.timeout)
        r["base"] = key
        r["case"] = i
        results.append(r)
        counts[r["outcome"]] += 1
        if r["outcome"] in ("crash", "hang", "garbled"):
            print(f"case {i}: {r['outcome'].upper()} on {key}/{name} ({r['mutation']}), "
                  f"exit {r['returncode']}: {r['command']}", file=sys.stderr)
            if args.keep_findings:
                dest = os.path.join(args.keep_findings, f"{key}-{i:05d}")
                shutil.copytree(case_dir, dest, dirs_exist_ok=True)
        else:
            shutil.rmtree(case_dir, ignore_errors=True)
        if (i + 1) % 25 == 0 or i + 1 == args.cases:
            print(f"{i + 1}/{args.cases} cases: {counts['accepted']} accepted, {counts['clean']} "
                  f"clean errors, {counts['garbled']} garbled, {counts['crash']} crashes, "
                  f"{counts['hang']} hangs",
                  file=sys.stderr, flush=True)
    summary = {"cases": args.cases, "seed": args.seed, "timeout": args.timeout,
               "bases": sorted(bases), "counts": counts,
               "seconds": round(time.monotonic() - started, 1),
               "slowest": max((r["seconds"] for r in results), default=0),
               "findings": [r for r in results
                            if r["outcome"] in ("crash", "hang", "garbled")]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "results": results}, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "findings"}))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if counts["crash"] or counts["hang"] or counts["garbled"] else 0


if __name__ == "__main__":
    sys.exit(main())
