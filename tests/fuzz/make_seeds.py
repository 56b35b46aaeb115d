#!/usr/bin/python3
"""Writes the generated seeds of tests/fuzz/corpus/ (the hand-written ones are committed as they
are): small pytorch_model.bin files (zip and legacy) saved by PyTorch, the pickles inside them and
pickles of plain values at every protocol, and safetensors files. Run with a Python that has torch:
    /usr/bin/python3 tests/fuzz/make_seeds.py tests/fuzz/corpus
"""
import collections
import io
import json
import os
import pickle
import struct
import sys
import zipfile

import torch


def write(corpus, target, name, data):
    os.makedirs(os.path.join(corpus, target), exist_ok=True)
    with open(os.path.join(corpus, target, name), "wb") as f:
        f.write(data)


def state_dicts():
    w = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    yield "plain", collections.OrderedDict(w=w, b=torch.zeros(2, dtype=torch.float16))
    yield "tied", collections.OrderedDict(a=w, b=w, c=w[1:], d=w.t())  # shared storage, views
    yield "dtypes", collections.OrderedDict(
        h=torch.ones(2, dtype=torch.bfloat16), i=torch.arange(3), m=torch.tensor([True]),
        p=torch.nn.Parameter(torch.ones(1)))


def safetensors(tensors, metadata=None):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def main(corpus):
    for name, sd in state_dicts():
        buf = io.BytesIO()
        torch.save(sd, buf)
        write(corpus, "pytorch_zip", name + ".bin", buf.getvalue())
        with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
            pkl = [n for n in z.namelist() if n.endswith("data.pkl")][0]
            write(corpus, "pickle", name + "_data.pkl", z.read(pkl))
        buf = io.BytesIO()
        torch.save(sd, buf, _use_new_zipfile_serialization=False)
        write(corpus, "pytorch_legacy", name + ".bin", buf.getvalue())
    values = [None, True, 1, -2**70, 1.5, "text", b"bytes", (1, 2), [1, [2]], {"k": {1: 2.0}},
              {1, 2}, frozenset([3]), bytearray(b"x")]
    for protocol in range(6):
        write(corpus, "pickle", f"values_p{protocol}.pkl", pickle.dumps(values, protocol=protocol))
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    write(corpus, "safetensors", "f32.safetensors",
          safetensors({"w": ("F32", [2, 2], f32)}, {"format": "pt"}))
    write(corpus, "safetensors", "mixed.safetensors",
          safetensors({"a": ("F16", [2], b"\x00\x3c\x00\x40"), "b": ("BF16", [1], b"\x80\x3f"),
                       "c": ("I64", [1], struct.pack("<q", 7)), "e": ("F32", [0], b"")}))


if __name__ == "__main__":
    main(sys.argv[1])
