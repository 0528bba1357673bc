"""Multimodal wrappers (Qwen3.5, Gemma 3, LLaVA, Mistral 3 "ForConditionalGeneration") and Qwen3.5-MoE: real checkpoints of these
families ship as the wrapper, with the language model under model.language_model.* beside a vision tower. attnzoo
runs their language model; text-only prompts must give transformers' logits for the whole wrapper (float32,
pure-torch paths), in pieces and greedily."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160
PIECES = [1, 17, 64, 30]


def _qwen3_5_text(**extra):
    return dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                linear_num_key_heads=2, linear_num_value_heads=4, linear_conv_kernel_dim=4, head_dim=16,
                linear_key_head_dim=16, linear_value_head_dim=24, full_attention_interval=2,
                max_position_embeddings=512, rms_norm_eps=1e-6, initializer_range=0.1, **extra)


_QWEN_VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=4,
                    temporal_patch_size=2, spatial_merge_size=2)
_MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48)


def _gemma3_text():
    return dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                num_hidden_layers=3, head_dim=32, query_pre_attn_scalar=20, sliding_window=8,
                layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.1)


def _dense_text(model_type, **extra):
    return dict(model_type=model_type, vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5,
                initializer_range=0.1, **extra)


_CLIP = dict(model_type="clip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=1,
             num_attention_heads=2, image_size=28, patch_size=14)
_PIXTRAL = dict(model_type="pixtral", hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                image_size=28, patch_size=14, head_dim=16)


def _model(kind):
    if kind == "llava_llama":  # saved in the older language_model.model.* layout
        cfg = transformers.LlavaConfig(text_config=_dense_text("llama"), vision_config=_CLIP)
        return transformers.LlavaForConditionalGeneration(cfg)
    if kind == "llava_qwen2":
        cfg = transformers.LlavaConfig(text_config=_dense_text("qwen2"), vision_config=_CLIP)
        return transformers.LlavaForConditionalGeneration(cfg)
    if kind == "mistral3":  # sliding window, tied head
        cfg = transformers.Mistral3Config(text_config=_dense_text("mistral", sliding_window=8), vision_config=_PIXTRAL,
                                          tie_word_embeddings=True)
        return transformers.Mistral3ForConditionalGeneration(cfg)
    if kind == "qwen3_5_vl":
        cfg = transformers.Qwen3_5Config(text_config=_qwen3_5_text(), vision_config=_QWEN_VISION)
        return transformers.Qwen3_5ForConditionalGeneration(cfg)
    if kind == "qwen3_5_moe_vl":
        cfg = transformers.Qwen3_5MoeConfig(text_config=_qwen3_5_text(**_MOE), vision_config=_QWEN_VISION)
        return transformers.Qwen3_5MoeForConditionalGeneration(cfg)
    if kind == "qwen3_5_moe":
        return transformers.AutoModelForCausalLM.from_config(transformers.Qwen3_5MoeTextConfig(**_qwen3_5_text(**_MOE)))
    if kind == "gemma3_vl":
        vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      image_size=28, patch_size=14)
        cfg = transformers.Gemma3Config(text_config=_gemma3_text(), vision_config=vision, mm_tokens_per_image=4)
        return transformers.Gemma3ForConditionalGeneration(cfg)
    raise ValueError(kind)


def _randomize(model):
    for name, p in model.named_parameters():
        if name.endswith("A_log"):
            p.copy_(torch.empty_like(p).uniform_(0.05, 1.0).log())
        elif name.endswith("linear_attn.norm.weight"):
            p.copy_(1.0 + 0.2 * torch.randn_like(p))
        elif p.ndim == 1:  # zero-centred (1 + w) norms, dt_bias, biases
            p.copy_(0.2 * torch.randn_like(p))


KINDS = ["qwen3_5_vl", "qwen3_5_moe_vl", "qwen3_5_moe", "gemma3_vl", "llava_llama", "llava_qwen2", "mistral3"]


@pytest.fixture(scope="module", params=KINDS)
def case(request, tmp_path_factory):
    kind = request.param
    torch.manual_seed(sum(map(ord, kind)))
    ref = _model(kind)
    ref.config._attn_implementation = "eager"
    for sub in ("text_config", "vision_config"):
        if hasattr(ref.config, sub):
            getattr(ref.config, sub)._attn_implementation = "eager"
    with torch.no_grad():
        _randomize(ref)
    directory = tmp_path_factory.mktemp(kind)
    ref.save_pretrained(directory, safe_serialization=True)
    ref.eval()
    ids = checks.prompt(VOCAB, sum(PIECES))
    want = checks.meaningful_logits(ref, ids)
    return kind, ref, directory, Model.load(str(directory)), ids, want


def test_text_prompt_matches_the_whole_wrapper(case):
    kind, ref, directory, m, ids, want = case
    checks.check_full_prompt(m, ids, want, VOCAB)
    checks.check_prompt_in_pieces(m, ids, want, (PIECES,))


def test_odd_shuffled_blocks_give_the_same_logits(case):
    kind, ref, directory, m, ids, want = case
    checks.check_odd_shuffled_blocks(m, ids, want, (PIECES,), prefill=sum(PIECES) - 12, stop=sum(PIECES))


def test_greedy_continuation_matches_transformers(case):
    kind, ref, directory, m, ids, want = case
    checks.check_greedy_continuation(ref, m, ids[:20], pad_token_id=0, new_tokens=16)


def test_only_the_language_model_is_counted(case):
    kind, ref, directory, m, ids, want = case
    info = m.inspect()
    lm = ref.model.language_model if hasattr(ref.model, "language_model") else ref.model
    expected = sum(p.numel() for p in lm.parameters())
    if not getattr(ref.config, "tie_word_embeddings", False):
        expected += ref.lm_head.weight.numel()
    assert info["parameter_count"] == expected
    assert info["architecture"] == ref.config.architectures[0]


def test_unsupported_language_model_of_a_wrapper_is_named(tmp_path):
    torch.manual_seed(0)
    _model("llava_llama").save_pretrained(tmp_path / "src", safe_serialization=True)
    d = edits.copy_with(tmp_path / "src", tmp_path / "odd",
                        config_edit=lambda c: c["text_config"].update(model_type="phi3"))
    edits.expect_load_error(d, r"text_config\.model_type.*'phi3'")


def test_wrapper_missing_a_language_model_tensor_is_named(tmp_path):
    torch.manual_seed(0)
    ref = _model("qwen3_5_vl")
    ref.save_pretrained(tmp_path / "src", safe_serialization=True)
    name = "model.language_model.layers.1.self_attn.q_proj.weight"
    d = edits.copy_with(tmp_path / "src", tmp_path / "broken", tensors_edit=lambda t: t.pop(name))
    # The error names the text model's tensor (the builder's name for it).
    edits.expect_load_error(d, r"model\.layers\.1\.self_attn\.q_proj\.weight")


def test_untied_wrapper_head_is_used_even_if_text_config_says_tied(tmp_path):
    """transformers obeys the wrapper's tie_word_embeddings; a text_config claiming otherwise must not win."""
    torch.manual_seed(1)
    ref = _model("qwen3_5_vl")
    with torch.no_grad():
        _randomize(ref)
    ref.save_pretrained(tmp_path, safe_serialization=True)
    with open(os.path.join(tmp_path, "config.json")) as f:
        cfg = json.load(f)
    assert cfg["tie_word_embeddings"] is False
    cfg["text_config"]["tie_word_embeddings"] = True
    with open(os.path.join(tmp_path, "config.json"), "w") as f:
        json.dump(cfg, f)
    ids = checks.prompt(VOCAB, 12)
    want = checks.meaningful_logits(ref.eval(), ids)
    np.testing.assert_allclose(Model.load(str(tmp_path)).forward(ids), want, atol=checks.ATOL, rtol=0)


WRITTEN_AS = {"qwen3_5_vl": "qwen35", "qwen3_5_moe_vl": "qwen35moe", "qwen3_5_moe": "qwen35moe", "gemma3_vl": "gemma3",
              "llava_llama": "llama", "llava_qwen2": "llama", "mistral3": "mistral3"}


# What these tiny configs set and llama.cpp's form cannot hold: refused, naming the key
REFUSED = {"gemma3_vl": "query_pre_attn_scalar", "mistral3": "sliding_window"}


def test_quantize_writes_the_language_model(case, tmp_path):
    """`attnzoo quantize` writes a wrapper's language model as llama.cpp's converter does (Gemma 3's as gemma3, a
    LLaVA's as llama whatever its text model, Mistral 3's as mistral3, Qwen3.5's as qwen35 / qwen35moe), the vision
    tower set aside: the F32 file gives the whole wrapper's logits; what the file cannot hold (a query scale or
    window llama.cpp fixes otherwise) is refused by key, as for the text-only classes."""
    import attnzoo
    kind, ref, directory, m, ids, want = case
    path = str(tmp_path / "lm.gguf")
    if kind in REFUSED:
        with pytest.raises(ValueError, match=REFUSED[kind]):
            attnzoo.quantize(str(directory), path, type="F32")
        return
    summary = attnzoo.quantize(str(directory), path, type="F32")
    assert summary["architecture"] == WRITTEN_AS[kind]
    assert (summary["set_aside"] > 0) == kind.endswith(("_vl", "llava_llama", "llava_qwen2", "mistral3"))
    checks.check_full_prompt(Model.load(path), ids, want, VOCAB)


def test_quantize_gemma3_wrapper_as_gemma3(tmp_path):
    """A Gemma 3 wrapper whose text model llama.cpp's gemma3 holds (query scale head_dim^-0.5, sliding layers where
    its every-6th pattern puts them) is written as gemma3 and gives the wrapper's logits past the window."""
    import attnzoo
    torch.manual_seed(3)
    text = dict(_gemma3_text(), num_hidden_layers=2, query_pre_attn_scalar=32,
                layer_types=["sliding_attention", "sliding_attention"])
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14)
    ref = transformers.Gemma3ForConditionalGeneration(
        transformers.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4))
    ref.config._attn_implementation = ref.config.text_config._attn_implementation = "eager"
    with torch.no_grad():
        _randomize(ref)
    ref.save_pretrained(tmp_path / "src", safe_serialization=True)
    ids = checks.prompt(VOCAB, 40)
    want = checks.meaningful_logits(ref.eval(), ids)
    summary = attnzoo.quantize(str(tmp_path / "src"), str(tmp_path / "g.gguf"), type="F32")
    assert summary["architecture"] == "gemma3" and summary["set_aside"] > 0
    checks.check_full_prompt(Model.load(str(tmp_path / "g.gguf")), ids, want, VOCAB)
