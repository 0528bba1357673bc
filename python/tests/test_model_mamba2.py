"""Mamba2ForCausalLM against transformers' pure-torch path (float32) on tiny random checkpoints: whole prompt,
the prompt fed in pieces (states carried through the cache), token-by-token decode, greedy continuation, ragged
batches, the per-layer state size `inspect` reports, and load errors."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from attnzoo.generate import generate  # noqa: E402
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


def _build(kind, directory):
    torch.manual_seed(sum(map(ord, kind)))
    model = transformers.AutoModelForCausalLM.from_config(_config(kind))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.log(torch.rand_like(p) * 2 + 0.2))  # decays exp(-A dt) spread over (0, 1)
            elif p.ndim == 1:  # norm weights near 1, D / dt_bias / biases near 0: all exercised
                p.copy_((1.0 if "norm" in name else 0.0) + 0.3 * torch.randn_like(p))
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
    out_a, out_b = m.forward_batch([a, b], [ids[33:34], ids[:1]], last_only=True)  # all decoding together
    np.testing.assert_allclose(out_a[0], want[33], atol=1e-4, rtol=0)
    np.testing.assert_allclose(out_b[0], m.forward(np.concatenate([other, ids[:1]]))[-1], atol=1e-4, rtol=0)


def test_inspect_reports_the_fixed_state(case):
    kind, ref, m, ids, want = case
    cfg = m.config
    inner = cfg["num_heads"] * cfg["head_dim"]
    conv_dim = inner + 2 * cfg["n_groups"] * cfg["state_size"]
    per_layer = 4 * (conv_dim * (cfg["conv_kernel"] - 1) + inner * cfg["state_size"])
    info = m.inspect()
    assert [layer["kind"] for layer in info["layers"]] == ["mamba2", "mamba2"]
    for layer in info["layers"]:
        assert layer["cache"]["fixed_bytes"] == per_layer and layer["cache"]["bytes_per_token"] == 0
    assert info["cache_bytes_per_token"] == 0
    assert info["cache_bytes_at"][4096] == info["cache_bytes_at"][1048576] == 2 * per_layer
    seq = m.new_sequence()
    m.forward(ids[:50], seq=seq)
    assert seq.cache_bytes == 2 * per_layer  # does not grow with the sequence
    assert info["tied_embeddings"] == (kind == "g2_conv2_bias_tied")


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


def test_time_step_limit_clamps_dt(tmp_path):
    cfg = _config("g1_conv4")
    cfg.time_step_limit = (0.05, 0.4)
    torch.manual_seed(3)
    ref = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    ref.save_pretrained(tmp_path, safe_serialization=True)
    ids = _prompt(40)
    with torch.no_grad():
        want = ref(torch.from_numpy(ids)[None]).logits[0].numpy()
    np.testing.assert_allclose(Model.load(tmp_path).forward(ids), want, atol=1e-4, rtol=0)


def test_load_errors_name_the_problem(case, tmp_path):
    kind, ref, m, ids, want = case
    if kind != "g1_conv4":
        pytest.skip("one checkpoint is enough")
    src = m.directory
    name = "backbone.layers.1.mixer.conv1d.weight"
    d = _copy_with(src, tmp_path / "a", tensors_edit=lambda t: t.pop(name))
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        Model.load(d)
    d = _copy_with(src, tmp_path / "b", tensors_edit=lambda t: t.update({name: t[name][:, :, :-1].copy()}))
    with pytest.raises(ValueError, match=r"conv1d\.weight"):
        Model.load(d)
    d = _copy_with(src, tmp_path / "c", config_edit=lambda c: c.update(n_groups=3))
    with pytest.raises(ValueError, match="n_groups"):
        Model.load(d)
    d = _copy_with(src, tmp_path / "d", config_edit=lambda c: c.update(hidden_act="gelu"))
    with pytest.raises(ValueError, match="hidden_act"):
        Model.load(d)
