"""Mamba2ForCausalLM against transformers' pure-torch path (float32) on tiny random checkpoints: whole prompt,
the prompt fed in pieces (states carried through the cache), token-by-token decode, greedy continuation, ragged
batches, the per-layer state size `inspect` reports, and load errors."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160
PIECES = [1, 17, 64, 100]  # decode-sized, recurrent-sized and chunk-scan-sized pieces
PROMPT_LEN = sum(PIECES)


def _config(kind):
    common = dict(vocab_size=VOCAB, num_hidden_layers=2, layer_norm_epsilon=1e-5, chunk_size=32)
    if kind == "g1_conv4":
        return transformers.Mamba2Config(hidden_size=32, num_heads=4, head_dim=16, state_size=8, n_groups=1,
                                         conv_kernel=4, **common)
    if kind == "g2_conv2_bias_tied":
        return transformers.Mamba2Config(hidden_size=32, num_heads=8, head_dim=8, state_size=16, n_groups=2,
                                         conv_kernel=2, use_bias=True, tie_word_embeddings=True, **common)
    if kind == "g2_conv3_nobias":
        return transformers.Mamba2Config(hidden_size=48, num_heads=6, head_dim=16, state_size=12, n_groups=2,
                                         conv_kernel=3, use_conv_bias=False, **common)
    raise ValueError(kind)


KINDS = ["g1_conv4", "g2_conv2_bias_tied", "g2_conv3_nobias"]


checks.define_family_tests(globals(), _config, KINDS, checks.randomize_ssm, VOCAB, PROMPT_LEN, (PIECES, PIECES[::-1]),
                           prefill=20, stop=60, pad_token_id=VOCAB + 1, block_size=16, attn_implementation=None)


def test_inspect_reports_the_fixed_state(case):
    kind, ref, m, ids, want = case
    cfg = m.config
    inner = cfg["num_heads"] * cfg["head_dim"]
    conv_dim = inner + 2 * cfg["n_groups"] * cfg["state_size"]
    per_layer = 4 * (conv_dim * (cfg["conv_kernel"] - 1) + inner * cfg["state_size"])
    info = checks.check_fixed_state_only(m, ids, ["mamba2", "mamba2"], per_layer)
    assert info["tied_embeddings"] == (kind == "g2_conv2_bias_tied")


def test_time_step_limit_clamps_dt(tmp_path):
    cfg = _config("g1_conv4")
    cfg.time_step_limit = (0.05, 0.4)
    torch.manual_seed(3)
    ref = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    ref.save_pretrained(tmp_path, safe_serialization=True)
    ids = _prompt(40)
    want = checks.reference_logits(ref, ids)
    np.testing.assert_allclose(Model.load(tmp_path).forward(ids), want, atol=1e-4, rtol=0)


def test_load_errors_name_the_problem(case, tmp_path):
    kind, ref, m, ids, want = case
    if kind != "g1_conv4":
        pytest.skip("one checkpoint is enough")
    src = m.directory
    name = "backbone.layers.1.mixer.conv1d.weight"
    edits.check_missing_tensors_are_named(src, tmp_path, [name])
    d = edits.copy_with(src, tmp_path / "b", tensors_edit=lambda t: t.update({name: t[name][:, :, :-1].copy()}))
    edits.expect_load_error(d, r"conv1d\.weight")
    edits.check_config_error_is_named(src, tmp_path / "c", "n_groups", n_groups=3)
    edits.check_config_error_is_named(src, tmp_path / "d", "hidden_act", hidden_act="gelu")
