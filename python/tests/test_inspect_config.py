"""`attnzoo inspect` from config.json alone.

1. For every registered architecture family, the tiny random checkpoints the model tests build: inspect on the
   config alone reports exactly the layers (kind, window, CacheSpec) and cache bytes that inspect on the full
   checkpoint reports, and the estimated parameter count equals the checkpoint's where one is estimated.
2. The published configs in configs/published: the KV / latent bytes per token, the fixed recurrent state
   and the savings against all-attention / all-MLA stacks, checked against formulas written here from the
   config values (independent arithmetic, not a call into attnzoo).

The CLI binary is $ATTNZOO_CLI, else build/attnzoo of this checkout."""
import importlib
import json
import math
import os
import shutil
import subprocess

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(ROOT, "build", "attnzoo"))
PUBLISHED = os.path.join(ROOT, "configs", "published")
CONTEXTS = (4096, 131072, 1048576)
F32 = 4

pytestmark = pytest.mark.skipif(not os.access(CLI, os.X_OK),
                                reason=f"attnzoo CLI not built at {CLI} (set ATTNZOO_CLI)")


def inspect(*args):
    r = subprocess.run([CLI, "inspect", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def inspect_json(*args):
    return json.loads(inspect(*args, "--json"))


# One checkpoint per family and config switch that changes the layers: (test module, kind).
CASES = [
    ("test_model_llama", "llama_hd32_llama3_tied"), ("test_model_llama", "llama_yarn_bias"),
    ("test_model_llama", "qwen2"), ("test_model_llama", "qwen3"), ("test_model_llama", "mistral_swa"),
    ("test_model_qwen3_next", "moe_interval"), ("test_model_qwen3_next", "dense_layer_types"),
    ("test_model_qwen3_next", "sparse_step_unnormalized"), ("test_model_qwen3_next", "qwen3_5"),
    ("test_model_kimi_linear", "moe"), ("test_model_kimi_linear", "dense_qlora"),
    ("test_model_deepseek_v3", "q_lora_yarn"), ("test_model_deepseek_v3", "plain_q"),
    ("test_model_deepseek_v2", "group_limited_yarn"), ("test_model_deepseek_v2", "greedy_plain_q"),
    ("test_model_gemma", "gemma2"), ("test_model_gemma", "gemma3"), ("test_model_gemma", "gemma3_legacy"),
    ("test_model_gemma1", "gemma_mqa_hd32"), ("test_model_olmo2", "gqa_untied"),
    ("test_model_phi3", "long_partial"), ("test_model_phi3", "short_window"), ("test_model_smollm3", "nope_every_4th"),
    ("test_model_cohere", "command_r"), ("test_model_cohere", "cohere2_swa_nope"), ("test_model_mixtral", "top2_of_4"),
    ("test_model_glm4", "partial_rope_bias"),
    ("test_model_glm4_moe", "qk_norm_grouped"), ("test_model_minimax_m2", "rotary_half_biased_routing"),
    ("test_model_ministral3", "yarn_temperature"),
    ("test_model_gpt_oss", "alternating_no_truncate"), ("test_model_gpt_oss", "layer_types_low_limit"),
    ("test_model_lfm2", "L3_gqa_tied"), ("test_model_lfm2", "L2_bias_untied"),
    ("test_model_lfm2_moe", "dense1_top2_of_4"), ("test_model_jamba", "attn_every_2nd_moe_every_2nd"),
    ("test_model_minimax", "3to1_scaled"),
    ("test_model_mamba2", "g2_conv2_bias_tied"), ("test_model_mamba2", "g2_conv3_nobias"),
    ("test_model_mamba", "mamba_n16_conv2_nobias_untied"), ("test_model_mamba", "falcon_n8_conv4_tied"),
    ("test_model_falcon_h1", "gated_norm_g2"), ("test_model_falcon_h1", "norm_before_gate_tied"),
    ("test_model_nemotron_h", "biased_grouped"), ("test_model_nemotron_h", "moe"), ("test_model_granite_hybrid", "granite_moe_rope"),
    ("test_model_granite_hybrid", "bamba"),
    ("test_model_wrappers", "qwen3_5_vl"), ("test_model_wrappers", "qwen3_5_moe"),
    ("test_model_wrappers", "gemma3_vl"), ("test_model_wrappers", "llava_llama"), ("test_model_wrappers", "mistral3"),
    ("test_model_rwkv7", "h64_hd16_2l"), ("test_model_rwkv7", "h128_hd32_3l_wide_v_tied"),
]


def _build(module, kind, directory):
    mod = importlib.import_module(module)
    if module == "test_model_wrappers":  # multimodal wrappers: only the language model is described
        import torch
        torch.manual_seed(0)
        mod._model(kind).save_pretrained(directory, safe_serialization=True)
    else:
        mod._build(kind, directory)


@pytest.mark.parametrize("module,kind", CASES, ids=[f"{m[11:]}-{k}" for m, k in CASES])
def test_config_alone_describes_the_built_model(module, kind, tmp_path):
    _build(module, kind, str(tmp_path / "full"))
    (tmp_path / "config").mkdir()
    shutil.copy(tmp_path / "full" / "config.json", tmp_path / "config" / "config.json")

    full = inspect_json("-m", str(tmp_path / "full"))
    alone = inspect_json(str(tmp_path / "config"))  # a directory without weights: config only
    by_file = inspect_json("--config", str(tmp_path / "config" / "config.json"))
    assert not full["config_only"] and alone["config_only"] and by_file["config_only"]
    assert alone["layers"] == full["layers"]
    assert by_file["layers"] == full["layers"]
    for key in ("architecture", "num_layers", "hidden_size", "vocab_size", "cache_bytes_per_token",
                "cache_bytes_at", "per_kind", "comparisons"):
        assert alone[key] == full[key], key
    if alone["parameters_estimated"]:
        assert alone["parameter_count"] == full["parameter_count"]
    else:
        assert alone["parameter_count"] is None


def test_every_family_is_covered():
    """CASES reaches every describer-backed family the model tests build (a new test_model_* needs a case)."""
    tests = {f[:-3] for f in os.listdir(os.path.dirname(__file__)) if f.startswith("test_model_") and f.endswith(".py")}
    assert tests <= {m for m, _ in CASES}, tests - {m for m, _ in CASES}


def _blocks(tokens, block=256):
    return math.ceil(tokens / block) * block


def _kimi():
    with open(os.path.join(PUBLISHED, "kimi-linear-48b-a3b-instruct.json")) as f:
        return json.load(f)


def _qwen3_next():
    with open(os.path.join(PUBLISHED, "qwen3-next-80b-a3b-instruct.json")) as f:
        return json.load(f)


def test_kimi_linear_published_config():
    c = _kimi()
    la = c["linear_attn_config"]
    n = c["num_hidden_layers"]
    mla_layers, kda_layers = len(la["full_attn_layers"]), len(la["kda_layers"])
    assert (mla_layers, kda_layers, n) == (7, 20, 27)
    # MLA keeps one latent [kv_lora_rank + qk_rope_head_dim] per token; KDA a [H, K, K] state plus the conv
    # tails of q, k and v ([3 H K, W - 1]); everything f32 in this engine.
    latent = (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * F32
    kda_state = (la["num_heads"] * la["head_dim"] ** 2 + 3 * la["num_heads"] * la["head_dim"] *
                 (la["short_conv_kernel_size"] - 1)) * F32
    per_token = mla_layers * latent
    fixed = kda_layers * kda_state

    got = inspect_json("--config", os.path.join(PUBLISHED, "kimi-linear-48b-a3b-instruct.json"))
    assert got["architecture"] == "KimiLinearForCausalLM"
    assert got["cache_bytes_per_token"] == per_token == 7 * 576 * 4
    kinds = {k["label"]: k for k in got["per_kind"]}
    assert kinds["mla [latent]"]["layers"] == 7 and kinds["mla [latent]"]["bytes_per_token"] == per_token
    assert kinds["linear_attention [state]"]["layers"] == 20
    assert kinds["linear_attention [state]"]["fixed_bytes"] == fixed
    for t in CONTEXTS:
        assert got["cache_bytes_at"][str(t)] == fixed + per_token * _blocks(t)

    # "75% less KV cache": against the same 27 layers all MLA, per token 1 - 7/27.
    all_mla = got["comparisons"]["all_mla"]
    assert all_mla["stack"]["bytes_per_token"] == n * latent
    assert got["comparisons"]["all_mla"]["saving_percent_per_token"] == pytest.approx(100 * (1 - 7 / 27))
    for t in CONTEXTS:
        want = 100 * (1 - (fixed + per_token * t) / (n * latent * t))
        assert all_mla["saving_percent_at"][str(t)] == pytest.approx(want)
    # All MHA: the MLA heads uncompressed, K (nope + rope) and V per head.
    mha = (c["num_attention_heads"] * (c["qk_nope_head_dim"] + c["qk_rope_head_dim"] + c["v_head_dim"])) * F32
    all_att = got["comparisons"]["all_attention"]
    assert all_att["stack"]["bytes_per_token"] == n * mha
    assert all_att["saving_percent_per_token"] == pytest.approx(100 * (1 - per_token / (n * mha)))
    # The estimate lands on the name: 48B total.
    assert got["parameters_estimated"] and 47e9 < got["parameter_count"] < 50e9


def test_qwen3_next_published_config():
    c = _qwen3_next()
    n = c["num_hidden_layers"]
    full = sum(1 for i in range(n) if (i + 1) % c["full_attention_interval"] == 0)
    linear = n - full
    assert (full, linear) == (12, 36)
    assert c["torch_dtype"] == "bfloat16"  # so the default ("auto") holds bf16 weights and a bf16 KV cache
    kv = 2 * c["num_key_value_heads"] * c["head_dim"] * 2
    hk, hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, w = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
    gdn = (hv * dk * dv + (2 * hk * dk + hv * dv) * (w - 1)) * F32
    per_token, fixed = full * kv, linear * gdn

    got = inspect_json("--config", os.path.join(PUBLISHED, "qwen3-next-80b-a3b-instruct.json"))
    assert got["cache_bytes_per_token"] == per_token == 12 * 2 * 2 * 256 * 2
    assert got["formats"]["kv_cache_reason"] == "follows the bf16 weights"
    kinds = {k["label"]: k for k in got["per_kind"]}
    assert kinds["attention [kv]"]["layers"] == 12
    assert kinds["linear_attention [state]"]["fixed_bytes"] == fixed
    for t in CONTEXTS:
        assert got["cache_bytes_at"][str(t)] == fixed + per_token * _blocks(t)
    all_att = got["comparisons"]["all_attention"]
    assert all_att["stack"]["bytes_per_token"] == n * kv
    assert all_att["saving_percent_per_token"] == pytest.approx(75.0)
    for t in CONTEXTS:
        assert all_att["saving_percent_at"][str(t)] == pytest.approx(100 * (1 - (fixed + per_token * t) / (n * kv * t)))
    assert "all_mla" not in got["comparisons"]
    assert got["parameters_estimated"] and 78e9 < got["parameter_count"] < 83e9


def test_sliding_window_layers_are_sized_by_their_window(tmp_path):
    """A 5:1 Gemma 3 (five sliding layers with a 32-token window, then a full one): inspect on the checkpoint and
    on its config alone counts each sliding layer at the blocks the pool keeps for it (those covering its window,
    plus the one it starts inside) and the full layer at the context, written out here from the config."""
    _build("test_model_gemma", "gemma3_5to1", str(tmp_path / "full"))
    (tmp_path / "config").mkdir()
    shutil.copy(tmp_path / "full" / "config.json", tmp_path / "config" / "config.json")
    with open(tmp_path / "config" / "config.json") as f:
        c = json.load(f)
    per_token = 2 * c["num_key_value_heads"] * c["head_dim"] * F32
    window = c["sliding_window"]
    for args in (["-m", str(tmp_path / "full")], ["--config", str(tmp_path / "config" / "config.json")],
                 ["--config", str(tmp_path / "config" / "config.json"), "--block-size", "8"]):
        got = inspect_json(*args)
        block = got["block_tokens"]
        kinds = {k["label"]: k for k in got["per_kind"]}
        sliding, full = kinds[f"sliding_attention (window {window}) [kv_window]"], kinds["attention [kv]"]
        assert (sliding["layers"], full["layers"]) == (5, 1)
        held = (math.ceil(window / block) + 1) * block
        for t in CONTEXTS:
            assert sliding["bytes_at"][str(t)] == 5 * per_token * min(_blocks(t, block), held)
            assert full["bytes_at"][str(t)] == per_token * _blocks(t, block)
            assert got["cache_bytes_at"][str(t)] == sliding["bytes_at"][str(t)] + full["bytes_at"][str(t)]
        assert sliding["bytes_at"]["131072"] < full["bytes_at"]["131072"] / 100


def _published(name):
    with open(os.path.join(PUBLISHED, name)) as f:
        return json.load(f)


@pytest.mark.parametrize("name", ["gemma-7b.json", "olmo-2-1124-7b.json", "smollm3-3b.json",
                                  "mixtral-8x7b-v0.1.json", "glm-4-9b-0414.json", "glm-4.5-air.json",
                                  "minimax-m2.json"])
def test_dense_published_configs(name):
    """Full-attention stacks: K and V of every kv head of every layer per token, f32."""
    c = _published(name)
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    per_token = c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * head_dim * F32
    got = inspect_json("--config", os.path.join(PUBLISHED, name))
    assert got["architecture"] == c["architectures"][0]
    assert [x["kind"] for x in got["layers"]] == ["attention"] * c["num_hidden_layers"]
    assert got["cache_bytes_per_token"] == per_token
    for t in CONTEXTS:
        assert got["cache_bytes_at"][str(t)] == per_token * _blocks(t)
    if name.startswith("olmo"):  # 7B by its name; the count transformers' Olmo2 modules hold is 7.30e9
        assert got["parameters_estimated"] and 7.2e9 < got["parameter_count"] < 7.4e9
    if name.startswith("mixtral"):  # 46.7B by its model card
        assert got["parameters_estimated"] and 46.6e9 < got["parameter_count"] < 46.8e9
    if name.startswith("glm-4.5-air"):  # 106B total by its model card
        assert got["parameters_estimated"] and 106e9 < got["parameter_count"] < 107e9
    if name.startswith("minimax-m2"):  # 230B total by its model card
        assert got["parameters_estimated"] and 228e9 < got["parameter_count"] < 231e9


def test_conv_hybrid_published_configs():
    """LFM2-8B-A1B (6 attention layers among 18 short convolutions, each holding its last conv_L_cache - 1 inputs)
    and Jamba-v0.1 (an attention layer every 8th, Mamba-1 elsewhere: conv tail and [inner, d_state] state per
    layer): KV bytes per token of the attention layers and the fixed state of the others, f32. Jamba's estimate is
    its model card's 52B total."""
    lfm = _published("lfm2-8b-a1b.json")
    got = inspect_json("--config", os.path.join(PUBLISHED, "lfm2-8b-a1b.json"))
    attn = [t == "full_attention" for t in lfm["layer_types"]]
    assert [x["kind"] for x in got["layers"]] == ["attention" if a else "short_conv" for a in attn]
    head_dim = lfm["hidden_size"] // lfm["num_attention_heads"]
    assert got["cache_bytes_per_token"] == sum(attn) * 2 * lfm["num_key_value_heads"] * head_dim * F32
    assert sum(x["cache"]["fixed_bytes"] for x in got["layers"]) == \
        (len(attn) - sum(attn)) * lfm["hidden_size"] * (lfm["conv_L_cache"] - 1) * F32
    jamba = _published("jamba-v0.1.json")
    got = inspect_json("--config", os.path.join(PUBLISHED, "jamba-v0.1.json"))
    n, period, offset = jamba["num_hidden_layers"], jamba["attn_layer_period"], jamba["attn_layer_offset"]
    assert [x["kind"] for x in got["layers"]] == ["attention" if i % period == offset else "mamba" for i in range(n)]
    head_dim = jamba["hidden_size"] // jamba["num_attention_heads"]
    assert got["cache_bytes_per_token"] == (n // period) * 2 * jamba["num_key_value_heads"] * head_dim * F32
    inner = jamba["mamba_expand"] * jamba["hidden_size"]
    assert sum(x["cache"]["fixed_bytes"] for x in got["layers"]) == \
        (n - n // period) * inner * (jamba["mamba_d_conv"] - 1 + jamba["mamba_d_state"]) * F32
    assert got["parameters_estimated"] and 51.4e9 < got["parameter_count"] < 51.8e9


def test_minimax_published_config():
    """MiniMax-M1 (MiniMax-Text-01's layout): a softmax layer every 8th, lightning attention with an [H, D, D] f32
    state elsewhere; the estimate is the model cards' 456B total."""
    c = _published("minimax-m1.json")
    got = inspect_json("--config", os.path.join(PUBLISHED, "minimax-m1.json"))
    softmax = [t == "full_attention" for t in c["layer_types"]]
    assert sum(softmax) == 10 and softmax[7] and softmax[79]
    assert [x["kind"] for x in got["layers"]] == ["attention" if s else "lightning_attention" for s in softmax]
    assert got["cache_bytes_per_token"] == 10 * 2 * c["num_key_value_heads"] * c["head_dim"] * F32
    state = c["num_attention_heads"] * c["head_dim"] ** 2 * F32
    assert [x["cache"]["fixed_bytes"] for x in got["layers"]] == [0 if s else state for s in softmax]
    assert got["parameters_estimated"] and 455.5e9 < got["parameter_count"] < 456.5e9


def test_nemotron_h_published_config():
    """NVIDIA-Nemotron-Nano-9B-v2: the pattern's 4 attention layers hold K and V per token, its 27 Mamba-2 layers a
    fixed conv tail and SSM state, its 25 MLP layers nothing."""
    c = _published("nvidia-nemotron-nano-9b-v2.json")
    pattern = c["hybrid_override_pattern"]
    assert (pattern.count("*"), pattern.count("M"), pattern.count("-")) == (4, 27, 25)
    got = inspect_json("--config", os.path.join(PUBLISHED, "nvidia-nemotron-nano-9b-v2.json"))
    names = {"M": "mamba2", "*": "attention", "-": "mlp"}
    assert [x["kind"] for x in got["layers"]] == [names[p] for p in pattern]
    per_token = 4 * 2 * c["num_key_value_heads"] * c["head_dim"] * F32
    heads, p, n, g = c["mamba_num_heads"], c["mamba_head_dim"], c["ssm_state_size"], c["n_groups"]
    fixed = 27 * ((heads * p + 2 * g * n) * (c["conv_kernel"] - 1) + heads * p * n) * F32
    assert got["cache_bytes_per_token"] == per_token
    block = got["block_tokens"]
    for t in CONTEXTS:
        assert got["cache_bytes_at"][str(t)] == fixed + per_token * _blocks(t, block)
    assert got["parameters_estimated"] and 8.85e9 < got["parameter_count"] < 8.93e9  # "8.89B" by its model card


@pytest.mark.parametrize("name", ["granite-4.0-h-tiny.json", "bamba-9b.json"])
def test_granite_hybrid_published_configs(name):
    """Granite 4.0-H-Tiny (layer_types) and Bamba-9B (attn_layer_indices): K and V per token for the attention
    layers, a conv tail and SSM state per Mamba-2 layer."""
    c = _published(name)
    n = c["num_hidden_layers"]
    attn = [i for i, t in enumerate(c["layer_types"]) if t == "attention"] if "layer_types" in c \
        else c["attn_layer_indices"]
    assert attn == ([5, 15, 25, 35] if name.startswith("granite") else [9, 18, 27])
    got = inspect_json("--config", os.path.join(PUBLISHED, name))
    assert [x["kind"] for x in got["layers"]] == ["attention" if i in attn else "mamba2" for i in range(n)]
    head_dim = c["hidden_size"] // c["num_attention_heads"]
    per_token = len(attn) * 2 * c["num_key_value_heads"] * head_dim * F32
    heads, p, s, g = c["mamba_n_heads"], c["mamba_d_head"], c["mamba_d_state"], c["mamba_n_groups"]
    fixed = (n - len(attn)) * ((heads * p + 2 * g * s) * (c["mamba_d_conv"] - 1) + heads * p * s) * F32
    assert got["cache_bytes_per_token"] == per_token
    for t in CONTEXTS:
        assert got["cache_bytes_at"][str(t)] == fixed + per_token * _blocks(t, got["block_tokens"])
    # by name: granite-4.0-h-tiny is "7B" (6.9B listed), Bamba-9B the "9.8b" of ibm-fms/Bamba-9.8b-2.2T-hf
    low, high = (6.9e9, 7.0e9) if name.startswith("granite") else (9.7e9, 9.85e9)
    assert got["parameters_estimated"] and low < got["parameter_count"] < high


def test_nemotron_3_nano_published_config():
    """NVIDIA-Nemotron-3-Nano-30B-A3B: 6 attention layers (bf16 K and V, following its bf16 weights), 23 Mamba-2
    layers (f32 state) and 23 MoE layers holding nothing."""
    c = _published("nvidia-nemotron-3-nano-30b-a3b.json")
    pattern = c["hybrid_override_pattern"]
    got = inspect_json("--config", os.path.join(PUBLISHED, "nvidia-nemotron-3-nano-30b-a3b.json"))
    names = {"M": "mamba2", "*": "attention", "E": "moe"}
    assert [x["kind"] for x in got["layers"]] == [names[p] for p in pattern]
    per_token = pattern.count("*") * 2 * c["num_key_value_heads"] * c["head_dim"] * 2  # bf16
    heads, p, n, g = c["mamba_num_heads"], c["mamba_head_dim"], c["ssm_state_size"], c["n_groups"]
    fixed = pattern.count("M") * ((heads * p + 2 * g * n) * (c["conv_kernel"] - 1) + heads * p * n) * F32
    assert got["cache_bytes_per_token"] == per_token
    for t in CONTEXTS:
        assert got["cache_bytes_at"][str(t)] == fixed + per_token * _blocks(t, got["block_tokens"])
    assert got["parameters_estimated"] and 31.5e9 < got["parameter_count"] < 31.7e9  # "31.6B" total by its card


def test_phi3_published_config():
    """Phi-3-mini-4k: every layer windowed at sliding_window; the estimate equals the 3,821,079,552 parameters
    keras-hub's Phi-3 presets record for the checkpoint."""
    c = _published("phi-3-mini-4k-instruct.json")
    got = inspect_json("--config", os.path.join(PUBLISHED, "phi-3-mini-4k-instruct.json"))
    assert [(x["kind"], x["window"]) for x in got["layers"]] == [("sliding_attention", c["sliding_window"])] * 32
    assert got["parameters_estimated"] and got["parameter_count"] == 3821079552


def test_gpt_oss_published_config():
    """gpt-oss-20b: sliding layers (window 128) alternating with full ones, from the first; K and V of 8 kv heads of
    64 per layer and token, in bf16 (its MXFP4 experts make it a block-quantized model, whose "auto" cache is 16-bit);
    20.9B parameters, the model card's 21B (the MXFP4 checkpoint stores the same values)."""
    c = _published("gpt-oss-20b.json")
    got = inspect_json("--config", os.path.join(PUBLISHED, "gpt-oss-20b.json"))
    assert [(x["kind"], x["window"]) for x in got["layers"]] == [("sliding_attention", 128), ("attention", 0)] * 12
    assert got["formats"]["kv_cache_dtype"] == "bfloat16" and "MXFP4" in got["formats"]["checkpoint"]
    assert got["cache_bytes_per_token"] == c["num_hidden_layers"] * 2 * 8 * 64 * 2
    assert got["parameters_estimated"] and got["parameter_count"] == 20914757184


def test_ministral3_published_config():
    """Ministral-3-8B, published as the Mistral 3 multimodal wrapper: its ministral3 text model sized from
    text_config (full attention everywhere, no window); the estimate counts the language model alone, the 8.4B the
    model card gives it."""
    t = _published("ministral-3-8b-instruct-2512.json")["text_config"]
    per_token = t["num_hidden_layers"] * 2 * t["num_key_value_heads"] * t["head_dim"] * F32
    got = inspect_json("--config", os.path.join(PUBLISHED, "ministral-3-8b-instruct-2512.json"))
    assert got["architecture"] == "Mistral3ForConditionalGeneration"
    assert [(x["kind"], x["window"]) for x in got["layers"]] == [("attention", 0)] * t["num_hidden_layers"]
    assert got["cache_bytes_per_token"] == per_token
    assert got["parameters_estimated"] and 8.3e9 < got["parameter_count"] < 8.6e9


@pytest.mark.parametrize("name,total", [("deepseek-v3.json", 671e9), ("deepseek-v2-lite.json", 15.7e9)])
def test_deepseek_published_configs(name, total):
    """DeepSeek-V3 and V2-Lite: every layer MLA with one latent [kv_lora_rank + qk_rope_head_dim] per token (f32);
    the estimate lands on the model card's total (671B without V3's multi-token-prediction layer, 15.7B)."""
    c = _published(name)
    got = inspect_json("--config", os.path.join(PUBLISHED, name))
    assert got["architecture"] == c["architectures"][0]
    assert [x["kind"] for x in got["layers"]] == ["mla"] * c["num_hidden_layers"]
    assert got["cache_bytes_per_token"] == c["num_hidden_layers"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * F32
    assert got["parameters_estimated"] and abs(got["parameter_count"] / total - 1) < 0.005


def test_text_report_and_errors(tmp_path):
    text = inspect("--config", os.path.join(PUBLISHED, "kimi-linear-48b-a3b-instruct.json"))
    assert "config only" in text and "same stack, all MLA" in text and "74.1% less per token" in text
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"architectures": ["NopeForCausalLM"]}))
    r = subprocess.run([CLI, "inspect", "--config", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "NopeForCausalLM" in r.stderr
    r = subprocess.run([CLI, "inspect", "--config", str(tmp_path / "missing.json")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "missing.json" in r.stderr


@pytest.mark.parametrize("kind", ["int8", "fp8"])
def test_quantized_kv_cache_bytes(kind):
    """--kv-cache-dtype int8 / fp8: one byte per cached value plus one float32 scale per token and kv head (an MLA
    latent row has one head), written out here from the config."""
    c = _kimi()
    latent = c["kv_lora_rank"] + c["qk_rope_head_dim"] + F32
    path = os.path.join(PUBLISHED, "kimi-linear-48b-a3b-instruct.json")
    got = inspect_json("--config", path, "--kv-cache-dtype", kind)
    assert got["cache_bytes_per_token"] == 7 * latent == 7 * 580
    full = inspect_json("--config", path, "--kv-cache-dtype", "bfloat16")
    assert full["cache_bytes_per_token"] == 7 * 576 * 2
