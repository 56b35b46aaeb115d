#!/usr/bin/env python3
"""pytorch_model.bin in, without executing it (docs/config.md "Checkpoints": "Weights files").

pytorch_bin_test.py TUNE_BINARY

1. The tests' BERT-, RoBERTa- and DeBERTa-v3-shaped checkpoints (make_checkpoints.py, written as
   model.safetensors) are written again as Debian's python3-torch writes them: torch.save's zip
   archive (an OrderedDict with _metadata, a tied tensor, a transposed view and two tensors that
   are slices of one storage), torch.save's legacy format, and sharded behind
   pytorch_model.bin.index.json and model.safetensors.index.json. `tune predict` must print the
   same logits from every one, to the last digit, as from model.safetensors.
2. Hostile files in place of pytorch_model.bin, each refused with exit status 2 naming the
   problem, and nothing executed: a __reduce__ that calls os.system, a global of the pickle's own
   module, a truncated archive, a storage offset past the end of its storage.
3. `tune init --from-cache` on a cache whose DeBERTa-v3 is pytorch_model.bin only and whose BERT
   is sharded: both listed, and the config it writes runs a two-trial study.
Exit 77 (skipped) without python3-torch.
"""
import collections
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import zipfile

try:
    import torch
except ImportError:
    print("SKIPPED: python3-torch is not installed")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import make_checkpoints as mc  # noqa: E402
from checks import FAILURES, check  # noqa: E402
from make_checkpoints import TEXTS, read_safetensors  # noqa: E402


def state_dict(weights):
    """The weights as torch.save sees a model's state_dict: an OrderedDict with _metadata, a
    tied copy of the word embeddings (as BERT's MLM head has), a transposed view, and two tensors
    that are slices of one storage."""
    sd = collections.OrderedDict()
    names = list(weights)
    for name in names:
        sd[name] = weights[name].clone()
    word = next(n for n in names if n.endswith("embeddings.word_embeddings.weight"))
    sd["cls.predictions.decoder.weight"] = sd[word]  # tied: one storage, two names
    square = next(n for n in names if n.endswith("attention.self.query.weight") or
                  n.endswith("attention.self.query_proj.weight"))
    sd[square] = weights[square].t().contiguous().t()  # a view with strides (1, rows)
    a, b = [n for n in names if n.endswith(".bias") and "encoder.layer.0." in n][:2]
    joint = torch.cat([weights[a].flatten(), weights[b].flatten()])
    sd[a] = joint[: weights[a].numel()].view(weights[a].shape)  # storage offset 0
    sd[b] = joint[weights[a].numel():].view(weights[b].shape)   # storage offset > 0
    sd._metadata = collections.OrderedDict([("", {"version": 1})])
    return sd


def copy_snapshot(src, dst, keep_weights=False):
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if keep_weights or f not in ("model.safetensors",):
            shutil.copy(os.path.join(src, f), dst)


def shard(weights, n=2):
    names = list(weights)
    per = (len(names) + n - 1) // n
    return [collections.OrderedDict((k, weights[k]) for k in names[i * per:(i + 1) * per])
            for i in range(n)]


def write_sharded(d, weights, kind):
    parts = shard(weights)
    weight_map = {}
    for i, part in enumerate(parts, 1):
        if kind == "bin":
            name = f"pytorch_model-{i:05d}-of-{len(parts):05d}.bin"
            torch.save(part, os.path.join(d, name))
        else:
            name = f"model-{i:05d}-of-{len(parts):05d}.safetensors"
            mc.write_safetensors(os.path.join(d, name), part)
        for k in part:
            weight_map[k] = name
    index = "pytorch_model.bin.index.json" if kind == "bin" else "model.safetensors.index.json"
    total = sum(t.numel() * 4 for t in weights.values())
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
              open(os.path.join(d, index), "w"), indent=2)


def predict(tune, model, texts):
    return subprocess.run([tune, "predict", "--model", model, "--data", texts, "--threads", "1"],
                          capture_output=True, text=True)


# --- Hostile files -------------------------------------------------------------------------------
class Payload:
    """A global of this script's own module: not a state dict's."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class Stranger:
    pass


class FakeStorage:
    pass


FAKE = FakeStorage()


class OffsetPastEnd:
    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2,
                (FAKE, 1000, (4, 3), (3, 1), False, collections.OrderedDict()))


class StoragePickler(pickle.Pickler):
    def persistent_id(self, obj):
        if obj is FAKE:
            return ("storage", torch.FloatStorage, "0", "cpu", 12)
        return None


def write_archive(path, obj, storages=None):
    """A torch.save-shaped zip: archive/data.pkl (pickled by StoragePickler), archive/data/KEY."""
    import io
    buf = io.BytesIO()
    StoragePickler(buf, protocol=2).dump(obj)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        for key, data in (storages or {}).items():
            z.writestr(f"archive/data/{key}", data)
        z.writestr("archive/version", "3\n")


def hostile_cases(tune, base, texts, out):
    marker = os.path.join(out, "EXECUTED")
    good_bin = os.path.join(out, "good.bin")
    torch.save(collections.OrderedDict(w=torch.zeros(4)), good_bin)
    raw = open(good_bin, "rb").read()
    cases = [
        ("os.system in a __reduce__", "posix.system",
         lambda p: write_archive(p, collections.OrderedDict(x=Payload(marker)))),
        ("a global of the file's own module", "__main__.Stranger",
         lambda p: write_archive(p, collections.OrderedDict(x=Stranger()))),
        ("a truncated archive", "truncated",
         lambda p: open(p, "wb").write(raw[: len(raw) // 2])),
        ("a storage offset past the end", "storage",
         lambda p: write_archive(p, collections.OrderedDict(x=OffsetPastEnd()),
                                 {"0": bytes(48)})),
        ("a legacy pickle calling os.system", "posix.system",
         lambda p: open(p, "wb").write(
             pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2) + pickle.dumps(1001, protocol=2) +
             pickle.dumps({"little_endian": True}, protocol=2) +
             pickle.dumps(collections.OrderedDict(x=Payload(marker)), protocol=2))),
    ]
    for what, expect, make in cases:
        d = os.path.join(out, "hostile-" + expect.replace("/", "_").replace(".", "_") +
                         str(cases.index((what, expect, make))))
        copy_snapshot(base, d)
        make(os.path.join(d, "pytorch_model.bin"))
        r = predict(tune, d, texts)
        err = r.stderr.strip().splitlines()
        print(f"  $ tune predict --model {os.path.basename(d)} ...  # {what}\n  exit {r.returncode}: "
              f"{err[-1] if err else ''}")
        check(r.returncode == 2 and expect in r.stderr, f"{what}: exit 2 naming '{expect}'")
        check(not os.path.exists(marker), f"{what}: nothing executed")


def main():
    tune = sys.argv[1]
    out = tempfile.mkdtemp(prefix="tune-pytorch-bin-")
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

    # 1. Every format of the same weights gives the same logits.
    for name in ("tiny-org--bert-wp", "tiny-org--roberta-bpe", "tiny-org--deberta-wp"):
        snaps = os.path.join(hub, "models--" + name, "snapshots")
        snap = os.path.join(snaps, os.listdir(snaps)[0])
        weights = read_safetensors(os.path.join(snap, "model.safetensors"))
        if "classifier.weight" not in weights:  # a head, so that tune predict can use the model
            g = torch.Generator().manual_seed(11)
            weights["classifier.weight"] = torch.randn(2, mc.HIDDEN, generator=g)
            weights["classifier.bias"] = torch.randn(2, generator=g) * 0.1
            mc.write_safetensors(os.path.join(snap, "model.safetensors"), weights)
        ref = predict(tune, snap, texts)
        check(ref.returncode == 0, f"{name}: model.safetensors predicts ({ref.stderr[-300:]})")
        variants = {
            "zip": lambda d: torch.save(state_dict(weights), os.path.join(d, "pytorch_model.bin")),
            "legacy": lambda d: torch.save(state_dict(weights), os.path.join(d, "pytorch_model.bin"),
                                           _use_new_zipfile_serialization=False),
            "sharded bin": lambda d: write_sharded(d, weights, "bin"),
            "sharded safetensors": lambda d: write_sharded(d, weights, "safetensors"),
        }
        for kind, write in variants.items():
            d = os.path.join(out, name + "-" + kind.replace(" ", "-"))
            copy_snapshot(snap, d)
            write(d)
            got = predict(tune, d, texts)
            same = got.returncode == 0 and got.stdout == ref.stdout and got.stdout
            check(bool(same), f"{name} as {kind}: the same logits as model.safetensors"
                  + ("" if same else f" (exit {got.returncode}: {got.stderr[-400:]})"))

    # 2. Hostile files.
    bert = os.path.join(hub, "models--tiny-org--bert-wp", "snapshots")
    hostile_cases(tune, os.path.join(bert, os.listdir(bert)[0]), texts, out)

    # 3. A cache whose DeBERTa-v3 is pytorch_model.bin only and whose BERT is sharded.
    cache = os.path.join(out, "cache")
    deb = mc.snapshot(cache, "tiny-org/deberta-v3-bin")
    snaps = os.path.join(hub, "models--tiny-org--deberta-wp", "snapshots")
    src = os.path.join(snaps, os.listdir(snaps)[0])
    copy_snapshot(src, deb)
    torch.save(state_dict(read_safetensors(os.path.join(src, "model.safetensors"))),
               os.path.join(deb, "pytorch_model.bin"))
    bert_sharded = mc.snapshot(cache, "tiny-org/bert-sharded")
    snaps = os.path.join(hub, "models--tiny-org--bert-wp", "snapshots")
    src = os.path.join(snaps, os.listdir(snaps)[0])
    copy_snapshot(src, bert_sharded)
    write_sharded(bert_sharded, read_safetensors(os.path.join(src, "model.safetensors")), "bin")
    config = os.path.join(out, "s.json")
    r = subprocess.run([tune, "init", "--from-cache", "--cache-dir", cache, "--data",
                        os.path.join(out, "train.jsonl"), "--device-memory", "2GiB", "--epochs", "1",
                        "--output", config], capture_output=True, text=True, cwd=out,
                       env=dict(os.environ, TUNE_NVML_LIBRARY=os.path.join(out, "no-nvml.so")))
    print("  $ tune init --from-cache --cache-dir cache ...\n" +
          "\n".join("  " + line for line in r.stderr.strip().splitlines()))
    check(r.returncode == 0, "tune init --from-cache succeeds")
    for model in ("tiny-org/deberta-v3-bin", "tiny-org/bert-sharded"):
        check(f"Found {model} (" in r.stderr, f"tune init lists {model}")
    if r.returncode == 0:
        choices = json.load(open(config))["search_space"]["model"]["choices"]
        check(sorted(choices) == ["tiny-org/bert-sharded", "tiny-org/deberta-v3-bin"],
              f"the config chooses among both ({choices})")
        # One trial per model, enqueued (the sampler might pick one model twice).
        db = ["--storage", "sqlite:///s.db", "--study", "s"]
        subprocess.run([tune, "create-study", "--direction", "maximize"] + db,
                       capture_output=True, text=True, cwd=out, check=True)
        for model in choices:
            subprocess.run([tune, "enqueue", "--params", json.dumps({"model": model})] + db,
                           capture_output=True, text=True, cwd=out, check=True)
        study = subprocess.run([tune, "--study", "s", "--config", config, "--n-trials", "2"],
                               capture_output=True, text=True, cwd=out)
        loaded = [line.split("] ", 2)[-1] for line in study.stderr.splitlines() if "Loaded " in line]
        print("  $ tune --study s --config s.json --n-trials 2\n" + "\n".join("  " + t for t in loaded))
        check(study.returncode == 0, f"the study runs (exit {study.returncode}: "
              f"{study.stderr.strip().splitlines()[-1:] if study.returncode else ''})")
        trials = subprocess.run([tune, "trials", "--format", "json"] + db, capture_output=True,
                                text=True, cwd=out)
        rows = json.loads(trials.stdout or "[]")
        done = {t["params"]["model"]: t["state"] for t in rows}
        for t in rows:
            print(f"  trial {t['number']}: {t['params']['model']} {t['state']} value {t.get('value')}")
        check(done == {m: "COMPLETE" for m in choices}, "one COMPLETE trial per model")
    shutil.rmtree(out, ignore_errors=True) if not FAILURES else print(f"kept {out}")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
