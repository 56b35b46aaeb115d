"""The lines of Debian's fortunes (package 'fortunes'): real text for the tests that train
tokenizers on it. Shared by make_checkpoints.py and the tokenizer parity test."""
import glob
import os

FORTUNES = "/usr/share/games/fortunes"


def fortune_lines():
    """Non-empty lines of the fortune files, or none when the package is not installed."""
    lines = []
    for path in sorted(glob.glob(os.path.join(FORTUNES, "*"))):
        if os.path.isfile(path) and "." not in os.path.basename(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                lines += [l.strip() for l in f if l.strip() and l.strip() != "%"]
    return lines
