#!/usr/bin/env python3
"""TorchScript files for tune's tests: good ones, and each kind of file tune must refuse.

make_torchscript_fixtures.py OUT_DIR [--vocab-size N] [--num-labels K]

  bag.pt            a scripted BagClassifier (scripts/torchscript_models.py): trains
  state_dict.pt     torch.save(model.state_dict()): a pickle, not TorchScript
  pickled.pt        torch.save(model): a pickle of the Python module, not TorchScript
  not_a_zip.pt      a text file
  one_input.pt      forward(input_ids) only
  wrong_shape.pt    forward returns Tensor[B, T, num_labels]
  small_vocab.pt    an embedding of 4 rows: forward fails on the tokenizer's larger ids
  more_labels.pt    a BagClassifier with one output more than num_labels
  checkpointing.pt  a BagClassifier that declares `gradient_checkpointing: bool`

Exit 77 without python3-torch.
"""
import argparse
import os
import sys

try:
    import torch
    from torch import nn
except ImportError:
    print("SKIPPED: python3-torch is not installed")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import torchscript_models as tm  # noqa: E402


class OneInput(nn.Module):
    def __init__(self, vocab_size: int, num_labels: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, 8)
        self.out = nn.Linear(8, num_labels)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(input_ids).mean(1))


class PerToken(nn.Module):
    def __init__(self, vocab_size: int, num_labels: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, 8)
        self.out = nn.Linear(8, num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(input_ids))


class Checkpointing(tm.BagClassifier):
    gradient_checkpointing: bool

    def __init__(self, vocab_size: int, num_labels: int):
        super().__init__(vocab_size, num_labels)
        self.gradient_checkpointing = False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--num-labels", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    path = lambda name: os.path.join(args.out, name)  # noqa: E731
    v, k = args.vocab_size, args.num_labels
    bag = tm.make("bag", v, k)
    torch.jit.script(bag).save(path("bag.pt"))
    torch.save(bag.state_dict(), path("state_dict.pt"))
    torch.save(bag, path("pickled.pt"))
    with open(path("not_a_zip.pt"), "w") as f:
        f.write("not a model\n")
    torch.manual_seed(0)
    torch.jit.script(OneInput(v, k)).save(path("one_input.pt"))
    torch.jit.script(PerToken(v, k)).save(path("wrong_shape.pt"))
    torch.jit.script(tm.BagClassifier(4, k)).save(path("small_vocab.pt"))
    torch.jit.script(Checkpointing(v, k)).save(path("checkpointing.pt"))
    torch.jit.script(tm.make("bag", v, k + 1)).save(path("more_labels.pt"))


if __name__ == "__main__":
    main()
