"""Mixtral (MixtralForCausalLM: Llama attention, every feed-forward a sparse MoE, softmax router with the top-k
weights renormalized, experts stored as block_sparse_moe.experts.<e>.w1 / w3 / w2) against transformers (eager
attention, float32) on a tiny random checkpoint: whole prompt, pieces, token-by-token decode over paged blocks,
greedy continuation, ragged batches; and the GGUF llama.cpp's converter writes for it (arch llama with stacked
ffn_*_exps experts and Q / K permuted), written here with the gguf package, loading with the same logits; and the
file `attnzoo quantize` writes, tensor for tensor the same."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320
HEADS, KV_HEADS, EXPERTS = 4, 2, 4


def _config(kind):
    assert kind == "top2_of_4"
    return transformers.MixtralConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                                      num_local_experts=EXPERTS, num_experts_per_tok=2, max_position_embeddings=256,
                                      rms_norm_eps=1e-5, initializer_range=0.1, tie_word_embeddings=False,
                                      rope_parameters=dict(rope_type="default", rope_theta=1000.0))


checks.define_family_tests(globals(), _config, ["top2_of_4"], checks.randomize_vectors(1.0), VOCAB)


def _permute(w, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's two rotary halves interleaved."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _write_gguf(ref, directory, path):
    """The converter's file for the checkpoint in `directory`: llama with expert_count / expert_used_count, each
    layer's experts stacked [n_expert, rows, cols] as ffn_gate_exps (w1), ffn_up_exps (w3), ffn_down_exps (w2)."""
    from safetensors.numpy import load_file
    cfg = ref.config
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_expert_count(EXPERTS)
    w.add_expert_used_count(cfg.num_experts_per_tok)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, cfg.num_hidden_layers)
    state = load_file(os.path.join(directory, "model.safetensors"))
    for i in range(cfg.num_hidden_layers):
        for hf, gg in (("w1", "ffn_gate_exps"), ("w3", "ffn_up_exps"), ("w2", "ffn_down_exps")):
            stacked = [state.pop(f"model.layers.{i}.block_sparse_moe.experts.{e}.{hf}.weight") for e in range(EXPERTS)]
            w.add_tensor(f"blk.{i}.{gg}.weight", np.stack(stacked))
    for name, data in state.items():
        if name.endswith("q_proj.weight"):
            data = _permute(data, HEADS)
        if name.endswith("k_proj.weight"):
            data = _permute(data, KV_HEADS)
        new_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert new_name is not None, name
        w.add_tensor(new_name, np.ascontiguousarray(data))
    gguf_checks.finish_gguf(w)


def test_gguf_from_the_gguf_package(case, tmp_path):
    kind, ref, m, ids, want = case
    path = str(tmp_path / "mixtral.gguf")
    _write_gguf(ref, m.directory, path)
    gguf_checks.check_gguf_logits(path, ids, want, VOCAB, prefill=30)
    g = Model.load(path)
    assert g.config["architectures"] == ["MixtralForCausalLM"] and g.config["num_experts"] == EXPERTS
    info = m.inspect()
    assert [x["kind"] for x in info["layers"]] == ["attention"] * 2
    assert info["parameter_count"] == sum(p.numel() for p in ref.parameters())


def test_quantize_writes_the_converters_tensors(case, tmp_path):
    """`attnzoo quantize` at F32: the tensors of the file written above (experts stacked, Q / K permuted), value
    for value, and the same logits."""
    import attnzoo
    kind, ref, m, ids, want = case
    ours, theirs = str(tmp_path / "q.gguf"), str(tmp_path / "w.gguf")
    attnzoo.quantize(m.directory, ours, type="F32")
    _write_gguf(ref, m.directory, theirs)
    got = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(ours).tensors}
    expect = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(theirs).tensors}
    assert set(got) == set(expect)
    for name, value in expect.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    gguf_checks.check_gguf_logits(ours, ids, want, VOCAB, prefill=30)


def test_quantize_names_an_expert_tensor_without_a_layer_index(case, tmp_path):
    import attnzoo
    kind, ref, m, ids, want = case

    def rename(tensors):
        tensors["model.layers.x.block_sparse_moe.experts.0.w1.weight"] = tensors.pop(
            "model.layers.0.block_sparse_moe.experts.0.w1.weight")

    bad = edits.copy_with(m.directory, str(tmp_path / "bad"), tensors_edit=rename)
    with pytest.raises(ValueError, match=r"model\.layers\.x\.block_sparse_moe\.experts\.0\.w1\.weight"):
        attnzoo.quantize(bad, tmp_path / "bad.gguf", type="F32")
