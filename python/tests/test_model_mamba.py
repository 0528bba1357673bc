"""MambaForCausalLM and FalconMambaForCausalLM against transformers' pure-torch path (float32) on tiny random
checkpoints: whole prompt, the prompt fed in pieces (states carried through the cache), token-by-token decode,
greedy continuation, ragged batches, the per-layer state size `inspect` reports, and load errors."""
import importlib.util

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import model_checks as checks  # noqa: E402

VOCAB = 160
PIECES = [1, 17, 64, 30]  # a decode-sized piece, then scan pieces of several lengths
PROMPT_LEN = sum(PIECES)


def _config(kind):
    common = dict(vocab_size=VOCAB, num_hidden_layers=2, layer_norm_epsilon=1e-5, pad_token_id=0)
    if kind == "mamba_n8_conv4_tied":  # time_step_rank "auto": ceil(32 / 16) = 2
        return transformers.MambaConfig(hidden_size=32, state_size=8, conv_kernel=4, expand=2, tie_word_embeddings=True,
                                        **common)
    if kind == "mamba_n16_conv2_nobias_untied":
        return transformers.MambaConfig(hidden_size=48, state_size=16, conv_kernel=2, expand=3, time_step_rank=5,
                                        use_conv_bias=False, use_bias=True, tie_word_embeddings=False, **common)
    if kind == "falcon_n12_conv3_untied":
        return transformers.FalconMambaConfig(hidden_size=32, state_size=12, conv_kernel=3, expand=2, time_step_rank=4,
                                              mixer_rms_eps=1e-5, tie_word_embeddings=False, **common)
    if kind == "falcon_n8_conv4_tied":
        return transformers.FalconMambaConfig(hidden_size=40, state_size=8, conv_kernel=4, expand=2,
                                              tie_word_embeddings=True, **common)
    raise ValueError(kind)


KINDS = ["mamba_n8_conv4_tied", "mamba_n16_conv2_nobias_untied", "falcon_n12_conv3_untied", "falcon_n8_conv4_tied"]


def _randomize(model):
    for name, p in model.named_parameters():
        if name.endswith("A_log"):
            p.copy_(torch.log(torch.rand_like(p) * 2 + 0.2))  # decays exp(-exp(A_log) dt) spread over (0, 1)
        elif name.endswith("dt_proj.bias"):
            p.copy_(-1.0 + 0.8 * torch.randn_like(p))  # softplus(bias) around 0.3, some steps large, some small
        elif p.ndim == 1:  # norm weights near 1, D / conv / projection biases near 0: all exercised
            p.copy_((1.0 if "norm" in name else 0.0) + 0.3 * torch.randn_like(p))


checks.define_family_tests(globals(), _config, KINDS, _randomize, VOCAB, PROMPT_LEN, (PIECES, PIECES[::-1]),
                           prefill=20, stop=60, pad_token_id=VOCAB + 1, block_size=16, attn_implementation=None)


def test_reference_is_the_pure_torch_path():
    """No CUDA kernels, hub kernels or mamba.py here: transformers runs its sequential torch scan."""
    for package in ("mamba_ssm", "causal_conv1d", "kernels", "mambapy"):
        assert importlib.util.find_spec(package) is None, package
    from transformers.models.falcon_mamba import modeling_falcon_mamba
    from transformers.models.mamba import modeling_mamba
    for module in (modeling_mamba, modeling_falcon_mamba):
        assert not getattr(module, "is_fast_path_available", False)
    assert not _config(KINDS[0]).use_mambapy and not torch.cuda.is_available()


def test_inspect_reports_the_fixed_state(case):
    kind, ref, m, ids, want = case
    cfg = ref.config
    inner = cfg.expand * cfg.hidden_size
    per_layer = 4 * inner * ((cfg.conv_kernel - 1) + cfg.state_size)  # conv tail + SSM state, f32
    info = checks.check_fixed_state_only(m, ids, ["mamba", "mamba"], per_layer)
    assert info["tied_embeddings"] == kind.endswith("_tied")
    assert info["parameter_count"] == sum(p.numel() for p in ref.parameters())


def test_load_errors_name_the_problem(case, tmp_path):
    kind, ref, m, ids, want = case
    if kind not in ("mamba_n8_conv4_tied", "falcon_n12_conv3_untied"):
        pytest.skip("one checkpoint per architecture is enough")
    src = m.directory
    mixer = "backbone.layers.1.mixer."
    names = [mixer + t for t in ("in_proj.weight", "conv1d.weight", "x_proj.weight", "dt_proj.weight",
                                 "dt_proj.bias", "A_log", "D", "out_proj.weight")]
    names += ["backbone.layers.0.norm.weight", "backbone.norm_f.weight"]
    if kind.startswith("mamba"):  # use_conv_bias: the bias is required too
        names.append("backbone.layers.0.mixer.conv1d.bias")
    edits.check_missing_tensors_are_named(src, tmp_path, names)
    name = mixer + "A_log"
    d = edits.copy_with(src, tmp_path / "b", tensors_edit=lambda t: t.update({name: t[name][:, :-1].copy()}))
    edits.expect_load_error(d, r"A_log")
    edits.check_config_error_is_named(src, tmp_path / "c", "hidden_act", hidden_act="gelu")
    edits.check_config_error_is_named(src, tmp_path / "d", "x_proj", time_step_rank=3)
