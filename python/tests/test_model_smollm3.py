"""SmolLM3 (SmolLM3ForCausalLM: Llama's block with every 4th layer a NoPE layer, q and k not rotated; GQA, tied
head) against transformers (eager attention, float32) on a tiny random checkpoint: whole prompt, pieces,
token-by-token decode over paged blocks, greedy continuation, ragged batches; an explicit no_rope_layers list;
and the F32 GGUF `attnzoo quantize` writes for it (llama.cpp's smollm3: names as the gguf package maps them, Q / K
rows permuted as its converter's LlamaModel does), loading with the same logits."""
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
HEADS, KV_HEADS = 4, 2


def _config(kind):
    assert kind == "nope_every_4th"
    return transformers.SmolLM3Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                      num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                                      max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.1,
                                      pad_token_id=0, rope_parameters=dict(rope_type="default", rope_theta=500.0))


def _randomize(model):
    assert model.config.no_rope_layers == [1, 1, 1, 0]
    checks.randomize_vectors(1.0)(model)


checks.define_family_tests(globals(), _config, ["nope_every_4th"], _randomize, VOCAB)


def test_nope_layers_follow_the_config(case, tmp_path):
    """An explicit no_rope_layers list is obeyed: making layer 3 rotate too moves the logits, and transformers
    agrees on the edited checkpoint; a list of the wrong length is refused by name."""
    kind, ref, m, ids, want = case
    d = edits.copy_with(m.directory, tmp_path / "all_rope", config_edit=lambda c: c.update(no_rope_layers=[1] * 4))
    other = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    got = Model.load(d).forward(ids)
    np.testing.assert_allclose(got, checks.reference_logits(other.eval(), ids), atol=checks.ATOL, rtol=0)
    assert np.abs(got - want).max() > 1e-2
    edits.check_config_error_is_named(m.directory, tmp_path / "bad", "no_rope_layers", no_rope_layers=[1, 0])


def _permute(w, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's two rotary halves interleaved."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_gguf_from_quantize(case, tmp_path):
    kind, ref, m, ids, want = case
    gguf_checks.check_gguf_of_checkpoint(ref, m.directory, str(tmp_path / "s.gguf"), gguf.MODEL_ARCH.SMOLLM3, ids, want,
                                         VOCAB, prefill=30, edits=(("q_proj.weight", lambda w: _permute(w, HEADS)),
                                                              ("k_proj.weight", lambda w: _permute(w, KV_HEADS))))
    # llama.cpp has no key for another NoPE pattern: such a checkpoint is refused, not written wrongly
    d = edits.copy_with(m.directory, tmp_path / "odd", config_edit=lambda c: c.update(no_rope_layers=[1, 0, 1, 1]))
    import attnzoo
    with pytest.raises(ValueError, match="no_rope_layers"):
        attnzoo.quantize(d, tmp_path / "odd.gguf", type="F32")
