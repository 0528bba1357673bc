"""A `llama` (SentencePiece-style BPE) GGUF vocabulary against the Hugging Face `tokenizers` tokenizer a Llama 2
checkpoint ships: tokenizer.json as transformers' LlamaConverter builds it from the SentencePiece model (BPE with
byte fallback over the vocabulary, merges = every split of a piece into two pieces, ordered by the piece's score,
normalizer Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, BOS template), built here with `tokenizers`
alone; the GGUF holds what llama.cpp's converter writes from the same SentencePiece model (tokens, scores, token
types, model "llama"). Ids must be identical on the multilingual corpus."""
import pytest

tokenizers = pytest.importorskip("tokenizers")
gguf = pytest.importorskip("gguf")
from tokenizers import AddedToken, decoders, models, normalizers, processors  # noqa: E402

from test_tokenizer_gguf import USER_DEFINED, assert_same_ids, corpus, spm_vocabulary, write_spm_gguf  # noqa: E402,F401
from attnzoo.tokenizer import Tokenizer  # noqa: E402


def llama2_tokenizer(tokens, scores, types, add_space_prefix=True):
    """transformers' SentencePieceExtractor + LlamaConverter (legacy Llama 2 tokenizer.json), restated;
    add_space_prefix=False: the SentencePiece model's add_dummy_prefix off (no Prepend, no Strip)."""
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for piece, score in zip(tokens, scores):
        local = [(piece[:k], piece[k:], score) for k in range(1, len(piece))
                 if piece[:k] in vocab and piece[k:] in vocab]
        merges.extend(sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]])))
    merges = [(a, b) for a, b, _ in sorted(merges, key=lambda m: m[2], reverse=True)]
    tok = tokenizers.Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    prepend = [normalizers.Prepend("▁")] if add_space_prefix else []
    tok.normalizer = normalizers.Sequence(prepend + [normalizers.Replace(" ", "▁")])
    strip = [decoders.Strip(" ", 1, 0)] if add_space_prefix else []
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()] + strip)
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in ("<unk>", "<s>", "</s>")])
    tok.add_tokens([AddedToken(t, normalized=False, special=False)
                    for t, ty in zip(tokens, types) if ty == USER_DEFINED])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return tok


@pytest.fixture(scope="module")
def llama2(tmp_path_factory, corpus):  # noqa: F811
    tokens, scores, types, _ = spm_vocabulary(corpus[::25])
    path = tmp_path_factory.mktemp("llama2") / "llama2.gguf"
    write_spm_gguf(path, tokens, scores, types, add_bos=True)
    return Tokenizer.load(str(path)), llama2_tokenizer(tokens, scores, types), (tokens, scores, types)


def test_ids_match_the_llama2_tokenizer(llama2, corpus):  # noqa: F811
    ours, hf, _ = llama2
    assert_same_ids(ours, hf, corpus[1::3])
    assert_same_ids(ours, hf, corpus[2::7], add_special_tokens=False)


TEXTS = ["hello", " hello", "  two leading", "trailing  ", "a\tb\nc", "", " ", "<s>x</s> <tool>y", "x<s> y",
         "日本語 😀 ¿qué?", "\u00a0nbsp", "▁literal"]


def test_spaces_and_specials(llama2):
    ours, hf, _ = llama2
    assert_same_ids(ours, hf, TEXTS)
    for t in TEXTS[:5] + TEXTS[9:]:
        ids = hf.encode(t, add_special_tokens=False).ids
        assert ours.decode(ids) == hf.decode(ids), t


def test_without_the_space_prefix(llama2, corpus, tmp_path):  # noqa: F811
    """tokenizer.ggml.add_space_prefix = false (a SentencePiece model without add_dummy_prefix)."""
    _, _, (tokens, scores, types) = llama2
    path = tmp_path / "bare.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_space_prefix(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ours, hf = Tokenizer.load(str(path)), llama2_tokenizer(tokens, scores, types, add_space_prefix=False)
    assert_same_ids(ours, hf, TEXTS + corpus[5::40])
    ids = hf.encode(" a b", add_special_tokens=False).ids
    assert ours.decode(ids) == hf.decode(ids) == " a b"
