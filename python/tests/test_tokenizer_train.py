"""BPE training against Hugging Face `tokenizers`' BpeTrainer (ByteLevel pre-tokenizer, ByteLevel.alphabet() as
the initial alphabet): the same vocabulary and the same merges in the same order for vocab sizes 500, 2000 and
8000, on Debian's GPL-3 and Apache-2.0 texts and on ~4.7 MB of mixed text (Sherlock Holmes from the Debian
package scripts/setup.sh installs, then text_corpus.py's multilingual documents); the trained tokenizer.json
gives HF's ids on held-out text, loaded by attnzoo and by `tokenizers`. Plus the CLI (`attnzoo tokenizer
train`: progress bar, --report) and its errors."""
import json
import os
import subprocess

import pytest

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import decoders, models, pre_tokenizers, trainers  # noqa: E402

from attnzoo.tokenizer import Tokenizer  # noqa: E402
import text_corpus  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(ROOT, "build", "attnzoo"))
LICENSES = ["/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0"]
HELD_OUT_LICENSES = ["/usr/share/common-licenses/GPL-2", "/usr/share/common-licenses/MPL-2.0"]
SHERLOCK = "/usr/share/gocode/src/github.com/bkaradzic/go-lz4/testdata/pg1661.txt"


def hf_train(files, vocab_size, special_tokens=(), add_prefix_space=False, min_frequency=0):
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(special_tokens), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(files, trainer)
    return tok


def model_of(tokenizer_json):
    m = json.loads(tokenizer_json)["model"]
    return m["vocab"], [tuple(p) for p in m["merges"]]


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def assert_same_training(ours_json, hf):
    vocab, merges = model_of(ours_json)
    hf_vocab, hf_merges = model_of(hf.to_str())
    assert len(merges) == len(hf_merges)
    first = next((i for i, (a, b) in enumerate(zip(merges, hf_merges)) if a != b), None)
    assert first is None, f"merge {first}: ours {merges[first]}, tokenizers {hf_merges[first]}"
    assert vocab == hf_vocab


def assert_same_ids(ours_path, hf, texts):
    ours = Tokenizer.load(ours_path)
    reloaded = tokenizers.Tokenizer.from_file(ours_path)  # what HF makes of the file we wrote
    for i, t in enumerate(texts):
        want = hf.encode(t).ids
        assert ours.encode(t) == want, f"text {i}: {t[:80]!r}"
        assert reloaded.encode(t).ids == want, f"text {i}: {t[:80]!r}"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """(training file, held-out texts, HF trained to 8000): Sherlock Holmes then ~3M characters of multilingual
    documents."""
    docs = text_corpus.documents(total_chars=3_000_000)
    path = str(tmp_path_factory.mktemp("bpe") / "mixed.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(read(SHERLOCK))
        f.write("".join(docs))
    held_out = text_corpus.documents(total_chars=200_000, seed=7)[::7]
    return path, held_out, hf_train([path], 8000)


def held_out_license_texts():
    texts = []
    for p in HELD_OUT_LICENSES:
        texts += read(p).split("\n\n")
    return texts + ["Licensed under the Apache License, Version 2.0 — 日本語 😀 1234567 don't", "  \t\n"]


@pytest.mark.parametrize("vocab_size", [500, 2000, 8000])
def test_license_texts_train_as_tokenizers_does(tmp_path, vocab_size):
    out = str(tmp_path / "tokenizer.json")
    ours = Tokenizer.train(LICENSES, vocab_size=vocab_size, output=out)
    hf = hf_train(LICENSES, vocab_size)
    assert_same_training(read(out), hf)
    assert ours.vocab_size == hf.get_vocab_size()
    assert_same_ids(out, hf, held_out_license_texts())


@pytest.mark.parametrize("vocab_size", [500, 2000, 8000])
def test_mixed_text_trains_as_tokenizers_does(mixed, tmp_path, vocab_size):
    # BpeTrainer's vocab_size only ends its merge loop, so its training to 500 or 2000 tokens is the first merges
    # of its training to 8000: HF trains once here (seconds on this corpus), attnzoo at each size.
    path, held_out, hf = mixed
    out = str(tmp_path / "tokenizer.json")
    Tokenizer.train([path], vocab_size=vocab_size, output=out)
    vocab, merges = model_of(read(out))
    hf_vocab, hf_merges = model_of(hf.to_str())
    assert merges == hf_merges[:vocab_size - 256]
    assert vocab == {t: i for t, i in hf_vocab.items() if i < vocab_size}
    if vocab_size == 8000:
        assert_same_ids(out, hf, held_out)
    else:  # the file as attnzoo and tokenizers read it
        reloaded = tokenizers.Tokenizer.from_file(out)
        ours = Tokenizer.load(out)
        assert all(ours.encode(t) == reloaded.encode(t).ids for t in held_out)


def test_special_tokens_prefix_space_and_min_frequency(tmp_path):
    out = str(tmp_path / "tokenizer.json")
    special = ["<|endoftext|>", "<pad>"]
    ours = Tokenizer.train(LICENSES[1:], vocab_size=1500, special_tokens=special, add_prefix_space=True,
                           min_frequency=12, output=out)
    hf = hf_train(LICENSES[1:], 1500, special_tokens=special, add_prefix_space=True, min_frequency=12)
    assert_same_training(read(out), hf)
    assert len(model_of(read(out))[1]) < 1500 - 256 - 2  # min_frequency stopped it early
    assert [ours.token_to_id(t) for t in special] == [0, 1] and ours.is_special(0)
    assert_same_ids(out, hf, ["<|endoftext|>Hello<pad> world", "Apache License"] + held_out_license_texts()[:20])


def test_bad_arguments():
    with pytest.raises(ValueError, match="vocab_size"):
        Tokenizer.train(LICENSES, vocab_size=0)
    with pytest.raises(ValueError, match="files"):
        Tokenizer.train([], vocab_size=300)
    with pytest.raises(ValueError, match="no-such-file"):
        Tokenizer.train(["/no-such-file"], vocab_size=300)
    with pytest.raises(TypeError, match="special_tokens"):
        Tokenizer.train(LICENSES, vocab_size=300, special_tokens="<s>")


cli = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"attnzoo CLI not built at {CLI}")


@cli
def test_cli_trains_writes_and_reports(tmp_path):
    out = str(tmp_path / "tokenizer.json")
    cmd = [CLI, "tokenizer", "train", "--vocab-size", "2000", "--files", *LICENSES, "-o", out,
           "--special-tokens", "<|endoftext|>", "--report", HELD_OUT_LICENSES[0]]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # no progress bar when stderr is not a terminal
    assert f"wrote {out}: 2000 tokens (1 special, 1743 merges)" in r.stdout
    assert "tokens per byte" in r.stdout and "round-trip failures   0\n" in r.stdout
    assert_same_training(read(out), hf_train(LICENSES, 2000, special_tokens=["<|endoftext|>"]))

    r = subprocess.run(cmd + ["--progress"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "counting words" in r.stderr and "merging" in r.stderr and "100.0%" in r.stderr


@cli
def test_cli_errors_name_what_is_wrong(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"good line\nbad \xff line\n")
    out = str(tmp_path / "t.json")
    for args, message in [([], "--vocab-size"), (["--vocab-size", "x"], "--vocab-size: expected a non-negative integer"),
                          (["--vocab-size", "300", "-o", out], "--files"),
                          (["--vocab-size", "300", "--files", "/no-such-file", "-o", out], "/no-such-file"),
                          (["--vocab-size", "300", "--files", str(bad), "-o", out], "line 2 is not valid UTF-8"),
                          (["--vocab-size", "300", "--files", LICENSES[0]], "-o tokenizer.json is required"),
                          (["--vocab-size", "300", "--files", LICENSES[0], "-o", "/no-such-dir/t.json"],
                           "cannot write into '/no-such-dir'"),
                          (["--vocab-size", "300", "--files", LICENSES[0], "-o", str(tmp_path)], "is a directory"),
                          (["--vocab-sise", "300"], "did you mean --vocab-size?")]:
        r = subprocess.run([CLI, "tokenizer", "train", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and message in r.stderr, (args, r.stderr)
    assert not os.path.exists(out)
