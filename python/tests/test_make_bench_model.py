"""scripts/make_bench_model.py's tokenizer.json: every id below the model's vocabulary decodes, and attnzoo's
tokenizer reads it as the Hugging Face `tokenizers` package does (same size, same text for the same ids)."""
import importlib.util
import os

import numpy as np
import pytest

tokenizers = pytest.importorskip("tokenizers")
from attnzoo.tokenizer import Tokenizer  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _script():
    spec = importlib.util.spec_from_file_location("make_bench_model",
                                                  os.path.join(ROOT, "scripts", "make_bench_model.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tokenizer_covers_the_vocabulary(tmp_path):
    vocab_size = 151936
    _script().write_tokenizer(str(tmp_path), vocab_size)
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    ours = Tokenizer.load(str(tmp_path / "tokenizer.json"))
    assert hf.get_vocab_size() == vocab_size
    assert hf.token_to_id("<|endoftext|>") == vocab_size - 1
    rng = np.random.default_rng(0)
    for _ in range(20):
        ids = [int(i) for i in rng.integers(0, vocab_size - 1, size=16)] + [0, 255, 256, vocab_size - 2]
        text = hf.decode(ids)
        assert text and ours.decode(ids) == text
    text = "héllo, wörld\n\t ~"
    assert ours.decode(ours.encode(text, add_special_tokens=False)) == text
    assert ours.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids
