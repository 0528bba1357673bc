"""Llama-family (Qwen3-MoE included) forward passes against transformers (eager attention, float32) on tiny random checkpoints:
whole prompt, chunked prefill through the cache, token-by-token decode, ragged batches, bf16 weights, errors."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

PROMPT_LEN = 40
VOCAB = 320


def _config(kind):
    common = dict(vocab_size=VOCAB, num_hidden_layers=2, max_position_embeddings=256, rms_norm_eps=1e-5,
                  initializer_range=0.1, attn_implementation="eager")
    if kind == "llama_hd64":
        return transformers.LlamaConfig(hidden_size=128, intermediate_size=192, num_attention_heads=2,
                                        num_key_value_heads=1, tie_word_embeddings=False, **common)
    if kind == "llama_hd32_llama3_tied":
        return transformers.LlamaConfig(
            hidden_size=128, intermediate_size=160, num_attention_heads=4, num_key_value_heads=2,
            tie_word_embeddings=True,
            rope_parameters=dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0,
                                 high_freq_factor=4.0, original_max_position_embeddings=16), **common)
    if kind == "llama_yarn_bias":
        return transformers.LlamaConfig(
            hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=4,
            attention_bias=True, mlp_bias=False,
            rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                 original_max_position_embeddings=32), **common)
    if kind == "llama_linear_rope":  # position interpolation, as Gemma 3's full-attention layers use
        return transformers.LlamaConfig(
            hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
            rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=4.0), **common)
    if kind == "qwen2":
        return transformers.Qwen2Config(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                        num_key_value_heads=2, **common)
    if kind == "qwen3":
        return transformers.Qwen3Config(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                        num_key_value_heads=2, head_dim=32, **common)
    if kind == "qwen3_moe":  # sparse MoEs (top-2 of 4 experts, renormalized) on layers 1 and 5 only: every
        # second layer (decoder_sparse_step) except layer 3 (mlp_only_layers); dense MLPs elsewhere
        return transformers.Qwen3MoeConfig(hidden_size=64, intermediate_size=128, moe_intermediate_size=48,
                                           num_experts=4, num_experts_per_tok=2, norm_topk_prob=True,
                                           decoder_sparse_step=2, mlp_only_layers=[3], num_attention_heads=4,
                                           num_key_value_heads=2, head_dim=32, **{**common, "num_hidden_layers": 6})
    if kind == "mistral_swa":
        return transformers.MistralConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                          num_key_value_heads=2, sliding_window=12, **common)
    if kind == "mistral":  # no window (Mistral 7B v0.2 on): what GGUF's llama holds
        return transformers.MistralConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                          num_key_value_heads=2, sliding_window=None, **common)
    if kind == "qwen3_moe_every_layer":  # the layout llama.cpp's qwen3moe holds: experts in every layer
        return transformers.Qwen3MoeConfig(hidden_size=64, intermediate_size=128, moe_intermediate_size=48,
                                           num_experts=4, num_experts_per_tok=2, norm_topk_prob=True,
                                           num_attention_heads=4, num_key_value_heads=2, head_dim=32, **common)
    raise ValueError(kind)


KINDS = ["llama_hd64", "llama_hd32_llama3_tied", "llama_yarn_bias", "llama_linear_rope", "qwen2", "qwen3",
         "qwen3_moe", "mistral_swa"]


def _randomize(model):
    # Norm weights and biases start at 1 / 0: randomise them so q/k norms and biases are really exercised.
    for name, p in model.named_parameters():
        if p.ndim == 1:
            p.copy_((1.0 if "norm" in name else 0.0) + 0.2 * torch.randn_like(p))


def _build(kind, directory, dtype=torch.float32):
    """Saves a random checkpoint; returns the transformers model (float32, eager) holding the saved values."""
    model = checks.random_model(kind, _config(kind), _randomize, attn_implementation="eager")
    model = model.to(dtype)
    model.save_pretrained(directory, safe_serialization=True)
    if dtype == torch.float32:
        return model.eval()
    # Reload rather than cast back: .to(bf16) also rounded the RoPE inverse-frequency buffer, which a fresh load
    # recomputes in f32.
    return transformers.AutoModelForCausalLM.from_pretrained(
        directory, dtype=torch.float32, attn_implementation="eager").eval()


def _prompt(n=PROMPT_LEN, seed=0):
    return checks.prompt(VOCAB, n, seed)


@pytest.fixture(scope="module", params=KINDS)
def case(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    ref = _build(request.param, directory)
    ids = _prompt()
    want = checks.meaningful_logits(ref, ids)  # the comparisons are meaningful, not between near-zero logits
    return request.param, Model.load(directory), ids, want


def test_full_prompt_matches_transformers(case):
    kind, m, ids, want = case
    checks.check_full_prompt(m, ids, want, VOCAB)


def test_chunked_prefill_through_the_cache(case):
    kind, m, ids, want = case
    checks.check_prompt_in_pieces(m, ids, want, ([1, 7, 17, 15],))  # decode-sized and prefill-sized chunks


def test_token_by_token_decode(case):
    kind, m, ids, want = case
    checks.check_token_by_token_decode(m, ids, want, prefill=25, stop=PROMPT_LEN)


def test_odd_shuffled_blocks_give_the_same_logits(case):
    kind, m, ids, want = case
    checks.check_odd_shuffled_blocks(m, ids, want, ([1, 7, 17, 15],), prefill=25, stop=PROMPT_LEN)


def test_ragged_batch_mixes_prefill_and_decode(case):
    kind, m, ids, want = case
    checks.check_ragged_batch(m, ids, want, _prompt(23, seed=1))


def test_sliding_window_cache_drops_old_tokens(tmp_path):
    ref = _build("mistral_swa", tmp_path)  # window 12
    ids = _prompt()
    want = checks.reference_logits(ref, ids)
    m = Model.load(tmp_path, block_size=4)  # blocks wholly outside every layer's window go back to the pool
    seq = m.new_sequence()
    rows = [m.forward(ids[:9], seq=seq)]
    for t in range(9, PROMPT_LEN):
        rows.append(m.forward(ids[t:t + 1], seq=seq))
    np.testing.assert_allclose(np.concatenate(rows), want, atol=1e-4, rtol=0)
    # Memory stays bounded as the sequence grows: per layer 2 kv heads x 16 dims x (K, V) x 4 B = 256 B per
    # token; the blocks covering the last 12 keys (at most 5 blocks of 4 tokens) are all a sequence holds.
    free_before = m.pool_stats()["free_blocks"]
    for t in range(200):
        m.forward([t % VOCAB], seq=seq)
    assert seq.length == PROMPT_LEN + 200
    assert seq.cache_bytes <= 5 * 4 * 2 * 256
    assert m.pool_stats()["free_blocks"] >= free_before - 1


@pytest.mark.parametrize("kind", ["qwen2", "qwen3"])
def test_qwen_window_without_layer_types_covers_layers_from_max_window_layers(kind, tmp_path):
    """Older Qwen2 / Qwen3 configs carry no layer_types: with use_sliding_window, transformers windows only the
    layers >= max_window_layers (here layer 1 of 2), so a prompt longer than the window tells the two apart."""
    config = _config(kind)
    config.use_sliding_window, config.sliding_window, config.max_window_layers = True, 12, 1
    config.layer_types = None
    config.__post_init__()  # recompute sliding_window / layer_types as a fresh config would
    assert config.layer_types == ["full_attention", "sliding_attention"]
    model = checks.save_random_model(kind, config, tmp_path / "src", _randomize, attn_implementation="eager")
    d = edits.copy_with(tmp_path / "src", tmp_path / "old", config_edit=lambda c: c.pop("layer_types"))
    ref = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                            attn_implementation="eager").eval()
    assert ref.config.layer_types == ["full_attention", "sliding_attention"]
    ids = _prompt()
    want = checks.meaningful_logits(ref, ids)
    np.testing.assert_allclose(checks.reference_logits(model, ids), want, atol=1e-5, rtol=0)
    m = Model.load(d)
    assert [layer["window"] for layer in m.inspect()["layers"]] == [0, 12]
    np.testing.assert_allclose(m.forward(ids), want, atol=1e-4, rtol=0)
    # use_sliding_window false (or absent): no layer is windowed, whatever sliding_window says.
    d2 = edits.copy_with(d, tmp_path / "off", config_edit=lambda c: c.pop("use_sliding_window"))
    assert [layer["window"] for layer in Model.load(d2).inspect()["layers"]] == [0, 0]


def test_inspect_describes_layers_and_cache(case):
    kind, m, ids, want = case
    info = m.inspect()
    cfg = m.config
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    per_layer = 2 * cfg["num_key_value_heads"] * hd * 4
    L = cfg["num_hidden_layers"]
    assert info["num_layers"] == L and len(info["layers"]) == L
    assert info["cache_bytes_per_token"] == L * per_layer
    window = info["layers"][0]["window"]
    # A window-only model holds the blocks covering its window plus the one being filled (blocks of 16 tokens).
    held_at_4k = ((window + 15) // 16 + 1) * 16 if window else 4096
    assert info["cache_bytes_at"][4096] == held_at_4k * L * per_layer
    assert info["pool"]["block_tokens"] == 16 and info["pool"]["block_bytes"] == 16 * L * per_layer
    from safetensors import safe_open
    with safe_open(os.path.join(m.directory, "model.safetensors"), "np") as f:
        assert info["parameter_count"] == sum(f.get_slice(k).get_shape() and int(np.prod(f.get_slice(k).get_shape()))
                                              for k in f.keys())
    kinds = {layer["kind"] for layer in info["layers"]}
    assert kinds == ({"sliding_attention"} if kind == "mistral_swa" else {"attention"})
    assert info["tied_embeddings"] == (kind == "llama_hd32_llama3_tied")


@pytest.mark.parametrize("kind", ["llama_hd32_llama3_tied", "qwen3"])
def test_bf16_checkpoint(kind, tmp_path):
    ref = _build(kind, tmp_path, dtype=torch.bfloat16)  # f32 model holding the saved bf16 values
    ids = _prompt()
    want = checks.reference_logits(ref, ids).astype(np.float64)
    for dtype in ["float32", "bfloat16", "auto"]:
        got = Model.load(tmp_path, dtype=dtype).forward(ids)
        rel = np.sqrt(((got - want) ** 2).sum() / (want ** 2).sum())
        assert rel <= 2e-2, (dtype, rel)
        if dtype == "float32":  # bf16 widens exactly: only summation order differs from transformers
            np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)


def test_f32_checkpoint_held_in_bf16(tmp_path):
    ref = _build("qwen2", tmp_path)
    ids = _prompt()
    want = checks.reference_logits(ref, ids).astype(np.float64)
    m = Model.load(tmp_path, dtype="bfloat16")
    got = m.forward(ids)
    rel = np.sqrt(((got - want) ** 2).sum() / (want ** 2).sum())
    assert 0 < rel <= 2e-2
    assert m.inspect()["owned_weight_bytes"] > 0


small_dir = edits.checkpoint_fixture(_build, "qwen2")


def test_unknown_architecture_is_named(small_dir, tmp_path):
    edits.check_config_error_is_named(small_dir, tmp_path / "m", "FooForCausalLM", architectures=["FooForCausalLM"])


def test_missing_and_misshapen_tensors_are_named(small_dir, tmp_path):
    name = "model.layers.1.self_attn.k_proj.weight"
    edits.check_missing_tensors_are_named(small_dir, tmp_path, [name])

    def shrink(t):
        t[name] = t[name][:-1].copy()
    d = edits.copy_with(small_dir, tmp_path / "b", tensors_edit=shrink)
    with pytest.raises(ValueError, match=r"k_proj\.weight.*model\.safetensors|model\.safetensors.*k_proj\.weight"):
        Model.load(d)


def test_unsupported_rope_type_is_named(small_dir, tmp_path):
    edits.check_config_error_is_named(small_dir, tmp_path / "r", "dynamic", rope_parameters=dict(
        rope_type="dynamic", rope_theta=10000.0, factor=2.0))


def test_bad_arguments(small_dir):
    m = Model.load(small_dir)
    with pytest.raises(ValueError, match="tokens"):
        m.forward([1, VOCAB])
    with pytest.raises(ValueError, match="tokens"):
        m.forward([-1])
    with pytest.raises(ValueError, match="ids"):
        m.forward(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="ids"):
        m.forward(np.zeros(0, dtype=np.int64))
    with pytest.raises(TypeError, match="ids"):
        m.forward(np.zeros(3, dtype=np.float32))
    with pytest.raises(ValueError, match="dtype"):
        Model.load(small_dir, dtype="int8")
    other = Model.load(small_dir)
    with pytest.raises(ValueError, match="different model"):
        m.forward([1, 2], seq=other.new_sequence())
    s = m.new_sequence()
    with pytest.raises(ValueError, match="twice"):
        m.forward_batch([s, s], [[1], [2]])
    with pytest.raises((ValueError, FileNotFoundError)):
        Model.load(os.path.join(str(small_dir), "missing"))


def _permute(w, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's two rotary halves interleaved."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _converter_tensors(directory, cfg, arch):
    """The tensors convert_hf_to_gguf.py writes for the checkpoint in `directory` (gguf package names): llama's
    Q / K rows permuted, qwen3moe's experts stacked [n_expert, rows, cols] per layer."""
    import gguf
    from safetensors.numpy import load_file
    names = gguf.get_tensor_name_map(arch, cfg.num_hidden_layers)
    state = load_file(os.path.join(directory, "model.safetensors"))
    expect = {}
    for i in range(cfg.num_hidden_layers if arch == gguf.MODEL_ARCH.QWEN3MOE else 0):
        for proj, gg in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"), ("down_proj", "ffn_down_exps")):
            expect[f"blk.{i}.{gg}.weight"] = np.stack(
                [state.pop(f"model.layers.{i}.mlp.experts.{e}.{proj}.weight") for e in range(cfg.num_experts)])
    for name, data in state.items():
        if arch == gguf.MODEL_ARCH.LLAMA and name.endswith("q_proj.weight"):
            data = _permute(data, cfg.num_attention_heads)
        if arch == gguf.MODEL_ARCH.LLAMA and name.endswith("k_proj.weight"):
            data = _permute(data, cfg.num_key_value_heads)
        expect[names.get_name(name, try_suffixes=(".weight", ".bias"))] = data
    return expect


@pytest.mark.parametrize("kind", ["mistral", "qwen3_moe_every_layer"])
def test_quantize_writes_the_converters_file(kind, tmp_path):
    """`attnzoo quantize` at F32 writes Mistral as llama and Qwen3-MoE as qwen3moe, tensor for tensor what the
    converter writes (the router kept F32), with its keys, and the file's logits equal transformers'."""
    import attnzoo
    import gguf
    ref = _build(kind, tmp_path / "src")
    path = str(tmp_path / "q.gguf")
    attnzoo.quantize(tmp_path / "src", path, type="F32")
    arch = gguf.MODEL_ARCH.LLAMA if kind == "mistral" else gguf.MODEL_ARCH.QWEN3MOE
    meta = gguf_checks.check_gguf_tensors(path, _converter_tensors(tmp_path / "src", ref.config, arch))
    if kind == "mistral":
        assert meta["general.architecture"] == "llama" and "llama.expert_count" not in meta
    else:
        assert (meta["qwen3moe.expert_count"], meta["qwen3moe.expert_used_count"],
                meta["qwen3moe.expert_feed_forward_length"]) == (4, 2, 48)
        # released configs spell the count num_experts (transformers 5 writes num_local_experts): the same file
        d = edits.copy_with(tmp_path / "src", tmp_path / "released",
                            config_edit=lambda c: c.update(num_experts=c.pop("num_local_experts")))
        attnzoo.quantize(d, str(tmp_path / "r.gguf"), type="F32")
        released = gguf_checks.check_gguf_tensors(str(tmp_path / "r.gguf"), _converter_tensors(d, ref.config, arch))
        assert released["qwen3moe.expert_count"] == 4
        # the router stays F32 in a quantized file, as llama-quantize keeps ffn_gate_inp
        attnzoo.quantize(tmp_path / "src", str(tmp_path / "q8.gguf"), type="Q8_0")
        types = {t.name: t.tensor_type for t in gguf.GGUFReader(str(tmp_path / "q8.gguf")).tensors}
        assert types["blk.1.ffn_gate_inp.weight"] == gguf.GGMLQuantizationType.F32
        assert types["blk.1.ffn_gate_exps.weight"] == gguf.GGMLQuantizationType.Q8_0
    ids = _prompt()
    gguf_checks.check_gguf_logits(path, ids, checks.meaningful_logits(ref, ids), VOCAB, prefill=30)


@pytest.mark.parametrize("kind, match", [("mistral_swa", "sliding_window"), ("qwen3_moe", "mlp_only_layers")])
def test_quantize_refuses_what_gguf_cannot_hold(kind, match, tmp_path):
    import attnzoo
    _build(kind, tmp_path / "src")
    with pytest.raises(ValueError, match=match):
        attnzoo.quantize(tmp_path / "src", str(tmp_path / "q.gguf"), type="F32")


def test_yarn_added_to_a_config_extends_its_context_as_vllm_does(tmp_path):
    """Qwen's long-context recipe: a yarn rope_scaling added to a config whose max_position_embeddings stays the
    original length. The context is then original * factor (vLLM's derivation), and positions past the original
    length give transformers' logits."""
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
        num_hidden_layers=2, max_position_embeddings=32, rms_norm_eps=1e-5, initializer_range=0.1,
        attn_implementation="eager",
        rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=32))
    ref = checks.random_model("llama_yarn_long", config, _randomize, attn_implementation="eager")
    ref.save_pretrained(tmp_path, safe_serialization=True)
    m = Model.load(tmp_path)
    assert m.inspect()["max_position_embeddings"] == 128
    # `attnzoo bench model` checks the fit before loading, from the config alone, with the engine's derivation.
    from attnzoo import _core
    from attnzoo.bench.model import _check_fits
    assert _core.model_context_length(str(tmp_path)) == 128
    _check_fits(str(tmp_path), prompt=100, gen=28, prefix=0, prefix_new=0)
    with pytest.raises(ValueError, match=r"context of 128 \(max_position_embeddings, or YaRN"):
        _check_fits(str(tmp_path), prompt=100, gen=29, prefix=0, prefix_new=0)
    ids = _prompt(100)
    checks.check_full_prompt(m, ids, checks.meaningful_logits(ref.eval(), ids), VOCAB)
