"""Hugging Face ``tokenizer.json`` tokenizers (BPE: byte-level as in GPT-2 / Llama-3 / Qwen, or with byte
fallback), run natively. Token ids match the ``tokenizers`` library for the components supported; a file using
anything else is refused when loaded, with a ``ValueError`` naming the file and the field.

    tok = Tokenizer.load("path/to/model_dir")      # or the tokenizer.json itself
    ids = tok.encode("Hello world")                 # add_special_tokens=True: BOS/EOS per the post-processor
    text = tok.decode(ids, skip_special_tokens=True)
    tok = Tokenizer.train(["corpus.txt"], vocab_size=8000, output="tokenizer.json")   # BpeTrainer's merges

``Tokenizer.from_gguf_vocab(dict)`` builds the tokenizer a GGUF file's ``tokenizer.ggml.*`` metadata describes
(``gpt2`` byte-level BPE, pre-tokenized as llama.cpp does for the file's ``tokenizer.ggml.pre``, or ``llama``
SentencePiece-style BPE); ids match transformers' tokenizer for the file wherever transformers knows that
pre-tokenizer (``llama``: Llama 2's tokenizer.json and llama.cpp, which put a "▁" before every run of text between
special tokens where transformers' GGUF loader puts one only before the first).
"""
import operator
import os

from . import _core

_MAX_ID = 2**31 - 1


def _ids(ids):
    if hasattr(ids, "tolist"):  # numpy arrays, torch tensors
        ids = ids.tolist()
    if isinstance(ids, (str, bytes)):
        raise TypeError("ids: expected a sequence of ints, got a string")
    out = []
    for i, x in enumerate(ids):
        if isinstance(x, bool):
            raise TypeError(f"ids[{i}]: expected an int, got bool")
        try:
            v = operator.index(x)
        except TypeError:
            raise TypeError(f"ids[{i}]: expected an int, got {type(x).__name__}") from None
        if v < 0:
            raise ValueError(f"ids[{i}]: token ids are non-negative, got {v}")
        # Ids past the vocabulary are skipped when decoding, as in `tokenizers`; clamp so they stay unknown.
        out.append(min(v, _MAX_ID))
    return out


class Tokenizer:
    """A loaded tokenizer. Build with :meth:`load` or :meth:`from_str`."""

    def __init__(self, native):
        self._native = native

    @classmethod
    def load(cls, path):
        """Loads ``path``: a ``tokenizer.json`` file or a model directory holding one (whose
        generation_config.json / config.json / tokenizer_config.json then supply ``eos_token_ids``)."""
        return cls(_core.Tokenizer.load(os.fspath(path)))

    @classmethod
    def from_str(cls, text, name="tokenizer.json"):
        """Parses tokenizer.json text; ``name`` stands for the file in error messages."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected str, got {type(text).__name__}")
        return cls(_core.Tokenizer.from_json(text, name))

    @classmethod
    def train(cls, files, vocab_size=30000, min_frequency=0, special_tokens=(), add_prefix_space=False, output=None):
        """Learns byte-level BPE from text ``files`` (paths; read line by line, any size) as Hugging Face
        ``tokenizers``' ``BpeTrainer`` does with a ``ByteLevel`` pre-tokenizer and ``ByteLevel.alphabet()`` as
        the initial alphabet: ``special_tokens`` take ids 0.., then the 256 byte characters, then one token per
        merge until ``vocab_size`` tokens (or no pair seen ``min_frequency`` times is left). Writes the
        tokenizer.json to ``output`` when given; returns the trained tokenizer."""
        if isinstance(files, (str, bytes, os.PathLike)):
            files = [files]
        files = [os.fspath(f) for f in files]
        if not files:
            raise ValueError("files: no training files given")
        if isinstance(special_tokens, str):
            raise TypeError("special_tokens: expected a list of strings, got a string")
        vocab_size, min_frequency = operator.index(vocab_size), operator.index(min_frequency)
        if vocab_size <= 0:
            raise ValueError(f"vocab_size: must be positive, got {vocab_size}")
        if min_frequency < 0:
            raise ValueError(f"min_frequency: must be non-negative, got {min_frequency}")
        text = _core.Tokenizer.train_bpe(files, vocab_size, min_frequency, [str(t) for t in special_tokens],
                                         bool(add_prefix_space))
        if output is not None:
            with open(output, "w", encoding="utf-8") as f:
                f.write(text)
        return cls.from_str(text, os.fspath(output) if output is not None else "trained tokenizer.json")

    _GGUF_KEYS = {"model": "", "pre": "", "tokens": None, "scores": (), "token_types": (), "merges": (), "bos": -1,
                  "eos": -1, "eot": -1, "unk": -1, "pad": -1, "add_bos": None, "add_eos": None,
                  "add_space_prefix": None}

    @classmethod
    def from_gguf_vocab(cls, vocab):
        """Builds the tokenizer a GGUF file's ``tokenizer.ggml.*`` metadata describes. ``vocab`` is a dict with
        ``model`` (``"gpt2"`` or ``"llama"``), ``pre``, ``tokens`` and optionally ``scores``, ``token_types``,
        ``merges``, ``bos`` / ``eos`` / ``eot`` / ``unk`` / ``pad`` (ids; None or -1 for none) and ``add_bos`` /
        ``add_eos`` (None: llama.cpp's default for the vocabulary), ``add_space_prefix`` (``llama`` only; None: true). Bad metadata raises ``ValueError`` naming the
        GGUF key (``tokenizer.ggml.merges[3]: ...``)."""
        if not isinstance(vocab, dict):
            raise TypeError(f"vocab: expected a dict, got {type(vocab).__name__}")
        unknown = sorted(set(vocab) - set(cls._GGUF_KEYS))
        if unknown:
            raise ValueError(f"vocab: unknown keys {unknown} (known: {sorted(cls._GGUF_KEYS)})")
        args = {k: d if vocab.get(k) is None else vocab[k] for k, d in cls._GGUF_KEYS.items()}
        if args["tokens"] is None:
            raise ValueError("vocab: 'tokens' is required")
        for k in ("tokens", "scores", "token_types", "merges"):
            args[k] = list(args[k])
        return cls(_core.Tokenizer.from_gguf_vocab(**args))

    def encode(self, text, add_special_tokens=True):
        """Token ids of ``text`` (a str)."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected str, got {type(text).__name__}")
        if _has_surrogates(text):
            raise ValueError("text: contains a lone surrogate (not encodable as UTF-8)")
        return self._native.encode(text, bool(add_special_tokens))

    def decode(self, ids, skip_special_tokens=False):
        """Text of ``ids``; unknown ids are skipped, invalid UTF-8 becomes U+FFFD."""
        return self._native.decode(_ids(ids), bool(skip_special_tokens))

    def decode_bytes(self, ids, skip_special_tokens=False):
        """The bytes ``ids`` spell, partial or invalid UTF-8 kept as is (byte-level and byte-fallback tokens)."""
        return self._native.decode_bytes(_ids(ids), bool(skip_special_tokens))

    def stream(self, skip_special_tokens=False):
        """A :class:`StreamDecoder` for incremental decoding."""
        return StreamDecoder(self, skip_special_tokens)

    @property
    def vocab_size(self):
        """Distinct tokens: the model vocabulary and the added tokens together."""
        return self._native.vocab_size

    @property
    def eos_token_ids(self):
        """End-of-sequence ids from the model directory's configs ([] when loaded from a bare file)."""
        return list(self._native.eos_token_ids)

    def token_to_id(self, token):
        """The id of ``token`` (a vocabulary or added token), or None."""
        if not isinstance(token, str):
            raise TypeError(f"token: expected str, got {type(token).__name__}")
        return self._native.token_to_id(token)

    def id_to_token(self, id):
        """The token string of ``id``, or None."""
        v = operator.index(id)
        if v < 0 or v > _MAX_ID:
            return None
        return self._native.id_to_token(v)

    def is_special(self, id):
        v = operator.index(id)
        return 0 <= v <= _MAX_ID and self._native.is_special(v)


class StreamDecoder:
    """Feed ids one at a time; each :meth:`push` returns the text they complete, never half a character."""

    def __init__(self, tokenizer, skip_special_tokens=False):
        self._native = _core.StreamDecoder(tokenizer._native, bool(skip_special_tokens))

    def push(self, id):
        v = operator.index(id)
        if v < 0:
            raise ValueError(f"id: token ids are non-negative, got {v}")
        return self._native.push(min(v, _MAX_ID))

    def finish(self):
        """What is still held back (incomplete characters as U+FFFD); the stream starts over."""
        return self._native.finish()


def _has_surrogates(text):
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


__all__ = ["Tokenizer", "StreamDecoder"]
