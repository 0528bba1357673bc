"""Command-R (CohereForCausalLM) and Command R7B / Command A (Cohere2ForCausalLM) against transformers (eager
attention, float32) on tiny random checkpoints: parallel attention and MLP blocks over one mean-centered LayerNorm,
interleaved (GPT-J) RoPE, the logit scale, and for Cohere2 sliding layers beside NoPE global layers; whole prompt,
pieces, token-by-token decode over paged blocks, greedy continuation, ragged batches; and the F32 GGUF `attnzoo
quantize` writes (llama.cpp's command-r / cohere2), loading with the same logits."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320
WINDOW = 8


def _config(kind):
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, layer_norm_eps=1e-5, initializer_range=0.1,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2, logit_scale=0.5,
                  rope_parameters=dict(rope_type="default", rope_theta=500.0))
    if kind == "command_r":
        return transformers.CohereConfig(**common)
    if kind == "command_r_head_dim":  # Cohere reads head_dim from the file (Cohere2 derives it)
        return transformers.CohereConfig(head_dim=24, **common)
    if kind == "cohere2_swa_nope":  # three sliding layers (RoPE), then a global one (NoPE): the released pattern
        return transformers.Cohere2Config(sliding_window=WINDOW, **{**common, "num_hidden_layers": 4})
    raise ValueError(kind)


KINDS = ["command_r", "command_r_head_dim", "cohere2_swa_nope"]


checks.define_family_tests(globals(), _config, KINDS, checks.randomize_vectors(1.0), VOCAB)


def test_inspect_scale_and_errors(case, tmp_path):
    """inspect's layers; the logit scale is applied (a changed one scales the logits by the ratio); Command-R+'s
    per-head q / k norms are refused by name."""
    kind, ref, m, ids, want = case
    kinds = [(x["kind"], x["window"]) for x in m.inspect()["layers"]]
    assert kinds == ([("sliding_attention", WINDOW)] * 3 + [("attention", 0)] if kind.startswith("cohere2")
                     else [("attention", 0)] * 2)
    d = edits.copy_with(m.directory, tmp_path / "scaled", config_edit=lambda c: c.update(logit_scale=1.0))
    np.testing.assert_allclose(Model.load(d).forward(ids), want * 2, atol=2 * checks.ATOL, rtol=0)
    edits.check_config_error_is_named(m.directory, tmp_path / "qk", "use_qk_norm", use_qk_norm=True)


def test_gguf_from_quantize(case, tmp_path):
    kind, ref, m, ids, want = case
    arch = gguf.MODEL_ARCH.COHERE2 if kind.startswith("cohere2") else gguf.MODEL_ARCH.COMMAND_R
    reader = gguf_checks.check_gguf_of_checkpoint(ref, m.directory, str(tmp_path / "c.gguf"), arch, ids, want, VOCAB,
                                                  prefill=30)
    name = gguf.MODEL_ARCH_NAMES[arch]
    assert reader.fields[f"{name}.logit_scale"].contents() == pytest.approx(0.5)
