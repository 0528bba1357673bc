"""The default model end to end: SmolLM2-135M-Instruct as the Q4_1 GGUF scripts/setup.sh fetches, run by attnzoo
straight from the file (quantized weights, the GGUF's own tokenizer and chat template) against transformers
loading the same GGUF (it dequantizes every tensor to f32 and builds its tokenizer from the same metadata)."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")
pytest.importorskip("accelerate")  # transformers loads GGUF only with it (requirements.txt has both)

from attnzoo.model import Model  # noqa: E402
from test_gguf_reader import SMOLLM2  # noqa: E402

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
TEXTS = ["The quick brown fox jumps over the lazy dog.",
         "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
         "Paris est la capitale de la France; Berlin, celle de l'Allemagne. 東京は日本の首都です。"]
# 500+ tokens: long enough that prefill runs many GEMM panels and the KV cache spans several blocks.
LONG = " ".join(f"Paragraph {i}: the river runs past {i * 7 % 13} mills, and the miller counts {i * 31 % 97} sacks "
                f"of grain before the sun sets over the hills." for i in range(24))


@pytest.fixture(scope="module")
def models():
    assert os.path.exists(SMOLLM2), f"{SMOLLM2} is missing: run scripts/setup.sh"
    directory, name = os.path.split(SMOLLM2)
    ref = transformers.AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32).eval()
    ref_tok = transformers.AutoTokenizer.from_pretrained(directory, gguf_file=name)
    return Model.load(SMOLLM2), ref, ref_tok


def _logits(ref, ids):
    with torch.no_grad():
        return ref(torch.tensor([ids])).logits[0].numpy()


def test_tokenizer_matches_transformers(models):
    m, _, ref_tok = models
    for text in TEXTS + [LONG]:
        assert m.tokenizer.encode(text) == ref_tok(text)["input_ids"], text[:40]
        ids = ref_tok(text)["input_ids"]
        assert m.tokenizer.decode(ids, skip_special_tokens=True) == ref_tok.decode(ids, skip_special_tokens=True)


def test_logits_match_transformers(models):
    """Prefill (GEMM over dequantized panels) on several prompts, one of 500+ tokens, and decode (the quantized
    GEMV) of the last tokens, each within 1e-3 of the logit scale."""
    m, ref, ref_tok = models
    for text in TEXTS + [LONG]:
        ids = ref_tok(text)["input_ids"]
        want = _logits(ref, ids)
        scale = np.abs(want).max()
        got = m.forward(ids)
        assert np.abs(got - want).max() <= 1e-3 * scale, text[:40]
        if len(ids) > 500:
            seq = m.new_sequence()
            m.forward(ids[:-4], seq=seq, last_only=True)
            for t in range(len(ids) - 4, len(ids)):
                row = m.forward(ids[t:t + 1], seq=seq)[0]
                assert np.abs(row - want[t]).max() <= 1e-3 * scale, t


def test_chat_template_and_greedy_answer_match_transformers(models):
    """The GGUF's chat template renders the conversation as transformers renders it, and the 64-token greedy
    answer is transformers' greedy generate on the same prompt, token for token."""
    m, ref, ref_tok = models
    want_text = ref_tok.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=False)
    assert m.apply_chat_template(QUESTION, add_generation_prompt=True) == want_text
    prompt = m.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=True)
    assert prompt == ref_tok(want_text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        out = ref.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                           max_new_tokens=64, do_sample=False, eos_token_id=None, pad_token_id=ref_tok.eos_token_id)
    want = out[0, len(prompt):].tolist()
    got = m.generate(prompt, max_new_tokens=64, eos_token_id=[])
    assert got == want
    assert "Paris" in ref_tok.decode(want)
    # Model.chat stops at the template's end of turn (<|im_end|>, the GGUF's EOS) and returns the text.
    reply = m.chat(QUESTION, max_new_tokens=64)
    end = want.index(m.tokenizer.token_to_id("<|im_end|>")) if 2 in want else len(want)
    assert reply == ref_tok.decode(want[:end], skip_special_tokens=True)


def test_inspect_counts_stored_sizes(models):
    m = models[0]
    info = m.inspect()
    assert info["parameter_count"] == 134515008  # SmolLM2-135M, tied embedding counted once
    assert info["checkpoint_bytes"] < 0.75 * os.path.getsize(SMOLLM2) * 1.34  # Q4_1 bytes, not f32's
