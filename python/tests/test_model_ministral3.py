"""Ministral 3 (Ministral3ForCausalLM, and the ministral3 text model of Mistral3ForConditionalGeneration: Mistral's
attention with YaRN and Llama 4's query temperature 1 + llama_4_scaling_beta * log(1 + floor(position /
original_max_position_embeddings))) against transformers (eager attention, float32) on a tiny random checkpoint whose
original context (16) is short enough that the prompt crosses two temperature steps: whole prompt, pieces,
token-by-token decode over paged blocks, greedy continuation, ragged batches; the wrapper's text logits; and the F32
GGUF (llama.cpp's mistral3: Q / K permuted, yarn keys, attention.temperature_scale) that `attnzoo quantize` writes,
tensor for tensor the converter's file written with the gguf package, loading with the same logits."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320
HEADS, KV_HEADS = 4, 2
ROPE = dict(rope_type="yarn", rope_theta=1000.0, factor=4.0, original_max_position_embeddings=16, beta_fast=32.0,
            beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0, llama_4_scaling_beta=0.1)


def _text(**extra):
    return dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=HEADS,
                num_key_value_heads=KV_HEADS, head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-5,
                initializer_range=0.1, tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                rope_parameters=dict(ROPE), **extra)


def _config(kind):
    assert kind == "yarn_temperature"
    return transformers.Ministral3Config(**_text())


checks.define_family_tests(globals(), _config, ["yarn_temperature"], checks.randomize_vectors(1.0), VOCAB)


def test_the_temperature_is_applied(case, tmp_path):
    """inspect's layers and parameter count; without llama_4_scaling_beta the logits past the first 16 positions
    differ and the first 16 do not (the temperature is 1 there)."""
    kind, ref, m, ids, want = case
    info = m.inspect()
    assert [x["kind"] for x in info["layers"]] == ["attention"] * 2
    assert info["parameter_count"] == sum(p.numel() for p in ref.parameters())

    def cold(c):
        c["rope_parameters"]["llama_4_scaling_beta"] = 0.0
    got = Model.load(edits.copy_with(m.directory, tmp_path / "cold", config_edit=cold)).forward(ids)
    np.testing.assert_allclose(got[:16], want[:16], atol=checks.ATOL, rtol=0)
    assert abs(got[16:] - want[16:]).max() > 1e-2
    edits.check_config_error_is_named(
        m.directory, tmp_path / "bad", "llama_4_scaling_beta",
        rope_parameters=dict(ROPE, llama_4_scaling_beta="0.1"))


def test_mistral3_wrapper_with_a_ministral3_text_model(tmp_path):
    """Mistral3ForConditionalGeneration over a ministral3 text config (Ministral 3's release form): text-only logits
    equal the whole wrapper's."""
    vision = dict(model_type="pixtral", hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                  num_attention_heads=2, image_size=28, patch_size=14, head_dim=16)
    cfg = transformers.Mistral3Config(text_config=dict(model_type="ministral3", **_text()), vision_config=vision)
    torch.manual_seed(5)
    ref = transformers.Mistral3ForConditionalGeneration(cfg)
    with torch.no_grad():
        checks.randomize_vectors(1.0)(ref)
    ref.config._attn_implementation = ref.config.text_config._attn_implementation = "eager"
    ref.config.vision_config._attn_implementation = "eager"
    ref.save_pretrained(tmp_path / "hf", safe_serialization=True)
    ids = _prompt()
    want = checks.meaningful_logits(ref.eval(), ids)
    checks.check_full_prompt(Model.load(str(tmp_path / "hf")), ids, want, VOCAB)
    # quantize writes the text model as mistral3 (the vision tower set aside), read back as Ministral3ForCausalLM
    import attnzoo
    summary = attnzoo.quantize(str(tmp_path / "hf"), str(tmp_path / "w.gguf"), type="F32")
    assert summary["architecture"] == "mistral3" and summary["set_aside"] > 0
    g = Model.load(str(tmp_path / "w.gguf"))
    assert g.config["architectures"] == ["Ministral3ForCausalLM"]
    checks.check_full_prompt(g, ids, want, VOCAB)


def test_mistral3_gguf_without_temperature_is_plain_mistral(case, tmp_path):
    """Mistral Small 3.x's text model reaches mistral3 without attention.temperature_scale: it reads back as
    MistralForCausalLM (YaRN kept), with the logits of the checkpoint whose llama_4_scaling_beta is 0."""
    kind, ref, m, ids, want = case
    path = str(tmp_path / "w.gguf")
    _write_gguf(m.directory, path)
    plain = Model.load(gguf_checks.rewrite_gguf(path, tmp_path / "plain.gguf", "mistral3",
                                                drop=("mistral3.attention.temperature_scale",)))
    assert plain.config["architectures"] == ["MistralForCausalLM"] and plain.config["model_type"] == "mistral"

    def cold(c):
        c["rope_parameters"]["llama_4_scaling_beta"] = 0.0
    cold_hf = Model.load(edits.copy_with(m.directory, tmp_path / "cold", config_edit=cold))
    np.testing.assert_allclose(plain.forward(ids), cold_hf.forward(ids), atol=checks.ATOL, rtol=0)


def _permute(w, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's two rotary halves interleaved."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _write_gguf(directory, path):
    """convert_hf_to_gguf.py's Mistral3Model (LlamaModel with arch mistral3) restated with the gguf package: the
    Llama keys, YaRN's (type, factor, original context, beta_fast / beta_slow), yarn_log_multiplier =
    mscale_all_dim and attention.temperature_scale = llama_4_scaling_beta; Q / K rows permuted."""
    import gguf
    from safetensors.numpy import load_file
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    rope = cfg["rope_parameters"]
    w = gguf.GGUFWriter(path, "mistral3")
    gguf_checks.add_converter_attention_keys(w, cfg, cfg["num_hidden_layers"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_rope_dimension_count(cfg["head_dim"])
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rope["factor"])
    w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
    w.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
    w.add_rope_scaling_yarn_log_mul(rope["mscale_all_dim"])
    w.add_attn_temperature_scale(rope["llama_4_scaling_beta"])
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MISTRAL3, cfg["num_hidden_layers"])
    for name, data in load_file(os.path.join(directory, "model.safetensors")).items():
        if name.endswith("q_proj.weight"):
            data = _permute(data, HEADS)
        if name.endswith("k_proj.weight"):
            data = _permute(data, KV_HEADS)
        w.add_tensor(names.get_name(name, try_suffixes=(".weight", ".bias")), np.ascontiguousarray(data))
    gguf_checks.finish_gguf(w)


_GGUF_KEYS = ("block_count", "rope.dimension_count", "rope.scaling.type", "rope.scaling.factor",
              "rope.scaling.original_context_length", "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow",
              "rope.scaling.yarn_log_multiplier", "attention.temperature_scale", "attention.key_length", "vocab_size")


def test_gguf_from_quantize_and_the_converter(case, tmp_path):
    """`attnzoo quantize` at F32 writes the converter's tensors (Q / K permuted) and keys value for value; both files
    load as Ministral3ForCausalLM with transformers' logits (ours also token by token)."""
    kind, ref, m, ids, want = case
    g, _ = gguf_checks.check_quantize_matches_converter(m.directory, _write_gguf, "mistral3", _GGUF_KEYS, ids, want,
                                                        VOCAB, tmp_path)
    assert g.config["architectures"] == ["Ministral3ForCausalLM"]
