"""The default model end to end: SmolLM2-135M-Instruct as the Q4_1 GGUF scripts/setup.sh fetches, run by attnzoo
straight from the file (quantized weights, the GGUF's own tokenizer and chat template) against transformers
loading the same GGUF (it dequantizes every tensor to f32). The tokenizer's ids against transformers' GGUF
tokenizer are test_tokenizer_gguf.py's subject, the template's rendering test_chat_template.py's; here they only
have to produce the prompt transformers is run on."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")
pytest.importorskip("accelerate")  # transformers loads GGUF only with it (requirements.txt has both)

from attnzoo.model import Model  # noqa: E402
from test_gguf_reader import SMOLLM2  # noqa: E402

# Quantized files against f32 references at 1e-4 (and token for token): f32 products in every projection
# (conftest.py); the default "auto" is covered by test_gguf_auto_precision.py.
MATMUL_PRECISION = "highest"
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
    return Model.load(SMOLLM2), ref


def _logits(ref, ids):
    with torch.no_grad():
        return ref(torch.tensor([ids])).logits[0].numpy()


def test_logits_match_transformers(models):
    """Prefill (GEMM over dequantized panels) on several prompts, one of 500+ tokens, and decode (the quantized
    GEMV) of the last tokens, each within 1e-3 of the logit scale."""
    m, ref = models
    for text in TEXTS + [LONG]:
        ids = m.tokenizer.encode(text)
        want = _logits(ref, ids)
        scale = np.abs(want).max()
        got = m.forward(ids)
        assert np.abs(got - want).max() <= 1e-3 * scale, text[:40]
        if text is LONG:
            assert len(ids) > 500
            seq = m.new_sequence()
            m.forward(ids[:-4], seq=seq, last_only=True)
            for t in range(len(ids) - 4, len(ids)):
                row = m.forward(ids[t:t + 1], seq=seq)[0]
                assert np.abs(row - want[t]).max() <= 1e-3 * scale, t


def test_chat_template_and_greedy_answer_match_transformers(models):
    """The GGUF's chat template (ChatML with SmolLM's system prompt) gives the prompt, and the 64-token greedy
    answer (run past the end of turn) is transformers' greedy generate on it, token for token."""
    m, ref = models
    text = m.apply_chat_template(QUESTION, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert text.endswith("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n")
    prompt = m.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=True)
    with torch.no_grad():
        out = ref.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                           max_new_tokens=64, do_sample=False, eos_token_id=None, pad_token_id=2)
    want = out[0, len(prompt):].tolist()
    assert len(want) == 64
    got = m.generate(prompt, max_new_tokens=64, eos_token_id=[])
    assert got == want
    # Model.chat stops at the template's end of turn (<|im_end|>, the GGUF's EOS) and returns the text.
    end_of_turn = m.tokenizer.token_to_id("<|im_end|>")
    assert end_of_turn in want
    reply = m.chat(QUESTION, max_new_tokens=64)
    assert reply == m.tokenizer.decode(want[:want.index(end_of_turn)], skip_special_tokens=True)
    assert "Paris" in reply


def test_inspect_counts_stored_sizes(models):
    """Parameters and bytes as the file stores them (quantized blocks, not the f32 they decode to)."""
    import gguf
    tensors = gguf.GGUFReader(SMOLLM2).tensors
    info = models[0].inspect()
    assert info["parameter_count"] == sum(int(t.n_elements) for t in tensors) == 134515008
    assert info["checkpoint_bytes"] == sum(int(t.n_bytes) for t in tensors)
    assert info["checkpoint_dtype"] == "GGUF Q4_1 x210 F32 x61 Q8_0 x1"


def test_cli_runs_the_default_model(models):
    """`attnzoo generate --chat` without -m runs this file (the default model) and streams the answer Model.chat
    gives, which the test above ties to transformers; -m takes the file and its directory too."""
    import subprocess
    cli = os.environ.get("ATTNZOO_CLI", os.path.join(os.path.dirname(os.path.dirname(SMOLLM2)), "build", "attnzoo"))
    want = models[0].chat(QUESTION, max_new_tokens=24) + "\n"
    for model_args in ([], ["-m", SMOLLM2], ["-m", os.path.dirname(SMOLLM2)]):
        r = subprocess.run([cli, "generate", *model_args, "--chat", "-p", QUESTION[0]["content"], "-n", "24",
                            "--matmul-precision", MATMUL_PRECISION], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout == want and "stop: eos" in r.stderr
