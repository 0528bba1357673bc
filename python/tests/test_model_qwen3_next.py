"""Qwen3-Next (Gated DeltaNet + gated attention hybrid, sparse MoE with a shared expert) against transformers'
pure-PyTorch path (float32) on tiny random checkpoints: whole prompt, prompt in pieces (the conv tail and the
delta-rule state carried exactly), token-by-token decode, greedy continuation, ragged batches, the per-layer
state `inspect` reports, and load errors."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from attnzoo.generate import generate  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160
PIECES = [1, 17, 64, 100]  # decode-sized, short-chunk and chunk-sized pieces (the chunk kernel's 64)
PROMPT_LEN = sum(PIECES)


def _config(kind):
    common = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, linear_num_key_heads=2, linear_num_value_heads=4, linear_conv_kernel_dim=4,
                  max_position_embeddings=512, rms_norm_eps=1e-6, initializer_range=0.1,
                  tie_word_embeddings=False)
    if kind == "moe_interval":  # full attention every 2nd layer, MoE everywhere with a shared expert
        return transformers.Qwen3NextConfig(
            head_dim=16, partial_rotary_factor=0.5, linear_key_head_dim=16, linear_value_head_dim=32,
            intermediate_size=96, full_attention_interval=2, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, shared_expert_intermediate_size=48, norm_topk_prob=True, **common)
    if kind == "dense_layer_types":  # explicit layer_types, every layer a dense MLP
        return transformers.Qwen3NextConfig(
            head_dim=32, partial_rotary_factor=0.25, linear_key_head_dim=32, linear_value_head_dim=16,
            intermediate_size=80, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
            shared_expert_intermediate_size=48, mlp_only_layers=[0, 1, 2, 3],
            layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"], **common)
    if kind == "sparse_step_unnormalized":  # MoE on odd layers only (decoder_sparse_step 2), raw top-k weights
        return transformers.Qwen3NextConfig(
            head_dim=16, partial_rotary_factor=0.5, linear_key_head_dim=16, linear_value_head_dim=16,
            intermediate_size=64, full_attention_interval=4, num_experts=6, num_experts_per_tok=3,
            moe_intermediate_size=24, shared_expert_intermediate_size=40, decoder_sparse_step=2,
            norm_topk_prob=False, **common)
    if kind == "qwen3_5":  # Qwen3.5 text: separate in_proj_qkv / z / b / a, dense MLPs
        common.pop("tie_word_embeddings")
        return transformers.Qwen3_5TextConfig(
            head_dim=16, linear_key_head_dim=16, linear_value_head_dim=24, intermediate_size=96,
            full_attention_interval=2, tie_word_embeddings=True, **common)
    raise ValueError(kind)


KINDS = ["moe_interval", "dense_layer_types", "sparse_step_unnormalized", "qwen3_5"]


def _uses_torch_path():
    """The reference must be transformers' own PyTorch Gated DeltaNet, not an fla / causal-conv1d kernel."""
    import inspect
    from transformers.models.qwen3_5 import modeling_qwen3_5
    from transformers.models.qwen3_next import modeling_qwen3_next
    for mod in (modeling_qwen3_next, modeling_qwen3_5):
        for fn in (mod.torch_chunk_gated_delta_rule, mod.torch_recurrent_gated_delta_rule, mod.causal_conv1d_fn,
                   mod.causal_conv1d_update):
            closure = inspect.getclosurevars(fn).nonlocals
            if closure.get("is_new_implementation", True):
                return False
    return True


def _build(kind, directory):
    torch.manual_seed(sum(map(ord, kind)))
    model = transformers.AutoModelForCausalLM.from_config(_config(kind), attn_implementation="eager")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):  # decay rates exp(A_log) in [0.05, 1): the state keeps a long memory
                p.copy_(torch.empty_like(p).uniform_(0.05, 1.0).log())
            elif name.endswith("linear_attn.norm.weight"):  # the gated norm multiplies by w itself
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif p.ndim == 1:  # zero-centred (1 + w) norms, dt_bias
                p.copy_(0.2 * torch.randn_like(p))
    model.save_pretrained(directory, safe_serialization=True)
    return model.eval()


def _prompt(n=PROMPT_LEN, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, size=n).astype(np.int64)


@pytest.fixture(scope="module", params=KINDS)
def case(request, tmp_path_factory):
    assert _uses_torch_path()
    directory = tmp_path_factory.mktemp(request.param)
    ref = _build(request.param, directory)
    ids = _prompt()
    with torch.no_grad():
        want = ref(torch.from_numpy(ids)[None]).logits[0].numpy()
    assert want.std() > 0.1
    return request.param, ref, Model.load(directory), ids, want


def test_full_prompt_matches_transformers(case):
    kind, ref, m, ids, want = case
    got = m.forward(ids)
    assert got.shape == (PROMPT_LEN, VOCAB) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)


def test_prompt_in_pieces_carries_the_state(case):
    kind, ref, m, ids, want = case
    for pieces in (PIECES, PIECES[::-1]):
        seq, rows, start = m.new_sequence(), [], 0
        for size in pieces:
            rows.append(m.forward(ids[start:start + size], seq=seq))
            start += size
        assert seq.length == PROMPT_LEN
        np.testing.assert_allclose(np.concatenate(rows), want, atol=1e-4, rtol=0)


def test_token_by_token_decode(case):
    kind, ref, m, ids, want = case
    seq = m.new_sequence()
    np.testing.assert_allclose(m.forward(ids[:3], seq=seq, last_only=True)[0], want[2], atol=1e-4, rtol=0)
    for t in range(3, 70):
        np.testing.assert_allclose(m.forward(ids[t:t + 1], seq=seq)[0], want[t], atol=1e-4, rtol=0)


def test_greedy_continuation_matches_transformers(case):
    kind, ref, m, ids, want = case
    prompt = ids[:24]
    with torch.no_grad():
        # An explicit mask: otherwise generate() takes prompt tokens equal to pad_token_id for padding.
        x = torch.from_numpy(prompt)[None]
        out = ref.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=32, do_sample=False,
                           min_new_tokens=32, pad_token_id=0, eos_token_id=None)
    expect = out[0, len(prompt):].tolist()
    got = generate(m, None, prompt, max_new_tokens=32, temperature=0, eos_token_id=[])
    assert list(got) == expect


def test_ragged_batch_mixes_prefill_and_decode(case):
    kind, ref, m, ids, want = case
    other = _prompt(23, seed=1)
    a, b = m.new_sequence(), m.new_sequence()
    m.forward(ids[:30], seq=a)
    out_a, out_b = m.forward_batch([a, b], [ids[30:33], other])
    np.testing.assert_allclose(out_a, want[30:33], atol=1e-4, rtol=0)
    np.testing.assert_allclose(out_b, m.forward(other), atol=1e-4, rtol=0)
    # Both decode one token together: the parallel-over-sequences path of every layer.
    out_a, out_b = m.forward_batch([a, b], [ids[33:34], ids[:1]], last_only=True)
    np.testing.assert_allclose(out_a[0], want[33], atol=1e-4, rtol=0)
    np.testing.assert_allclose(out_b[0], m.forward(np.concatenate([other, ids[:1]]))[-1], atol=1e-4, rtol=0)


def test_inspect_reports_fixed_state_beside_kv(case):
    kind, ref, m, ids, want = case
    cfg = m.config
    K, V = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    HK, HV = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    conv_dim = 2 * HK * K + HV * V
    state = 4 * (conv_dim * (cfg["linear_conv_kernel_dim"] - 1) + HV * K * V)
    kv = 2 * cfg["num_key_value_heads"] * cfg["head_dim"] * 4
    info = m.inspect()
    assert info["owned_weight_bytes"] == 0  # f32 weights, the DeltaNet projections included, stay borrowed
    kinds = [layer["kind"] for layer in info["layers"]]
    assert kinds == ["attention" if t == "full_attention" else "linear_attention" for t in ref.config.layer_types]
    for layer in info["layers"]:
        c = layer["cache"]
        if layer["kind"] == "linear_attention":
            assert (c["kind"], c["fixed_bytes"], c["bytes_per_token"]) == ("state", state, 0)
        else:
            assert (c["fixed_bytes"], c["bytes_per_token"]) == (0, kv)
    n_attn, n_linear = kinds.count("attention"), kinds.count("linear_attention")
    assert info["cache_bytes_per_token"] == n_attn * kv
    assert info["cache_bytes_at"][4096] == n_linear * state + n_attn * kv * 4096
    seq = m.new_sequence()
    m.forward(ids[:10], seq=seq)
    assert seq.cache_bytes >= n_linear * state


def test_full_attention_interval_without_layer_types(case, tmp_path):
    kind, ref, m, ids, want = case
    if "layer_types" in kind:
        pytest.skip("its pattern is not an interval")
    # transformers saves only the expanded layer_types; put the interval back in their place.
    interval = ref.config.layer_types.index("full_attention") + 1

    def edit(c):
        c.pop("layer_types")
        c["full_attention_interval"] = interval
    d = _copy_with(m.directory, tmp_path / "interval", config_edit=edit)
    np.testing.assert_allclose(Model.load(d).forward(ids[:40]), want[:40], atol=1e-4, rtol=0)


def test_bf16_checkpoint_and_bf16_weights(tmp_path):
    ref = _build("moe_interval", tmp_path / "f32")
    ids = _prompt(70)
    ref.to(torch.bfloat16).save_pretrained(tmp_path / "bf16", safe_serialization=True)
    ref = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "bf16", dtype=torch.float32).eval()
    with torch.no_grad():
        want = ref(torch.from_numpy(ids)[None]).logits[0].numpy().astype(np.float64)
    # bf16 weights widen exactly: only summation order differs from transformers.
    np.testing.assert_allclose(Model.load(tmp_path / "bf16").forward(ids), want, atol=1e-4, rtol=0)
    m = Model.load(tmp_path / "f32", dtype="bfloat16")  # f32 weights rounded once at load (in_proj included)
    got = m.forward(ids)
    with torch.no_grad():
        want32 = _build("moe_interval", tmp_path / "again")(torch.from_numpy(ids)[None]).logits[0].numpy()
    rel = np.sqrt(((got - want32) ** 2).sum() / (want32 ** 2).sum())
    assert 0 < rel <= 3e-2, rel
    assert m.inspect()["owned_weight_bytes"] > 0


def _copy_with(src, dst, config_edit=None, tensors_edit=None):
    from safetensors.numpy import load_file, save_file
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    if config_edit:
        config_edit(cfg)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f)
    tensors = load_file(os.path.join(src, "model.safetensors"))
    if tensors_edit:
        tensors_edit(tensors)
    save_file(tensors, os.path.join(dst, "model.safetensors"))
    return dst


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("small")
    _build("moe_interval", directory)
    return directory


def test_load_errors_name_the_problem(small_dir, tmp_path):
    for i, name in enumerate(["model.layers.0.linear_attn.in_proj_ba.weight", "model.layers.0.linear_attn.A_log",
                              "model.layers.2.mlp.experts.3.up_proj.weight", "model.layers.1.self_attn.q_norm.weight"]):
        d = _copy_with(small_dir, tmp_path / f"missing{i}", tensors_edit=lambda t: t.pop(name))
        with pytest.raises(ValueError, match=name.replace(".", r"\.")):
            Model.load(d)
    conv = "model.layers.0.linear_attn.conv1d.weight"

    def shrink(t):
        t[conv] = t[conv][:, :, :3].copy()
    d = _copy_with(small_dir, tmp_path / "conv", tensors_edit=shrink)
    with pytest.raises(ValueError, match=conv.replace(".", r"\.")):
        Model.load(d)
    d = _copy_with(small_dir, tmp_path / "gva", config_edit=lambda c: c.update(linear_num_value_heads=3))
    with pytest.raises(ValueError, match="linear_num_value_heads"):
        Model.load(d)
    d = _copy_with(small_dir, tmp_path / "types", config_edit=lambda c: c.update(layer_types=["full_attention"] * 3))
    with pytest.raises(ValueError, match="layer_types"):
        Model.load(d)
    d = _copy_with(small_dir, tmp_path / "topk", config_edit=lambda c: c.update(num_experts_per_tok=9))
    with pytest.raises(ValueError, match="num_experts_per_tok"):
        Model.load(d)
