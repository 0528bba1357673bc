"""The deepseek2 GGUF llama.cpp's convert_hf_to_gguf.py (DeepseekV2Model) writes for a DeepSeek-V2 / V3 checkpoint,
restated with the gguf package, and the checks the V2 and V3 tests share: `attnzoo quantize` writes the same tensors,
and both files (the split attn_k_b / attn_v_b form and the older whole attn_kv_b one) load with transformers'
logits. Plain helpers (no test_* names)."""
import os

import numpy as np

import gguf_checks


def kv_b_halves(kv_b, heads, nope):
    """The converter's split of kv_b_proj [heads * (nope + v), rank]: k_b [heads, rank, nope] (each head's k rows
    transposed) and v_b [heads, v, rank]."""
    kv_b = kv_b.reshape(heads, -1, kv_b.shape[-1])
    return np.ascontiguousarray(kv_b[:, :nope].transpose(0, 2, 1)), np.ascontiguousarray(kv_b[:, nope:])


def write_converter_gguf(ref, directory, path, split_kv_b=True, drop=(), kv_b_q8_0=False):
    """The converter's file for the checkpoint in `directory` (`ref` its transformers model): its hyperparameters
    (head_count_kv 1, key_length / value_length the latent widths, the per-head ones as *_mla), the routed experts
    stacked per layer, the correction bias as exp_probs_b.bias, and kv_b_proj split per head into attn_k_b
    (transposed) and attn_v_b, or kept whole as attn_kv_b (the files before the split) when not split_kv_b; the
    GGUF tensors named in `drop` left out; with kv_b_q8_0, attn_k_b and attn_v_b stored as Q8_0 (gguf.quants)."""
    import gguf
    from safetensors.numpy import load_file
    cfg = ref.config
    v3 = cfg.model_type == "deepseek_v3"
    rope = cfg.rope_parameters
    heads, nope, v, rope_dim = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.v_head_dim, cfg.qk_rope_head_dim
    w = gguf.GGUFWriter(path, "deepseek2")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(heads)
    w.add_head_count_kv(1)
    w.add_rope_freq_base(rope["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_expert_count(cfg.n_routed_experts)
    w.add_expert_used_count(cfg.num_experts_per_tok)
    grouped = v3 or cfg.topk_method == "group_limited_greedy"
    if grouped:
        w.add_expert_group_count(cfg.n_group)
        w.add_expert_group_used_count(cfg.topk_group)
    # A released config's scoring_func (transformers' configs drop it)
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID if v3 else gguf.ExpertGatingFuncType.SOFTMAX)
    if rope["rope_type"] == "yarn":
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
        w.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
        w.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
    w.add_leading_dense_block_count(cfg.first_k_dense_replace)
    w.add_vocab_size(cfg.vocab_size)
    if cfg.q_lora_rank is not None:
        w.add_q_lora_rank(cfg.q_lora_rank)
    w.add_kv_lora_rank(cfg.kv_lora_rank)
    w.add_key_length(cfg.kv_lora_rank + rope_dim)
    w.add_value_length(cfg.kv_lora_rank)
    w.add_key_length_mla(nope + rope_dim)
    w.add_value_length_mla(v)
    w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
    w.add_expert_shared_count(cfg.n_shared_experts)
    w.add_expert_weights_scale(cfg.routed_scaling_factor)
    if cfg.norm_topk_prob:
        w.add_expert_weights_norm(True)
    w.add_rope_dimension_count(rope_dim)
    if rope["rope_type"] == "yarn" and rope.get("mscale_all_dim"):
        w.add_rope_scaling_yarn_log_mul(0.1 * rope["mscale_all_dim"])

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.DEEPSEEK2, cfg.num_hidden_layers)
    add = w.add_tensor
    w.add_tensor = lambda name, data, **kw: None if name in drop else add(name, data, **kw)
    state = load_file(os.path.join(directory, "model.safetensors"))
    for i in range(cfg.first_k_dense_replace, cfg.num_hidden_layers):
        for proj in ("down_proj", "gate_proj", "up_proj"):
            stacked = [state.pop(f"model.layers.{i}.mlp.experts.{e}.{proj}.weight")
                       for e in range(cfg.n_routed_experts)]
            gg = names.get_name(f"model.layers.{i}.mlp.experts.{proj}", try_suffixes=())
            w.add_tensor(f"{gg}.weight", np.stack(stacked))
    for name, data in state.items():
        if name.endswith("e_score_correction_bias"):
            name = name.replace("e_score_correction_bias", "e_score_correction.bias")
        if name.endswith("kv_b_proj.weight") and split_kv_b:
            for kind, part in zip(("k_b_proj", "v_b_proj"), kv_b_halves(data, heads, nope)):
                gg = names.get_name(name.replace("kv_b_proj", kind), try_suffixes=(".weight",))
                if kv_b_q8_0:
                    w.add_tensor(gg, gguf.quants.quantize(part, gguf.GGMLQuantizationType.Q8_0),
                                 raw_dtype=gguf.GGMLQuantizationType.Q8_0)
                else:
                    w.add_tensor(gg, part)
            continue
        new_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert new_name is not None, name
        w.add_tensor(new_name, np.ascontiguousarray(data))
    gguf_checks.finish_gguf(w)


def check_quantized_gguf(ref, directory, path, ids, want, vocab, prefill=25):
    """`attnzoo quantize` at F32 writes the converter's tensors value for value, and it, the converter's file and
    the older whole-attn_kv_b form all load with transformers' logits. Returns the quantized file's reader."""
    import attnzoo
    import gguf
    attnzoo.quantize(directory, path, type="F32")
    theirs, whole = path + ".converter.gguf", path + ".kv_b.gguf"
    write_converter_gguf(ref, directory, theirs)
    write_converter_gguf(ref, directory, whole, split_kv_b=False)
    reader = gguf.GGUFReader(path)
    got = {t.name: np.asarray(t.data) for t in reader.tensors}
    expect = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(theirs).tensors}
    assert set(got) == set(expect)
    for name, value in expect.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    for p in (path, theirs, whole):
        gguf_checks.check_gguf_logits(p, ids, want, vocab, prefill)
    return reader
