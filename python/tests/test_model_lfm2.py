"""Lfm2ForCausalLM (gated short-conv blocks + attention blocks with q/k RMSNorm, SwiGLU feed-forwards) against
transformers' pure-torch path (float32, eager) on tiny random checkpoints: whole prompt, the prompt in pieces
(conv tails and KV caches carried), token-by-token decode, greedy continuation, ragged batches, inspect, errors."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from attnzoo.generate import generate  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160
PIECES = [1, 17, 64, 100]
PROMPT_LEN = sum(PIECES)


def _config(kind):
    common = dict(vocab_size=VOCAB, max_position_embeddings=512, norm_eps=1e-5, initializer_range=0.1)
    if kind == "L3_gqa_tied":
        return transformers.Lfm2Config(hidden_size=64, intermediate_size=192, block_multiple_of=32,
                                       num_attention_heads=4, num_key_value_heads=2, conv_L_cache=3,
                                       num_hidden_layers=4, layer_types=["conv", "full_attention", "conv",
                                                                         "full_attention"], **common)
    if kind == "L2_bias_untied":
        return transformers.Lfm2Config(hidden_size=32, intermediate_size=96, block_auto_adjust_ff_dim=False,
                                       num_attention_heads=2, num_key_value_heads=2, conv_L_cache=2, conv_bias=True,
                                       tie_word_embeddings=False, num_hidden_layers=3,
                                       layer_types=["conv", "full_attention", "conv"], **common)
    if kind == "L4_mqa":
        return transformers.Lfm2Config(hidden_size=48, intermediate_size=80, block_auto_adjust_ff_dim=False,
                                       num_attention_heads=3, num_key_value_heads=1, conv_L_cache=4,
                                       num_hidden_layers=3, layer_types=["conv", "conv", "full_attention"], **common)
    raise ValueError(kind)


KINDS = ["L3_gqa_tied", "L2_bias_untied", "L4_mqa"]


def _build(kind, directory):
    torch.manual_seed(sum(map(ord, kind)))
    model = transformers.AutoModelForCausalLM.from_config(_config(kind), attn_implementation="eager")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_((1.0 if "norm" in name else 0.0) + 0.3 * torch.randn_like(p))
            elif "conv.conv" in name:
                p.copy_(0.5 * torch.randn_like(p))
    model.save_pretrained(directory, safe_serialization=True)
    return model.eval()


def _prompt(n=PROMPT_LEN, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, size=n).astype(np.int64)


@pytest.fixture(scope="module", params=KINDS)
def case(request, tmp_path_factory):
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
    np.testing.assert_allclose(m.forward(ids[:20], seq=seq, last_only=True)[0], want[19], atol=1e-4, rtol=0)
    for t in range(20, 60):
        np.testing.assert_allclose(m.forward(ids[t:t + 1], seq=seq)[0], want[t], atol=1e-4, rtol=0)


def test_greedy_continuation_matches_transformers(case):
    kind, ref, m, ids, want = case
    prompt = ids[:24]
    with torch.no_grad():
        ids_t = torch.from_numpy(prompt)[None]
        out = ref.generate(ids_t, attention_mask=torch.ones_like(ids_t), max_new_tokens=32, do_sample=False,
                           min_new_tokens=32, pad_token_id=VOCAB + 1, eos_token_id=None)
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
    out_a, out_b = m.forward_batch([a, b], [ids[33:34], ids[:1]], last_only=True)
    np.testing.assert_allclose(out_a[0], want[33], atol=1e-4, rtol=0)
    np.testing.assert_allclose(out_b[0], m.forward(np.concatenate([other, ids[:1]]))[-1], atol=1e-4, rtol=0)


def test_inspect_reports_conv_state_and_kv_cache(case):
    kind, ref, m, ids, want = case
    cfg = m.config
    hidden, L = cfg["hidden_size"], cfg["conv_L_cache"]
    hd = hidden // cfg["num_attention_heads"]
    kv_per_token = 2 * cfg["num_key_value_heads"] * hd * 4
    info = m.inspect()
    kinds = ["short_conv" if t == "conv" else "attention" for t in cfg["layer_types"]]
    assert [layer["kind"] for layer in info["layers"]] == kinds
    for layer, k in zip(info["layers"], kinds):
        if k == "short_conv":
            assert layer["cache"]["fixed_bytes"] == hidden * (L - 1) * 4 and layer["cache"]["bytes_per_token"] == 0
        else:
            assert layer["cache"]["bytes_per_token"] == kv_per_token and layer["cache"]["fixed_bytes"] == 0
    n_conv, n_attn = kinds.count("short_conv"), kinds.count("attention")
    assert info["cache_bytes_per_token"] == n_attn * kv_per_token
    assert info["cache_bytes_at"][4096] == n_conv * hidden * (L - 1) * 4 + 4096 * n_attn * kv_per_token
    assert info["tied_embeddings"] == (kind != "L2_bias_untied")
    assert info["intermediate_size"] == ref.model.layers[0].feed_forward.w1.out_features


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


def test_load_errors_name_the_problem(case, tmp_path):
    kind, ref, m, ids, want = case
    if kind != "L2_bias_untied":
        pytest.skip("one checkpoint is enough")
    src = m.directory
    name = "model.layers.2.conv.in_proj.weight"
    d = _copy_with(src, tmp_path / "a", tensors_edit=lambda t: t.pop(name))
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        Model.load(d)
    d = _copy_with(src, tmp_path / "b", tensors_edit=lambda t: t.update({name: t[name][:-1].copy()}))
    with pytest.raises(ValueError, match=r"in_proj\.weight"):
        Model.load(d)
    d = _copy_with(src, tmp_path / "c", config_edit=lambda c: c.update(layer_types=["conv", "mamba", "conv"]))
    with pytest.raises(ValueError, match="layer_types"):
        Model.load(d)
