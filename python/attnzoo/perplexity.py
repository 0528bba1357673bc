"""Perplexity as llama.cpp's perplexity tool computes it (``attnzoo perplexity``, ``Model.perplexity``).

The text's tokens are cut into non-overlapping windows of ``n_ctx`` tokens; each window runs from an empty state
with its first token replaced by BOS when the tokenizer adds one, and only its second half is scored (the logits
at window positions ``n_ctx // 2 .. n_ctx - 2`` score the next token). ``ppl`` is exp of the mean negative
log-likelihood; ``ppl_error`` is llama.cpp's "+/-" (ppl times the standard error of that mean).

``default_text()`` is the public-domain text the project measures on: The Adventures of Sherlock Holmes
(Project Gutenberg #1661), shipped as test data by the Debian package golang-github-bkaradzic-go-lz4-dev
(installed by scripts/setup.sh).
"""
import glob
import math
import os
from dataclasses import dataclass, field

from . import _core

DEFAULT_TEXT_PACKAGE = "golang-github-bkaradzic-go-lz4-dev"
_DEFAULT_TEXT_GLOBS = ("/usr/share/gocode/src/github.com/bkaradzic/go-lz4/testdata/pg1661.txt",
                       "/usr/share/gocode/src/github.com/bkaradzic/go-lz4*/testdata/pg1661.txt")


def default_text():
    """Path of the Sherlock Holmes text (FileNotFoundError naming the Debian package when it is absent)."""
    for pattern in _DEFAULT_TEXT_GLOBS:
        for path in sorted(glob.glob(pattern)):
            if os.path.isfile(path):
                return path
    raise FileNotFoundError(
        f"the perplexity text pg1661.txt (The Adventures of Sherlock Holmes, public domain) is missing: it ships "
        f"in the Debian package {DEFAULT_TEXT_PACKAGE} (apt-get install {DEFAULT_TEXT_PACKAGE}, or run "
        f"scripts/setup.sh)")


@dataclass
class PerplexityResult:
    ppl: float
    ppl_error: float              # nan when the scored log-probabilities do not vary
    running_ppl: list = field(default_factory=list)  # after each window: llama.cpp's [1]x,[2]y,...
    chunk_nll: list = field(default_factory=list)    # mean negative log-likelihood of each window alone
    n_tokens: int = 0             # tokens of the whole text
    n_scored: int = 0

    def __str__(self):
        chunks = ",".join(f"[{i + 1}]{p:.4f}" for i, p in enumerate(self.running_ppl))
        err = "" if math.isnan(self.ppl_error) else f" +/- {self.ppl_error:.5f}"
        return f"{chunks}\nFinal estimate: PPL = {self.ppl:.4f}{err}"


def perplexity(model, text_or_ids, n_ctx=512, n_batch=2048, n_chunks=None, bos="auto"):
    """Perplexity of ``model`` (an attnzoo.Model) over a text (str: encoded by the model's tokenizer with its
    special tokens) or token ids. ``bos``: "auto" (the BOS the model's tokenizer adds, if any), None (windows keep
    their own first token) or an id. ``n_batch``: tokens per forward call (n_batch // n_ctx windows side by side,
    or pieces of one window). ``n_chunks``: score only the first windows (None: all)."""
    tokenizer = model.tokenizer
    if isinstance(text_or_ids, str):
        if tokenizer is None:
            raise ValueError(f"text: {model.path} has no tokenizer; pass token ids")
        ids, added = _core.perplexity_tokens(tokenizer._native, text_or_ids)
        source = "text"
    else:
        from .model import _ids
        ids = _ids(text_or_ids)
        added = _core.added_bos(tokenizer._native) if tokenizer is not None else None
        source = "ids"
    if isinstance(bos, str):
        if bos != "auto":
            raise ValueError(f"bos: expected \"auto\", None or a token id, got {bos!r}")
        bos = added
    import numpy as np
    r = _core.perplexity(model._core, np.asarray(ids, dtype=np.int32), n_ctx, n_batch,
                         -1 if n_chunks is None else n_chunks, bos, source)
    return PerplexityResult(**r)
