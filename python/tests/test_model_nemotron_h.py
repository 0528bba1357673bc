"""Nemotron-H (NemotronHForCausalLM: one sublayer per layer as hybrid_override_pattern / layers_block_type says:
Mamba-2 with a grouped gated RMSNorm, attention without RoPE, or an ungated relu2 MLP) against transformers
(eager attention, float32) on tiny random checkpoints: whole prompt, pieces, token-by-token decode over paged
blocks, greedy continuation, ragged batches; the pattern string of published configs; inspect; errors."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320
PATTERN = "-M*-M"


def _config(kind):
    """A leading MLP layer, two SSM groups, biases, no conv bias; tie_word_embeddings, which transformers' class
    ignores (its lm_head stays its own)."""
    assert kind == "biased_grouped"
    return transformers.NemotronHConfig(hybrid_override_pattern=PATTERN, vocab_size=VOCAB, hidden_size=64,
                                        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                        intermediate_size=96, mamba_num_heads=8, mamba_head_dim=16, n_groups=2,
                                        ssm_state_size=16, conv_kernel=4, chunk_size=16, use_bias=True,
                                        mlp_bias=True, use_conv_bias=False, tie_word_embeddings=True,
                                        layer_norm_epsilon=1e-5, initializer_range=0.1, max_position_embeddings=256)


def _randomize(model):
    for name, p in model.named_parameters():
        if name.endswith("A_log"):
            p.copy_(torch.log(torch.rand_like(p) * 2 + 0.2))  # decays exp(-A dt) spread over (0, 1)
        elif p.ndim == 1:  # norm weights near 1, D / dt_bias / biases near 0: all exercised
            p.copy_((1.0 if "norm" in name else 0.0) + 0.3 * torch.randn_like(p))


checks.define_family_tests(globals(), _config, ["biased_grouped"], _randomize, VOCAB)


def test_inspect_lists_each_layer_kind(case):
    kind, ref, m, ids, want = case
    info = m.inspect()
    kinds = {"M": "mamba2", "*": "attention", "-": "mlp"}
    assert [x["kind"] for x in info["layers"]] == [kinds[c] for c in PATTERN]
    assert info["parameter_count"] == sum(p.numel() for p in ref.parameters())
    assert not info["tied_embeddings"]


def test_pattern_string_reads_as_the_list(case, tmp_path):
    """Published configs carry hybrid_override_pattern (transformers saves layers_block_type): the same model."""
    kind, ref, m, ids, want = case

    def edit(cfg):
        del cfg["layers_block_type"]
        cfg["hybrid_override_pattern"] = PATTERN
    checks.copy_with(m.directory, str(tmp_path), config_edit=edit)
    np.testing.assert_allclose(Model.load(str(tmp_path)).forward(ids), want, atol=checks.ATOL, rtol=0)


def test_bad_patterns_are_named(case, tmp_path):
    kind, ref, m, ids, want = case
    checks.check_config_error_is_named(m.directory, str(tmp_path / "a"), "hybrid_override_pattern.*'X'",
                                       hybrid_override_pattern="M*X-M")
    checks.check_config_error_is_named(m.directory, str(tmp_path / "b"), "MoE layer",
                                       layers_block_type=["mamba", "moe"])
    checks.check_missing_tensors_are_named(m.directory, tmp_path / "c", ["backbone.layers.0.mixer.up_proj.weight"])
