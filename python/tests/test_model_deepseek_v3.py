"""DeepSeek-V3 (multi-head latent attention with a latent cache, sigmoid grouped-top-k MoE with shared experts)
against transformers' eager float32 path on tiny random checkpoints: whole prompt, prompt in pieces (decode-sized
pieces take the absorbed MLA path, longer ones the naive one), token-by-token decode, greedy continuation, ragged
batches, what `inspect` reports and load errors."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from attnzoo.generate import generate  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160
PIECES = [1, 7, 17, 40]  # 1 and 7 go through mla_decode (absorbed), 17 and 40 through mla_prefill (naive)
PROMPT_LEN = sum(PIECES)
KV_LORA, ROPE_DIM = 32, 8


def _config(kind):
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                  num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=2,
                  n_group=2, topk_group=1, kv_lora_rank=KV_LORA, qk_nope_head_dim=16, qk_rope_head_dim=ROPE_DIM,
                  v_head_dim=16, first_k_dense_replace=1, max_position_embeddings=512, rms_norm_eps=1e-6,
                  initializer_range=0.1, tie_word_embeddings=False)
    if kind == "q_lora_yarn":  # q LoRA, YaRN with mscale / mscale_all_dim (softmax scale * mscale^2), biases
        return transformers.DeepseekV3Config(
            num_hidden_layers=3, q_lora_rank=48, attention_bias=True, n_shared_experts=1, norm_topk_prob=True,
            routed_scaling_factor=2.5, rope_interleave=True,
            rope_scaling=dict(type="yarn", factor=4.0, original_max_position_embeddings=128, mscale=0.9,
                              mscale_all_dim=0.7, beta_fast=32, beta_slow=1), **common)
    if kind == "plain_q":  # q_proj without LoRA, default RoPE in the half layout, raw top-k weights
        return transformers.DeepseekV3Config(
            num_hidden_layers=2, q_lora_rank=None, attention_bias=False, n_shared_experts=2, norm_topk_prob=False,
            routed_scaling_factor=1.5, rope_interleave=False, **common)
    raise ValueError(kind)


KINDS = ["q_lora_yarn", "plain_q"]


def _build(kind, directory):
    torch.manual_seed(sum(map(ord, kind)))
    model = transformers.AutoModelForCausalLM.from_config(_config(kind), attn_implementation="eager",
                                                          experts_implementation="eager")
    # The reference must be the plain per-expert loop, not a grouped-GEMM kernel.
    assert model.config._experts_implementation == "eager"
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.2 * torch.randn_like(p))
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):  # large enough to change which experts win
                b.copy_(0.05 * torch.randn_like(b))
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
    return request.param, ref, Model.load(directory), ids, want, directory


def test_full_prompt_matches_transformers(case):
    kind, ref, m, ids, want, _ = case
    got = m.forward(ids)
    assert got.shape == (PROMPT_LEN, VOCAB) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)


def test_correction_bias_changes_the_routing(case, tmp_path):
    """Without e_score_correction_bias the logits differ: the bias is really read (and only steers the choice,
    which the match above checks)."""
    kind, ref, m, ids, want, directory = case

    def zero_bias(t):
        for k in t:
            if k.endswith("e_score_correction_bias"):
                t[k] = np.zeros_like(t[k])
    d = _copy_with(directory, tmp_path / "nobias", tensors_edit=zero_bias)
    assert np.abs(Model.load(d).forward(ids[:30]) - want[:30]).max() > 1e-3


def test_prompt_in_pieces_uses_the_latent_cache(case):
    kind, ref, m, ids, want, _ = case
    for pieces in (PIECES, PIECES[::-1]):
        seq, rows, start = m.new_sequence(), [], 0
        for size in pieces:
            rows.append(m.forward(ids[start:start + size], seq=seq))
            start += size
        assert seq.length == PROMPT_LEN
        np.testing.assert_allclose(np.concatenate(rows), want, atol=1e-4, rtol=0)


def test_token_by_token_decode(case):
    kind, ref, m, ids, want, _ = case
    seq = m.new_sequence()
    np.testing.assert_allclose(m.forward(ids[:20], seq=seq, last_only=True)[0], want[19], atol=1e-4, rtol=0)
    for t in range(20, PROMPT_LEN):
        np.testing.assert_allclose(m.forward(ids[t:t + 1], seq=seq)[0], want[t], atol=1e-4, rtol=0)


def test_greedy_continuation_matches_transformers(case):
    kind, ref, m, ids, want, _ = case
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
    kind, ref, m, ids, want, _ = case
    other = _prompt(23, seed=1)
    a, b = m.new_sequence(), m.new_sequence()
    m.forward(ids[:30], seq=a)
    out_a, out_b = m.forward_batch([a, b], [ids[30:33], other])
    np.testing.assert_allclose(out_a, want[30:33], atol=1e-4, rtol=0)
    np.testing.assert_allclose(out_b, m.forward(other), atol=1e-4, rtol=0)
    # Both decode one token together: sequences attended in parallel.
    out_a, out_b = m.forward_batch([a, b], [ids[33:34], ids[:1]], last_only=True)
    np.testing.assert_allclose(out_a[0], want[33], atol=1e-4, rtol=0)
    np.testing.assert_allclose(out_b[0], m.forward(np.concatenate([other, ids[:1]]))[-1], atol=1e-4, rtol=0)


def test_inspect_reports_latent_cache(case):
    kind, ref, m, ids, want, _ = case
    info = m.inspect()
    assert info["architecture"] == "DeepseekV3ForCausalLM"
    layers = info["layers"]
    assert len(layers) == ref.config.num_hidden_layers
    for layer in layers:
        assert layer["kind"] == "mla" and layer["cache"]["kind"] == "latent"
        assert layer["cache"]["bytes_per_token"] == (KV_LORA + ROPE_DIM) * 4  # one f32 [c_kv ; k_pe] row
        assert layer["cache"]["fixed_bytes"] == 0
    assert info["cache_bytes_per_token"] == len(layers) * (KV_LORA + ROPE_DIM) * 4


def test_bf16_weights_stay_close(case):
    kind, ref, m, ids, want, directory = case
    got = Model.load(directory, dtype="bfloat16").forward(ids[:40])
    rel = np.sqrt(((got - want[:40]) ** 2).sum() / (want[:40] ** 2).sum())
    assert 0 < rel <= 3e-2, rel


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
    _build("q_lora_yarn", directory)
    return directory


def test_load_errors_name_the_problem(small_dir, tmp_path):
    for i, name in enumerate(["model.layers.0.self_attn.kv_b_proj.weight", "model.layers.1.self_attn.q_a_layernorm.weight",
                              "model.layers.2.mlp.experts.5.down_proj.weight",
                              "model.layers.1.mlp.shared_experts.up_proj.weight", "model.layers.2.mlp.gate.weight"]):
        d = _copy_with(small_dir, tmp_path / f"missing{i}", tensors_edit=lambda t: t.pop(name))
        with pytest.raises(ValueError, match=name.replace(".", r"\.")):
            Model.load(d)
    kv_a = "model.layers.0.self_attn.kv_a_proj_with_mqa.weight"

    def shrink(t):
        t[kv_a] = t[kv_a][:-1].copy()
    d = _copy_with(small_dir, tmp_path / "kv_a", tensors_edit=shrink)
    with pytest.raises(ValueError, match=kv_a.replace(".", r"\.")):
        Model.load(d)
    for key, value in [("n_group", 3), ("topk_group", 3), ("num_experts_per_tok", 9)]:
        d = _copy_with(small_dir, tmp_path / key, config_edit=lambda c: c.update({key: value}))
        with pytest.raises(ValueError, match=key):
            Model.load(d)
