"""The default matmul precision "auto" on block-quantized GGUF files: llama.cpp's arithmetic (8-bit activations in
decode GEMVs and, where the VNNI rows run without AMX, in prompts; bf16 panels in other prompts on AVX-512-BF16)
rather than f32 products, so the logits move by about the activations' rounding and no more. The other GGUF
modules pin "highest" to compare at 1e-4; this one states the default's own bounds (measured on SmolLM2-135M Q4_1:
prefill on the bf16 panels within 1.1-1.8% of the logit scale, on the integer rows and in decode 1.5-5.1%, the
same top token at 90-100% of positions, perplexity +0.4%)."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

import attnzoo  # noqa: E402
import model_checks as checks  # noqa: E402
from conftest import matmul_precision  # noqa: E402
from attnzoo.model import Model  # noqa: E402
from test_gguf_reader import SMOLLM2  # noqa: E402
from test_gguf_smollm2 import LONG, TEXTS  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(SMOLLM2), reason=f"{SMOLLM2} is missing: run scripts/setup.sh")


@pytest.fixture(scope="module")
def smollm2():
    directory, name = os.path.split(SMOLLM2)
    ref = transformers.AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32).eval()
    # no prefix cache: a hit would reuse blocks computed under the other precision
    return Model.load(SMOLLM2, enable_prefix_caching=False), ref


def test_default_is_auto():
    assert attnzoo.get_float32_matmul_precision() == "auto"


@pytest.mark.parametrize("prompt_int8", ["off", "on"])
def test_smollm2_logits_stay_within_the_activation_rounding(smollm2, prompt_int8):
    """Prompts on the panels ("off") or on the integer rows ("on", what "auto" picks on VNNI CPUs without AMX).
    The integer rows' prompts carry decode's rounding (each token's sums are a lone decode's) and their bound is
    the largest over every position of the prompt, where decode's is over 4; decode after such a prompt reads a
    cache that carries it too. Both 8% (measured up to 6.1% and 7.6%, on the fibonacci text, against 6% for decode
    after a prompt on the panels); the greedy choice still matches at >= 98% of LONG's positions."""
    m, ref = smollm2
    saved = attnzoo._core.linear_prompt_int8()
    attnzoo._core.set_linear_prompt_int8(prompt_int8)
    try:
        for text in TEXTS + [LONG]:
            ids = m.tokenizer.encode(text)
            with torch.no_grad():
                want = ref(torch.tensor([ids])).logits[0].numpy()
            scale = np.abs(want).max()
            got = m.forward(ids)
            seq = m.new_sequence()
            m.forward(ids[:-4], seq=seq, last_only=True)
            decode = np.stack([m.forward(ids[t:t + 1], seq=seq)[0] for t in range(len(ids) - 4, len(ids))])
            assert np.abs(got - want).max() <= (3e-2 if prompt_int8 == "off" else 8e-2) * scale, text[:40]
            assert np.abs(decode - want[-4:]).max() <= (6e-2 if prompt_int8 == "off" else 8e-2) * scale, text[:40]
            assert 0 < np.abs(decode - want[-4:]).max(), "8-bit activations did not run"
            if text is LONG:  # 785 positions: the greedy choice almost everywhere the f32 path's
                assert (got.argmax(-1) == want.argmax(-1)).mean() >= 0.98
    finally:
        attnzoo._core.set_linear_prompt_int8(saved)


def test_smollm2_perplexity_moves_less_than_a_percent(smollm2):
    m = smollm2[0]
    text = " ".join(TEXTS * 4) + " " + LONG
    fast = m.perplexity(text, n_ctx=128).ppl
    with matmul_precision("highest"):
        exact = m.perplexity(text, n_ctx=128).ppl
    # Perplexity runs prefill only: its products are bf16 panels where the CPU has AVX-512-BF16, and f32, the
    # same as "highest", where it has not (an AVX2 or plain AVX-512 machine): then the figures are equal.
    if m.formats["prefill_products"] == "f32":
        assert fast == exact, (fast, exact)
    else:
        assert fast != exact and abs(fast / exact - 1) < 1e-2, (fast, exact)


def test_tiny_q4_0_model_tracks_highest(tmp_path):
    """A random Q4_0 llama (test_gguf_model's writer): "auto" against "highest" on the same file, prefill and
    token-by-token decode, within the bound of the bf16 tests; "medium" gives what "auto" gives on block weights."""
    from test_gguf_model import VOCAB, _build
    _, path = _build("llama", "q4_0", str(tmp_path))
    m = Model.load(path, enable_prefix_caching=False)
    ids = checks.prompt(VOCAB, 24)
    with matmul_precision("highest"):
        exact = m.forward(ids)
    rows = []
    for precision in ("auto", "medium"):
        with matmul_precision(precision):
            seq = m.new_sequence()
            rows.append(np.concatenate([m.forward(ids[:16], seq=seq)] + [m.forward(ids[t:t + 1], seq=seq)
                                                                         for t in range(16, 24)]))
    np.testing.assert_array_equal(rows[0], rows[1])
    rel = np.sqrt(((rows[0] - exact) ** 2).sum() / (exact ** 2).sum())
    assert 0 < rel <= 3e-2, rel
