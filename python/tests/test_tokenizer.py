"""Parity of attnzoo.tokenizer with Hugging Face `tokenizers`: small byte-level BPE tokenizers are trained per
pre-tokenizer regex (GPT-2, Llama-3, Qwen2), saved as tokenizer.json, loaded natively, and must give the same ids
and the same decoded text on a mixed corpus; plus legacy merges, byte fallback, ignore_merges, streaming decode
and malformed files."""
import json
import random
import unicodedata

import pytest

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

from attnzoo.tokenizer import Tokenizer  # noqa: E402

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
          r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
         r"""\s*[\r\n]+|\s+(?!\S)|\s+""")

ENGLISH = ["The quick brown fox jumps over the lazy dog.", "I'm sure they'll say we've DONE IT, isn't it?",
           "WE'LL SEE; YOU'RE RIGHT. He'd've known.", "Hello, world!  Multiple   spaces\tand\ttabs.",
           "Line one\nLine two\r\nLine three\n\n\nend"]
CODE = ["def f(x):\n    return x ** 2 + 1  # square\n", "for (int i = 0; i < n; ++i) { a[i] += b[i]; }",
        "if __name__ == '__main__':\n\tmain()\n", "<div class=\"x\">&amp;</div>", "x=[1,2,3];y={'a':1}"]
NUMBERS = ["1234567890", "3.14159 2.71828 1e-10", "The year 2024 had 366 days.", "0000000000000000001",
           "١٢٣ ٤٥٦ (Arabic-Indic) ۱۲۳ ①②③ Ⅻ"]
CJK = ["日本語のテキストです。", "中文字符测试，标点符号！", "한국어 텍스트 테스트", "混合mixed文本text"]
ARABIC = ["مرحبا بالعالم", "السَّلَامُ عَلَيْكُمْ", "עברית טקסט"]
EMOJI = ["😀🎉👍🏽", "👨‍👩‍👧‍👦 family", "🇫🇷🇯🇵 flags", "❤️ ✨ ☃"]
COMBINING = ["e\u0301 cafe\u0301 na\u0308ive", "a\u0323\u0302 q\u0307\u0323", "\u1100\u1161\u11a8 한",
             "Å Ω K fi ½ x²", "\u0301 leading mark", "ẞ ſ 'ſ İstanbul"]
SPACES = ["\u00a0nbsp\u00a0", "\u3000ideographic\u3000", "line\u2028sep", "mongolian\u180evowel", "\u200bzero width",
          " leading", "trailing ", "   ", "\n", ""]


def corpus(seed=0, n=300):
    pools = ENGLISH + CODE + NUMBERS + CJK + ARABIC + EMOJI + COMBINING + SPACES
    rng = random.Random(seed)
    out = list(pools)
    while len(out) < n:
        k = rng.randint(1, 4)
        out.append(rng.choice(["", " ", "\n", "  "]).join(rng.choice(pools) for _ in range(k)))
    return out


LONG = [" " * 10000, "a" * 5000, "1" * 3000, "ab" * 2000, "\n" * 1000 + "x", "😀" * 500, "x " * 3000]
SPECIALS = ["<s>", "</s>", "<|im_start|>", "<|eot_id|>"]


def train(pattern, normalizer=True, vocab_size=600, specials=("<s>", "</s>")):
    tok = tokenizers.Tokenizer(models.BPE())
    if normalizer:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(pattern), "isolated"),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(1, 400) * 2, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{specials[0]} $A", special_tokens=[(specials[0], tok.token_to_id(specials[0]))])
    return tok


def texts():
    base = corpus(7, 300)
    with_specials = [f"{a}{s}{b}" for a, s, b in zip(base[:40], SPECIALS * 10, base[40:80])]
    return base + with_specials + LONG


def check_parity(hf, ours, strings, normalized_roundtrip=True, roundtrip=True):
    for s in strings:
        for add in (True, False):
            want = hf.encode(s, add_special_tokens=add).ids
            got = ours.encode(s, add_special_tokens=add)
            assert got == want, (s[:80], add)
        ids = hf.encode(s, add_special_tokens=False).ids
        for skip in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip), s[:80]
        expect = unicodedata.normalize("NFC", s) if normalized_roundtrip else s
        assert not roundtrip or ours.decode(ours.encode(s, add_special_tokens=False)) == expect


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = {}
    for name, pattern in (("gpt2", GPT2), ("llama3", LLAMA3), ("qwen2", QWEN2)):
        hf = train(pattern, normalizer=name != "llama3")
        path = tmp_path_factory.mktemp(name) / "tokenizer.json"
        hf.save(str(path))
        out[name] = (hf, path)
    return out


@pytest.mark.parametrize("name", ["gpt2", "llama3", "qwen2"])
def test_parity_trained(trained, name):
    hf, path = trained[name]
    ours = Tokenizer.load(path)
    assert ours.vocab_size == hf.get_vocab_size(with_added_tokens=True)
    check_parity(hf, ours, texts(), normalized_roundtrip=name != "llama3")


def test_load_from_directory_and_eos(trained, tmp_path):
    hf, path = trained["qwen2"]
    (tmp_path / "tokenizer.json").write_text(path.read_text())
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 0]}))
    ours = Tokenizer.load(tmp_path)
    assert ours.eos_token_ids == [1, 0]
    assert ours.encode("hello") == hf.encode("hello").ids
    assert Tokenizer.load(path).eos_token_ids == []


def test_vocab_lookups(trained):
    hf, path = trained["gpt2"]
    ours = Tokenizer.load(path)
    for token, i in list(hf.get_vocab(with_added_tokens=True).items())[:200]:
        assert ours.token_to_id(token) == i
        assert ours.id_to_token(i) == token
    assert ours.token_to_id("definitely not a token") is None
    assert ours.id_to_token(10**6) is None
    assert ours.is_special(hf.token_to_id("<s>"))


def rewrite(path, tmp_path, edit, name="tokenizer.json"):
    data = json.loads(path.read_text())
    edit(data)
    out = tmp_path / name
    out.write_text(json.dumps(data, ensure_ascii=False))
    return out


def test_legacy_merges_and_ignore_merges(trained, tmp_path):
    _, path = trained["llama3"]

    def legacy(d):
        d["model"]["merges"] = [" ".join(m) for m in d["model"]["merges"]]

    p = rewrite(path, tmp_path, legacy)
    hf = tokenizers.Tokenizer.from_file(str(p))
    assert isinstance(json.loads(p.read_text())["model"]["merges"][0], str)
    check_parity(hf, Tokenizer.load(p), texts()[:150], normalized_roundtrip=False)

    def ignore(d):
        d["model"]["ignore_merges"] = True

    p = rewrite(path, tmp_path, ignore, "ignore.json")
    hf = tokenizers.Tokenizer.from_file(str(p))
    check_parity(hf, Tokenizer.load(p), texts()[:150], normalized_roundtrip=False)


def test_added_token_options(trained, tmp_path):
    _, path = trained["qwen2"]
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.add_special_tokens([tokenizers.AddedToken("<|im_start|>", special=True, normalized=False),
                           tokenizers.AddedToken("<|im_end|>", special=True, lstrip=True, rstrip=True)])
    hf.add_tokens([tokenizers.AddedToken("mask", single_word=True), tokenizers.AddedToken("é", normalized=True),
                   tokenizers.AddedToken("<im", special=False)])
    p = tmp_path / "added.json"
    hf.save(str(p))
    ours = Tokenizer.load(p)
    cases = ["<|im_start|>user\nhi <|im_end|> \n<|im_start|>", "mask masks unmask mask, (mask)", "cafe\u0301 é",
             "<im<|im_start|>", "  <|im_end|>  <|im_end|>"] + texts()[:80]
    check_parity(hf, ours, cases, roundtrip=False)  # lstrip/rstrip swallow spaces by design


def byte_fallback_tokenizer(tmp_path):
    tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False,
                                  limit_alphabet=60)
    tok.train_from_iterator([s for s in corpus(3, 200) if s.isascii()] * 3, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    p = tmp_path / "bf.json"
    tok.save(str(p))
    data = json.loads(p.read_text())
    vocab = data["model"]["vocab"]
    n = len(vocab)
    for b in range(256):  # only bytes 0..127 get fallback tokens: others must become <unk>
        if b < 128:
            vocab[f"<0x{b:02X}>"] = n + b
    p.write_text(json.dumps(data, ensure_ascii=False))
    return tokenizers.Tokenizer.from_file(str(p)), p


def test_byte_fallback(tmp_path):
    hf, p = byte_fallback_tokenizer(tmp_path)
    ours = Tokenizer.load(p)
    strings = texts()[:200] + ["\x00\x01 ctrl", "é", "日本", "mix 😀 end"]
    for s in strings:
        assert ours.encode(s) == hf.encode(s).ids, s[:60]
        ids = hf.encode(s, add_special_tokens=False).ids
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False), s[:60]
    # Invalid byte runs: one U+FFFD per byte, as the reference's ByteFallback decoder does.
    b = [ours.token_to_id(f"<0x{x:02X}>") for x in (0x41, 0x7F, 0x42)]
    assert ours.decode(b) == hf.decode(b, skip_special_tokens=False)


def test_decode_arbitrary_ids(trained):
    """Random id sequences decode to byte strings that are often invalid UTF-8: lossy replacement must match."""
    rng = random.Random(5)
    for name in ("gpt2", "qwen2"):
        hf, path = trained[name]
        ours = Tokenizer.load(path)
        n = hf.get_vocab_size(with_added_tokens=True)
        for _ in range(300):
            ids = [rng.randrange(n + 5) for _ in range(rng.randint(0, 12))]
            assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False), ids
            raw = ours.decode_bytes(ids)
            assert raw.decode("utf-8", "replace") == ours.decode(ids)


def test_stream_decoder(trained):
    hf, path = trained["gpt2"]
    ours = Tokenizer.load(path)
    for s in texts()[:120] + ["😀🎉 日本語 é"]:
        ids = ours.encode(s, add_special_tokens=False)
        stream = ours.stream()
        parts = [stream.push(i) for i in ids]
        parts.append(stream.finish())
        assert "".join(parts) == ours.decode(ids)
        assert all("\ufffd" not in p for p in parts)
    # A character cut short by the end of the stream comes out as U+FFFD only at finish().
    emoji = ours.encode("😀", add_special_tokens=False)
    if len(emoji) > 1:
        stream = ours.stream()
        assert stream.push(emoji[0]) == ""
        assert stream.finish() == "\ufffd"


def test_bad_arguments(trained):
    _, path = trained["gpt2"]
    ours = Tokenizer.load(path)
    with pytest.raises(TypeError, match="text"):
        ours.encode(b"bytes")
    with pytest.raises(ValueError, match="surrogate"):
        ours.encode("a\ud800b")
    with pytest.raises(ValueError, match=r"ids\[1\]"):
        ours.decode([1, -3])
    with pytest.raises(TypeError, match=r"ids\[0\]"):
        ours.decode(["x"])
    assert ours.decode([10**12]) == ""


MALFORMED = [
    (lambda d: d.pop("model"), "model: missing"),
    (lambda d: d["model"].update(type="WordPiece"), "model.type"),
    (lambda d: d["model"].update(vocab=[1, 2]), "model.vocab"),
    (lambda d: d["model"]["vocab"].update(bad="seven"), "model.vocab.bad"),
    (lambda d: d["model"]["merges"].__setitem__(3, ["zzz_unknown", "q"]), r"model.merges\[3\]"),
    (lambda d: d["model"]["merges"].__setitem__(2, 17), r"model.merges\[2\]"),
    (lambda d: d["model"]["merges"].__setitem__(2, "nospace"), r"model.merges\[2\]"),
    (lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": "(unclosed"}),
     r"pre_tokenizer.pretokenizers\[0\].pattern.Regex"),
    (lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(behavior="Sideways"), "behavior"),
    (lambda d: d.update(normalizer={"type": "Precompiled"}), "normalizer.type"),
    (lambda d: d.update(decoder={"type": "Strip"}), "decoder.content"),
    (lambda d: d["added_tokens"][0].update(id=-1), r"added_tokens\[0\].id"),
    (lambda d: d["added_tokens"][0].pop("content"), r"added_tokens\[0\].content"),
    (lambda d: d["post_processor"].update(single=[{"SpecialToken": {"id": "nope", "type_id": 0}}]),
     r"post_processor.single\[0\]"),
]


@pytest.mark.parametrize("edit,field", MALFORMED)
def test_malformed_files(trained, tmp_path, edit, field):
    _, path = trained["gpt2"]
    p = rewrite(path, tmp_path, edit, "broken.json")
    with pytest.raises(ValueError, match="broken.json") as err:
        Tokenizer.load(p)
    assert err.match(field)


def test_unreadable_files(tmp_path):
    with pytest.raises(ValueError, match="tokenizer.json"):
        Tokenizer.load(tmp_path)  # directory without tokenizer.json
    bad = tmp_path / "t.json"
    for text in ("{", "[]", "", '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "a"]]}}'):
        bad.write_text(text)
        with pytest.raises(ValueError, match="t.json"):
            Tokenizer.load(bad)


VARIANTS = {
    "bytelevel_regex_prefix_digits": (
        lambda: pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                         pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)]),
        lambda: decoders.ByteLevel(), True),
    "metaspace_first": (
        lambda: pre_tokenizers.Metaspace(prepend_scheme="first"),
        lambda: decoders.Metaspace(prepend_scheme="first"), False),
    "whitespace_split_digits": (
        lambda: pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Digits()]),
        lambda: None, False),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_other_pre_tokenizers(name, tmp_path):
    pre, dec, byte_level = VARIANTS[name]
    tok = tokenizers.Tokenizer(models.BPE(unk_token=None if byte_level else "<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre()
    if dec() is not None:
        tok.decoder = dec()
    alphabet = pre_tokenizers.ByteLevel.alphabet() if byte_level else []
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>"], show_progress=False,
                                  initial_alphabet=alphabet)
    tok.train_from_iterator(corpus(2, 300), trainer)
    p = tmp_path / "t.json"
    tok.save(str(p))
    ours = Tokenizer.load(p)
    for s in texts()[:250]:
        assert ours.encode(s) == tok.encode(s).ids, s[:60]
        ids = tok.encode(s).ids
        assert ours.decode(ids) == tok.decode(ids, skip_special_tokens=False), s[:60]
