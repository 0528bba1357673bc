"""Every architecture the registry knows, on a tiny random transformers checkpoint (from_config, save_pretrained,
attnzoo's Model.load), compared on the logits of one short prompt with transformers' eager float32 forward; the
checkpoints given with -m likewise (GGUF files through transformers' GGUF loader), and llama.cpp's
llama-perplexity against Model.perplexity when its path is given."""
import os
import re
import subprocess
import tempfile

import numpy as np

from . import Missing, check, compare, failed, require, skipped

AREA = "models"
REF = "transformers (eager, float32)"
VOCAB, PROMPT = 128, 12
ATOL = 1e-4  # the model tests' bound on f32 checkpoints (python/tests/model_checks.py)

_DENSE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.1)
_IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
_MOE = dict(moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2)
_QWEN_LINEAR = dict(_DENSE, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4, linear_conv_kernel_dim=4,
                    linear_key_head_dim=16, linear_value_head_dim=16, full_attention_interval=2)
_QWEN_VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=4,
                    temporal_patch_size=2, spatial_merge_size=2)
_CLIP = dict(model_type="clip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=1,
             num_attention_heads=2, image_size=28, patch_size=14)
_PIXTRAL = dict(model_type="pixtral", hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                image_size=28, patch_size=14, head_dim=16)
_SIGLIP = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
               patch_size=14)
_MAMBA2 = dict(vocab_size=VOCAB, hidden_size=32, num_heads=4, head_dim=16, state_size=8, n_groups=1, conv_kernel=4,
               num_hidden_layers=2, chunk_size=32)

# architecture -> (config class, its keyword arguments). A new registry entry without a line here is a failing
# row, so that the report never silently leaves an architecture out.
CONFIGS = {
    "LlamaForCausalLM": ("LlamaConfig", _DENSE),
    "MistralForCausalLM": ("MistralConfig", dict(_DENSE, sliding_window=8)),
    "MixtralForCausalLM": ("MixtralConfig", dict(_DENSE, num_local_experts=4, num_experts_per_tok=2)),
    "Qwen2ForCausalLM": ("Qwen2Config", _DENSE),
    "Qwen3ForCausalLM": ("Qwen3Config", dict(_DENSE, head_dim=16)),
    "Qwen3MoeForCausalLM": ("Qwen3MoeConfig", dict(_DENSE, head_dim=16, norm_topk_prob=True, **_MOE)),
    "SmolLM3ForCausalLM": ("SmolLM3Config", dict(_DENSE, **_IDS)),
    "GemmaForCausalLM": ("GemmaConfig", dict(_DENSE, head_dim=16)),
    "Gemma2ForCausalLM": ("Gemma2Config", dict(_DENSE, head_dim=16, sliding_window=8, query_pre_attn_scalar=16)),
    "Gemma3ForCausalLM": ("Gemma3TextConfig", dict(_DENSE, head_dim=16, sliding_window=8, query_pre_attn_scalar=16)),
    "Gemma3ForConditionalGeneration": ("Gemma3Config", dict(
        text_config=dict(_DENSE, head_dim=16, sliding_window=8, query_pre_attn_scalar=16), vision_config=_SIGLIP,
        mm_tokens_per_image=4)),
    "Glm4ForCausalLM": ("Glm4Config", dict(_DENSE, head_dim=16, **_IDS)),
    "Glm4MoeForCausalLM": ("Glm4MoeConfig", dict(
        _DENSE, num_hidden_layers=3, head_dim=16, attention_bias=True, use_qk_norm=True, moe_intermediate_size=32,
        n_routed_experts=4, num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1, first_k_dense_replace=1,
        norm_topk_prob=True, routed_scaling_factor=2.0, tie_word_embeddings=False, pad_token_id=0,
        rope_parameters=dict(rope_type="default", rope_theta=500.0, partial_rotary_factor=0.5))),
    "MiniMaxM2ForCausalLM": ("MiniMaxM2Config", dict(
        _DENSE, intermediate_size=32, head_dim=16, rotary_dim=8, num_local_experts=4, num_experts_per_tok=2,
        tie_word_embeddings=False, rope_theta=500.0, **_IDS)),
    "Ministral3ForCausalLM": ("Ministral3Config", dict(
        _DENSE, head_dim=16, max_position_embeddings=64, tie_word_embeddings=False, **_IDS,
        rope_parameters=dict(rope_type="yarn", rope_theta=1000.0, factor=4.0, original_max_position_embeddings=16,
                             beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0, llama_4_scaling_beta=0.1))),
    "Olmo2ForCausalLM": ("Olmo2Config", dict(_DENSE, **_IDS)),
    "Phi3ForCausalLM": ("Phi3Config", dict(_DENSE, **_IDS)),
    "CohereForCausalLM": ("CohereConfig", dict(_DENSE, logit_scale=0.5, **_IDS)),
    "Cohere2ForCausalLM": ("Cohere2Config", dict(_DENSE, logit_scale=0.5, sliding_window=8, **_IDS)),
    "GptOssForCausalLM": ("GptOssConfig", dict(_DENSE, head_dim=16, intermediate_size=32, num_local_experts=4,
                                               num_experts_per_tok=2, sliding_window=8, tie_word_embeddings=False)),
    "DeepseekV3ForCausalLM": ("DeepseekV3Config", dict(
        _DENSE, num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_group=1,
        topk_group=1, kv_lora_rank=32, q_lora_rank=None, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
        first_k_dense_replace=1)),
    "DeepseekV2ForCausalLM": ("DeepseekV2Config", dict(
        _DENSE, num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        n_shared_experts=1, topk_method="group_limited_greedy", n_group=2, topk_group=1, kv_lora_rank=32,
        q_lora_rank=None, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, first_k_dense_replace=1)),
    "KimiLinearForCausalLM": ("KimiLinearConfig", dict(
        _DENSE, num_key_value_heads=4, kv_lora_rank=32, q_lora_rank=None, qk_nope_head_dim=16, qk_rope_head_dim=8,
        v_head_dim=16, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2, n_group=2, topk_group=1,
        n_shared_experts=1, first_k_dense_replace=1, tie_word_embeddings=False,
        linear_attn_config=dict(head_dim=16, num_heads=4, short_conv_kernel_size=4, kda_layers=[1],
                                full_attn_layers=[2]), **_IDS)),
    "Qwen3NextForCausalLM": ("Qwen3NextConfig", dict(_QWEN_LINEAR, shared_expert_intermediate_size=48,
                                                     norm_topk_prob=True, **_MOE)),
    "Qwen3_5ForCausalLM": ("Qwen3_5TextConfig", _QWEN_LINEAR),
    "Qwen3_5MoeForCausalLM": ("Qwen3_5MoeTextConfig", dict(_QWEN_LINEAR, shared_expert_intermediate_size=48, **_MOE)),
    "Qwen3_5ForConditionalGeneration": ("Qwen3_5Config", dict(text_config=_QWEN_LINEAR, vision_config=_QWEN_VISION)),
    "Qwen3_5MoeForConditionalGeneration": ("Qwen3_5MoeConfig", dict(
        text_config=dict(_QWEN_LINEAR, shared_expert_intermediate_size=48, **_MOE), vision_config=_QWEN_VISION)),
    "LlavaForConditionalGeneration": ("LlavaConfig", dict(text_config=dict(_DENSE, model_type="llama"),
                                                          vision_config=_CLIP)),
    "Mistral3ForConditionalGeneration": ("Mistral3Config", dict(
        text_config=dict(_DENSE, model_type="mistral", sliding_window=8), vision_config=_PIXTRAL)),
    "MambaForCausalLM": ("MambaConfig", dict(vocab_size=VOCAB, hidden_size=32, state_size=8, conv_kernel=4, expand=2,
                                             num_hidden_layers=2, pad_token_id=0)),
    "FalconMambaForCausalLM": ("FalconMambaConfig", dict(vocab_size=VOCAB, hidden_size=32, state_size=8,
                                                         conv_kernel=4, expand=2, num_hidden_layers=2, pad_token_id=0,
                                                         mixer_rms_eps=1e-5)),
    "Mamba2ForCausalLM": ("Mamba2Config", _MAMBA2),
    "Lfm2ForCausalLM": ("Lfm2Config", dict(_DENSE, intermediate_size=192, block_multiple_of=32, conv_L_cache=3,
                                           layer_types=["conv", "full_attention"])),
    "Lfm2MoeForCausalLM": ("Lfm2MoeConfig", dict(_DENSE, conv_L_cache=3, num_dense_layers=1,
                                                 layer_types=["conv", "full_attention"], **_MOE)),
    "MiniMaxForCausalLM": ("MiniMaxConfig", dict(_DENSE, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                                                 layer_types=["linear_attention", "full_attention"], block_size=4,
                                                 mlp_alpha_factor=1.5, linear_attn_alpha_factor=1.2)),
    "JambaForCausalLM": ("JambaConfig", dict(_DENSE, num_experts=4, num_experts_per_tok=2, attn_layer_period=2,
                                             attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=0,
                                             mamba_d_state=8, mamba_dt_rank=8)),
    "FalconH1ForCausalLM": ("FalconH1Config", dict(
        _DENSE, hidden_size=32, intermediate_size=64, mamba_d_ssm=64, mamba_n_heads=4, mamba_d_head=16,
        mamba_n_groups=2, mamba_d_state=8, mamba_d_conv=4, mamba_chunk_size=32)),
    "NemotronHForCausalLM": ("NemotronHConfig", dict(
        _DENSE, hybrid_override_pattern="M-*", head_dim=16, mamba_num_heads=4, mamba_head_dim=16, n_groups=2,
        ssm_state_size=8, chunk_size=32)),
    "GraniteMoeHybridForCausalLM": ("GraniteMoeHybridConfig", dict(
        _DENSE, layer_types=["mamba", "attention"], intermediate_size=32, shared_intermediate_size=48,
        num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=2.0, residual_multiplier=0.5,
        attention_multiplier=0.25, logits_scaling=2.0, mamba_n_heads=4, mamba_d_head=32, mamba_n_groups=2,
        mamba_d_state=8, mamba_chunk_size=32)),
    "BambaForCausalLM": ("BambaConfig", dict(
        _DENSE, attn_layer_indices=[1], mamba_n_heads=4, mamba_d_head=32, mamba_n_groups=2, mamba_d_state=8,
        mamba_chunk_size=32)),
}
# Architectures whose reference is not a transformers class.
NOT_IN_TRANSFORMERS = {
    "RWKV7ForCausalLM": "RWKV-7 is flash-linear-attention's format; transformers has no RWKV7ForCausalLM and fla's "
                        "model classes need triton (python/tests/test_model_rwkv7.py checks it against a torch "
                        "restatement of fla's model)",
}


def _randomize(torch, model):
    """Moves the parameters that start at constants (norms, biases, D, dt_bias) so that they are exercised, and
    spreads A_log's decays over (0, 1)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.empty_like(p).uniform_(0.05, 1.0).log())
            elif p.ndim == 1:
                p.copy_((1.0 if "norm" in name and "gemma" not in type(model).__name__.lower() else 0.0)
                        + 0.2 * torch.randn_like(p))


def _eager(config):
    config._attn_implementation = "eager"
    for sub in ("text_config", "vision_config"):
        if getattr(config, sub, None) is not None:
            getattr(config, sub)._attn_implementation = "eager"


def _logits(torch, model, ids):
    with torch.no_grad():
        return model(torch.from_numpy(ids)[None]).logits[0].float().numpy()


def architecture_row(arch, torch, transformers, tmp):
    """One architecture's row: tiny random checkpoint, attnzoo's logits against transformers'."""
    from attnzoo.model import Model
    compared = f"{arch}: logits of a {PROMPT}-token prompt, tiny random checkpoint"
    if arch in NOT_IN_TRANSFORMERS:
        return skipped(AREA, arch, compared, REF, f"skipped: {NOT_IN_TRANSFORMERS[arch]}")
    if arch not in CONFIGS:
        return failed(AREA, arch, compared, REF, "no tiny configuration for this architecture in "
                      "attnzoo/conformance/models.py (add one)")
    config_name, kwargs = CONFIGS[arch]
    cls, config_cls = getattr(transformers, arch, None), getattr(transformers, config_name, None)
    if cls is None or config_cls is None:
        return skipped(AREA, arch, compared, REF, f"skipped: transformers {transformers.__version__} has no "
                       f"{arch if cls is None else config_name}")
    torch.manual_seed(sum(map(ord, arch)))
    config = config_cls(**kwargs)
    _eager(config)
    model = cls(config).eval()
    _randomize(torch, model)
    directory = os.path.join(tmp, arch)
    model.save_pretrained(directory, safe_serialization=True)
    ids = np.random.default_rng(0).integers(3, VOCAB, size=PROMPT).astype(np.int64)
    return compare(AREA, arch, compared, REF, Model.load(directory).forward(ids), _logits(torch, model, ids), ATOL,
                   relative=False)


@check(AREA, ["architectures"])
def architectures(ctx):
    from attnzoo import _core
    archs = _core.supported_architectures()
    try:
        torch = require("torch")
        transformers = require("transformers")
    except Missing as e:
        return [skipped(AREA, a, f"{a}: logits of a tiny random checkpoint", REF, f"skipped: {e}") for a in archs]
    if hasattr(transformers.utils.logging, "disable_progress_bar"):
        transformers.utils.logging.disable_progress_bar()  # save_pretrained's shard bar, once per architecture
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for arch in archs:
            if ctx.progress:
                ctx.progress(f"  {arch}")
            try:
                rows.append(architecture_row(arch, torch, transformers, tmp))
            except Exception as e:  # one architecture's failure is its row, the others still run
                rows.append(failed(AREA, arch, f"{arch}: logits of a tiny random checkpoint", REF,
                                   f"{type(e).__name__}: {str(e)[:300]}"))
    return rows


def _gguf_files(path):
    if os.path.isdir(path):
        return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".gguf"))
    return [path] if path.endswith(".gguf") else []


@check(AREA, ["checkpoints (-m)"])
def checkpoints(ctx):
    if not ctx.models:
        return [skipped(AREA, "checkpoints (-m)", "given checkpoints", REF, "skipped: no checkpoint given (-m PATH)")]
    torch, transformers = require("torch"), require("transformers")
    import attnzoo
    from attnzoo.model import Model
    rows = []
    for path in ctx.models:
        compared = f"{path}: logits of a 16-token prompt"
        try:
            gguf = _gguf_files(path)
            if gguf:
                kw = dict(gguf_file=os.path.basename(gguf[0]))
                directory = os.path.dirname(os.path.abspath(gguf[0]))
            else:
                kw, directory = {}, path
            ref = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                                                    attn_implementation="eager", **kw).eval()
            previous = attnzoo.get_float32_matmul_precision()
            attnzoo.set_float32_matmul_precision("highest")
            try:
                m = Model.load(gguf[0] if gguf else path, kv_cache_dtype="float32")
                ids = np.random.default_rng(0).integers(3, min(m.vocab_size, ref.config.vocab_size),
                                                        size=16).astype(np.int64)
                got = m.forward(ids)
            finally:
                attnzoo.set_float32_matmul_precision(previous)
            # Real checkpoints hold bf16 / quantized weights: both sides run on the same (dequantized) values, so
            # the bound is relative to the logits' scale rather than the f32 tests' absolute 1e-4.
            rows.append(compare(AREA, "checkpoints (-m)", compared, REF + (" GGUF loader" if gguf else ""), got,
                                _logits(torch, ref, ids), 1e-3))
        except Exception as e:
            rows.append(failed(AREA, "checkpoints (-m)", compared, REF, f"{type(e).__name__}: {str(e)[:300]}"))
    return rows


@check(AREA, ["llama.cpp perplexity"])
def llama_perplexity(ctx):
    family, ref = "llama.cpp perplexity", "llama.cpp llama-perplexity"
    if not ctx.llama_perplexity:
        return [skipped(AREA, family, "Model.perplexity vs llama-perplexity", ref,
                        "skipped: llama-perplexity not given (--llama-perplexity PATH, with a GGUF given by -m)")]
    files = [f for p in ctx.models for f in _gguf_files(p)]
    if not files:
        return [skipped(AREA, family, "Model.perplexity vs llama-perplexity", ref,
                        "skipped: no GGUF checkpoint given with -m")]
    from attnzoo import perplexity
    from attnzoo.model import Model
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        text_path = os.path.join(tmp, "text.txt")
        try:
            with open(perplexity.default_text(), encoding="utf-8") as f:
                text = f.read()[:20000 if ctx.quick else 200000]
        except FileNotFoundError as e:
            raise Missing(str(e)) from None
        with open(text_path, "w", encoding="utf-8") as f:
            f.write(text)
        for path in files:
            compared = f"{os.path.basename(path)}: perplexity, n_ctx 128"
            r = subprocess.run([ctx.llama_perplexity, "-m", path, "-f", text_path, "-c", "128", "-b", "128"],
                               capture_output=True, text=True)
            found = re.search(r"Final estimate: PPL = ([0-9.]+)", r.stdout + r.stderr)
            if r.returncode or not found:
                rows.append(failed(AREA, family, compared, ref, f"llama-perplexity exited {r.returncode} without "
                                   f"a final estimate: {(r.stderr or r.stdout)[-300:]}"))
                continue
            want = float(found.group(1))
            got = Model.load(path).perplexity(text, n_ctx=128).ppl
            rows.append(compare(AREA, family, compared, ref, np.array([got]), np.array([want]), 1e-2))
    return rows
