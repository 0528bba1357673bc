"""RWKV-7 GGUF files as a model source: tiny random flash-linear-attention RWKV7ForCausalLM checkpoints
(rwkv7_reference.py) written the way llama.cpp's converter (convert_hf_to_gguf.py's Rwkv7Model) writes them —
its metadata keys (wkv.head_size, the four LoRA ranks), fla's names renamed and mapped by the gguf package's own
name map, the six token-shift mixes stacked into time_mix_lerp_fused, every tensor squeezed, r_k flattened, and
the stand-in value LoRA of layer 0 — in F32, F16 and Q8_0, then loaded with Model.load and compared with the
reference model holding the values the file decodes to (transformers' GGUF loader has no rwkv7)."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")

import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
import rwkv7_reference as ref  # noqa: E402
from test_model_rwkv7 import CONFIGS as MODEL_CONFIGS  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320
# Quantized files against f32 references at 1e-4 (and token for token): f32 products in every projection
# (conftest.py); the default "auto" is covered by test_gguf_auto_precision.py.
MATMUL_PRECISION = "highest"
PROMPT_LEN = 40
Q8_0 = gguf.GGMLQuantizationType.Q8_0
LERP = ["r", "w", "k", "v", "a", "g"]

# two of test_model_rwkv7's checkpoints (the third needs fuse_norm=False, which GGUF cannot say), and one
# without norm biases
CONFIGS = {k: MODEL_CONFIGS[k] for k in ("h64_hd16_2l", "h128_hd32_3l_wide_v_tied")}
CONFIGS["h64_hd32_3l_nobias"] = dict(hidden_size=64, head_dim=32, num_hidden_layers=3, decay_low_rank_dim=4,
                                     gate_low_rank_dim=8, a_low_rank_dim=12, v_low_rank_dim=6, norm_bias=False)


def _renamed(name):
    """Rwkv7Model.filter_tensors and the LoRA renames at the top of its modify_tensors."""
    name = name.replace("blocks", "layers").replace("ffn", "feed_forward")
    name = name.replace("self_attn", "attention").replace("attn", "attention").replace("time_mixer.", "")
    name = name.replace("feed_forward_norm", "ln2").replace("g_norm", "ln_x")
    return (name.replace("_lora.lora.0.weight", "1.weight").replace("_lora.lora.2.weight", "2.weight")
            .replace("_lora.lora.2.bias", "0.weight"))


def _converted(cfg, state):
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.RWKV7, cfg.num_hidden_layers)
    out, lerp = [], {}
    for name, data in state.items():
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue  # fla's checkpoint has no lm_head when tied
        name = _renamed(name)
        bid = int(name.split(".")[2]) if name.startswith("model.layers.") else None
        if bid is not None and "attention.x_" in name:
            lerp.setdefault(bid, {})[name.rsplit(".", 1)[1][2:]] = data
            if len(lerp[bid]) == len(LERP):
                out.append((f"blk.{bid}.time_mix_lerp_fused.weight", np.stack([lerp[bid][i] for i in LERP])))
            continue
        data = data.squeeze() if isinstance(data, np.ndarray) else data
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert new is not None, name
        if not new.endswith((".weight", ".bias")):
            new += ".weight"
        if "r_k" in new:
            data = data.flatten()
        if bid == 0 and "time_mix_a" in new:  # the stand-in value LoRA of layer 0
            out.append((new.replace("time_mix_a", "time_mix_v"), data))
        out.append((new, data))
    return out


def _quantizable(name):
    return name.endswith(("_proj.weight", "ffn.key.weight", "ffn.value.weight", "lm_head.weight",
                          "embeddings.weight"))


def write_gguf(model, path, ftype):
    cfg = model.config
    state, raw = {}, set()
    with torch.no_grad():
        for name, p in model.state_dict().items():
            data = p.float().numpy().copy()
            if ftype == "q8_0" and _quantizable(name) and data.shape[1] % 32 == 0:
                blocks = gguf.quants.quantize(np.ascontiguousarray(data), Q8_0)
                p.copy_(torch.from_numpy(gguf.quants.dequantize(blocks, Q8_0).reshape(data.shape)))
                data = blocks
                raw.add(name)
            elif ftype == "f16" and data.ndim == 2 and "lora" not in name:
                data = data.astype(np.float16).astype(np.float32)
                p.copy_(torch.from_numpy(data))
            state[name] = data
    w = gguf.GGUFWriter(path, "rwkv7")
    w.add_context_length(1048576)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_layer_norm_eps(cfg.norm_eps)
    w.add_wkv_head_size(cfg.head_dim)
    w.add_decay_lora_rank(cfg.decay_low_rank_dim)
    w.add_iclr_lora_rank(cfg.a_low_rank_dim)
    w.add_value_residual_mix_lora_rank(cfg.v_low_rank_dim)
    w.add_gate_lora_rank(cfg.gate_low_rank_dim)
    w.add_feed_forward_length(cfg.intermediate_size if cfg.intermediate_size is not None else cfg.hidden_size * 4)
    w.add_head_count(0)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(cfg.vocab_size)])
    w.add_token_types([1] * cfg.vocab_size)
    quantized = {gguf.get_tensor_name_map(gguf.MODEL_ARCH.RWKV7, cfg.num_hidden_layers).get_name(
        _renamed(n), try_suffixes=(".weight", ".bias")) for n in raw}
    for new, data in _converted(cfg, state):
        if new in quantized:
            w.add_tensor(new, np.ascontiguousarray(data), raw_dtype=Q8_0)
            continue
        data = np.ascontiguousarray(data, dtype=np.float32)
        # the converter keeps the LoRAs, the fused mixes and every 1-D tensor in F32
        if ftype == "f16" and data.ndim == 2 and not any(k in new for k in ("_w1", "_w2", "_a1", "_a2", "_v1", "_v2",
                                                                            "_g1", "_g2", "lerp")):
            data = data.astype(np.float16)
        w.add_tensor(new, data)
    gguf_checks.finish_gguf(w)


CASES = [(k, f) for k in CONFIGS for f in ("f32", "f16")] + [("h64_hd16_2l", "q8_0")]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def case(request, tmp_path_factory):
    kind, ftype = request.param
    cfg = ref.make_config(vocab_size=VOCAB, **CONFIGS[kind])
    torch.manual_seed(0)
    model = ref.RWKV7ForCausalLM(cfg)
    ref.randomize(model, seed=sum(map(ord, kind)))
    path = os.path.join(str(tmp_path_factory.mktemp(kind)), f"{kind}-{ftype}.gguf")
    write_gguf(model, path, ftype)
    ids = checks.prompt(VOCAB, PROMPT_LEN)
    want = model(torch.from_numpy(ids))[0].numpy()
    assert want.std() > 0.1
    return kind, cfg, path, ids, want


def test_logits_match_the_reference(case):
    kind, cfg, path, ids, want = case
    gguf_checks.check_gguf_logits(path, ids, want, VOCAB, prefill=30)


def test_synthesized_config(case):
    kind, cfg, path, ids, want = case
    got = Model.load(path).config
    assert got["architectures"] == ["RWKV7ForCausalLM"] and got["model_type"] == "rwkv7"
    for key in ("hidden_size", "num_hidden_layers", "head_dim", "num_heads", "decay_low_rank_dim", "a_low_rank_dim",
                "v_low_rank_dim", "gate_low_rank_dim", "norm_bias", "tie_word_embeddings"):
        assert got[key] == getattr(cfg, key), key
    assert got["value_dim"] == cfg.value_dim[0]


def test_fused_mixes_of_the_wrong_shape_are_named(tmp_path):
    path = str(tmp_path / "r.gguf")
    w = gguf.GGUFWriter(path, "rwkv7")
    for k, v in {"embedding_length": 8, "block_count": 1, "wkv.head_size": 4, "feed_forward_length": 8,
                 "attention.decay_lora_rank": 2, "attention.iclr_lora_rank": 2,
                 "attention.value_residual_mix_lora_rank": 2, "attention.gate_lora_rank": 2}.items():
        w.add_uint32(f"rwkv7.{k}", v)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    w.add_tensor("blk.0.time_mix_lerp_fused.weight", np.zeros((5, 1, 1, 8), np.float32))
    gguf_checks.finish_gguf(w)
    with pytest.raises(ValueError, match=r"tensor 'blk\.0\.time_mix_lerp_fused\.weight': expected F32 / F16 / BF16 "
                                         r"\[6, 1, 1, 8\]"):
        Model.load(path)


def _gguf_name(cfg, name):
    """The GGUF tensor holding fla tensor `name` in the converter's file (write_gguf)."""
    if ".attn.x_" in name:
        return f"blk.{name.split('.')[2]}.time_mix_lerp_fused.weight"
    new = gguf.get_tensor_name_map(gguf.MODEL_ARCH.RWKV7, cfg.num_hidden_layers).get_name(
        _renamed(name), try_suffixes=(".weight", ".bias"))
    return new if new.endswith((".weight", ".bias")) else new + ".weight"


@pytest.mark.parametrize("kind", ["h64_hd16_2l", "h128_hd32_3l_wide_v_tied"])
def test_quantize_writes_the_converters_file(kind, tmp_path):
    """`attnzoo quantize` of test_model_rwkv7's fla-format directory at F32 holds write_gguf's converter file
    tensor for tensor (the fused mixes, squeezed vectors, flattened r_k, layer 0's stand-in value LoRA, no tied
    lm_head) with the same rwkv7.* keys, and gives the reference's logits; at Q8_0 the LoRAs and fused mixes stay
    F32 and the file computes what the checkpoint rounded the same way computes."""
    import attnzoo
    from test_model_rwkv7 import _build
    directory = tmp_path / "fla"
    model = _build(kind, directory)
    ours, theirs = str(tmp_path / "ours.gguf"), str(tmp_path / "theirs.gguf")
    summary = attnzoo.quantize(str(directory), ours, type="F32")
    assert summary["architecture"] == "rwkv7"
    write_gguf(model, theirs, "f32")
    gguf_checks.check_same_gguf(ours, theirs, "rwkv7", [
        "context_length", "embedding_length", "block_count", "attention.layer_norm_epsilon", "wkv.head_size",
        "attention.decay_lora_rank", "attention.iclr_lora_rank", "attention.value_residual_mix_lora_rank",
        "attention.gate_lora_rank", "feed_forward_length", "attention.head_count"])
    ids = checks.prompt(VOCAB, PROMPT_LEN)
    want = model(torch.from_numpy(ids))[0].numpy()
    gguf_checks.check_gguf_logits(ours, ids, want, VOCAB, prefill=30)
    if kind != "h64_hd16_2l":
        return
    q8 = str(tmp_path / "q8.gguf")
    attnzoo.quantize(str(directory), q8, type="Q8_0")
    types = gguf_checks.check_quantized_file_is_its_rounded_checkpoint(
        str(directory), q8, lambda name: _gguf_name(model.config, name), tmp_path, ids)
    assert types["blk.1.time_mix_key.weight"] == types["blk.1.channel_mix_value.weight"] == "Q8_0"
    for name in ("blk.1.time_mix_w1.weight", "blk.1.time_mix_g2.weight", "blk.0.time_mix_v1.weight",
                 "blk.1.time_mix_lerp_fused.weight"):
        assert types[name] == "F32", name


def test_quantize_refuses_what_rwkv7_cannot_hold(tmp_path):
    """fuse_norm false (kk normalized by F.normalize) has no rwkv7 key: refused by name, nothing written."""
    import attnzoo
    from test_model_rwkv7 import _build
    _build("h64_hd32_4l_nobias", tmp_path / "fla")
    with pytest.raises(ValueError, match="fuse_norm"):
        attnzoo.quantize(str(tmp_path / "fla"), str(tmp_path / "x.gguf"), type="F32")
    assert not (tmp_path / "x.gguf").exists()
