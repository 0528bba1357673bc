"""The byte-level BPE tokenizer against Hugging Face `tokenizers`: BPE training merge for merge against
BpeTrainer, and encoding with the tokenizer.json BpeTrainer wrote, id for id on held-out text."""
import json
import os
import tempfile

import numpy as np

from . import check, require, row

AREA = "tokenizer"


def _pair(merge):
    """A merge as a pair, from tokenizers' list form or the "a b" string form older versions write."""
    return tuple(merge.split(" ", 1)) if isinstance(merge, str) else tuple(merge)


def corpus(seed, lines):
    """Mixed text (words from syllables, numbers, punctuation, accented and non-Latin words, runs of spaces):
    made here so that the check needs no data file."""
    rng = np.random.default_rng(seed)
    syllables = ["ka", "to", "ri", "en", "the", "qu", "ing", "ó", "über", "наш", "日本", "語", "ال", "ss", "ﬁ", "e\u0301"]
    out = []
    for _ in range(lines):
        words = ["".join(rng.choice(syllables, size=rng.integers(1, 4))) for _ in range(rng.integers(3, 12))]
        words += [str(rng.integers(0, 100000)), rng.choice([",", ".", "!", "  ", "\t", "'s", "--"])]
        rng.shuffle(words)
        out.append(" ".join(words))
    return "\n".join(out) + "\n"


@check(AREA, ["BPE training", "tokenizer (encode)"])
def bpe(ctx):
    tokenizers = require("tokenizers", "tokenizers (Hugging Face)")
    from attnzoo import Tokenizer
    vocab_size = 500 if ctx.quick else 2000
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "train.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(corpus(0, 3000 if ctx.quick else 30000))
        hf = tokenizers.Tokenizer(tokenizers.models.BPE())
        hf.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        hf.decoder = tokenizers.decoders.ByteLevel()
        alphabet = tokenizers.pre_tokenizers.ByteLevel.alphabet()
        hf.train([path], tokenizers.trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                                        initial_alphabet=alphabet))
        Tokenizer.train([path], vocab_size=vocab_size, output=os.path.join(tmp, "ours.json"))
        with open(os.path.join(tmp, "ours.json"), encoding="utf-8") as f:
            merges = [_pair(m) for m in json.load(f)["model"]["merges"]]
    want = [_pair(m) for m in json.loads(hf.to_str())["model"]["merges"]]
    differing = sum(a != b for a, b in zip(merges, want)) + abs(len(merges) - len(want))
    rows = [row(AREA, "BPE training", f"Tokenizer.train: {len(want)} merges (vocab {vocab_size})",
                "tokenizers BpeTrainer (ByteLevel)", differing / max(len(want), 1), 0.0,
                "fraction of differing merges")]
    held_out = corpus(1, 200).split("\n")
    loaded = Tokenizer.from_str(hf.to_str())
    total = wrong = 0
    for line in held_out:
        got, exp = loaded.encode(line, add_special_tokens=False), hf.encode(line, add_special_tokens=False).ids
        total += max(len(exp), 1)
        wrong += len(exp) if list(got) != exp else 0
    rows.append(row(AREA, "tokenizer (encode)",
                    f"encode {len(held_out)} held-out lines with HF's trained tokenizer.json",
                    "tokenizers.Tokenizer.encode", wrong / total, 0.0, "fraction of ids in differing lines"))
    return rows
