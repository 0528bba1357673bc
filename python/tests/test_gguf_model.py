"""GGUF as a model source: tiny random transformers models written to GGUF the way llama.cpp's converter
(convert_hf_to_gguf.py) writes them — tensor names from the gguf package's own name map, Llama's Q/K rows
permuted for ggml's RoPE, Gemma's norms stored as 1 + w, 1-D tensors in F32 — in F32, F16 and BF16, and with
block-quantized matrices (Q8_0 / Q4_0 from the gguf package's quantizers; IQ4_NL / IQ4_XS, which it cannot
quantize, from make_bench_gguf's quantizer; Q4_K as random blocks), loaded with attnzoo's Model.load and compared with the transformers model holding the values
the file decodes to (gguf.quants.dequantize), and with transformers' own GGUF loader."""
import json
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
from test_make_bench_gguf import make_bench_gguf  # noqa: E402  (scripts/make_bench_gguf.py)
from attnzoo import _core  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320
# Quantized files against f32 references at 1e-4 (and token for token): f32 products in every projection
# (conftest.py); the default "auto" is covered by test_gguf_auto_precision.py.
MATMUL_PRECISION = "highest"
PROMPT_LEN = 40
ARCHS = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2, "qwen3": gguf.MODEL_ARCH.QWEN3,
         "gemma2": gguf.MODEL_ARCH.GEMMA2, "gemma3": gguf.MODEL_ARCH.GEMMA3}


def _config(kind):
    common = dict(vocab_size=VOCAB, max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.1,
                  attn_implementation="eager")
    if kind == "llama":  # GQA, so Q and K are permuted with different head counts
        return transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
                                        rope_parameters=dict(rope_type="default", rope_theta=5000.0), **common)
    if kind == "llama_linear_tied":  # with biases, which the converter permutes like their weights
        return transformers.LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=True,
                                        attention_bias=True,
                                        rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=4.0),
                                        **common)
    if kind == "llama_rope_llama3":  # Llama 3.1's RoPE scaling, which GGUF stores as the rope_freqs tensor
        return transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=1, tie_word_embeddings=False,
                                        rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0,
                                                             low_freq_factor=1.0, high_freq_factor=4.0,
                                                             original_max_position_embeddings=8192), **common)
    if kind == "llama_wide":  # every matrix a whole number of 256-wide K-quant blocks
        return transformers.LlamaConfig(hidden_size=256, intermediate_size=256, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
                                        rope_parameters=dict(rope_type="default", rope_theta=10000.0), **common)
    if kind == "qwen2":  # q/k/v biases
        return transformers.Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
                                        **common)
    if kind == "qwen3":  # q/k norms, head_dim != hidden / heads
        return transformers.Qwen3Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                        tie_word_embeddings=True, **common)
    gemma = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                 sliding_window=12, **common)
    if kind == "gemma2":  # llama.cpp scales scores by 1/sqrt(head_dim): query_pre_attn_scalar = head_dim
        return transformers.Gemma2Config(num_hidden_layers=3, head_dim=16, query_pre_attn_scalar=16,
                                         attn_logit_softcapping=2.0, final_logit_softcapping=6.0, **gemma)
    if kind == "gemma3":  # the local RoPE base is fixed at 10000 in GGUF; the global one is not
        return transformers.Gemma3TextConfig(
            num_hidden_layers=4, head_dim=32, query_pre_attn_scalar=32,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"],
            rope_parameters={"sliding_attention": dict(rope_type="default", rope_theta=10000.0),
                             "full_attention": dict(rope_type="default", rope_theta=300.0)}, **gemma)
    raise ValueError(kind)


def _arch(kind):
    return kind.split("_")[0]


def _randomize(model):
    for name, p in model.named_parameters():
        if p.ndim == 1:  # norms and biases start at constants
            base = 1.0 if "norm" in name and "gemma" not in type(model).__name__.lower() else 0.0
            p.copy_(base + 0.3 * torch.randn_like(p))


def _permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py's LlamaModel.permute: interleaves each head's two rotary halves."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _rope(cfg, layer_type="full_attention"):
    p = cfg.rope_parameters
    return p.get(layer_type, p) if isinstance(p, dict) else {}


def _llama3_rope_factors(rope, dim):
    """convert_hf_to_gguf.py's LlamaModel rope_freqs: per-frequency divisors of theta (1, factor, smooth between)."""
    freqs = 1.0 / (rope["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    out = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


QUANT = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0,
         "q4_k": gguf.GGMLQuantizationType.Q4_K, "iq4_nl": gguf.GGMLQuantizationType.IQ4_NL,
         "iq4_xs": gguf.GGMLQuantizationType.IQ4_XS}


def _random_q4_k(rows, cols, rng):
    """Random Q4_K blocks (144 bytes per 256 values: f16 d, f16 dmin, 12 bytes of 6-bit scales / mins, 128 of
    nibbles) with scales that keep the decoded weights around +-0.1."""
    blocks = rng.integers(0, 256, size=(rows, cols // 256, 144), dtype=np.uint8)
    d = (rng.uniform(0.5, 1.5, size=(rows, cols // 256)) * 0.2 / (63 * 15)).astype(np.float16)
    blocks[:, :, 0:2] = d.view(np.uint8).reshape(rows, cols // 256, 2)
    blocks[:, :, 2:4] = (d * np.float16(8)).view(np.uint8).reshape(rows, cols // 256, 2)
    return blocks.reshape(rows, -1)


def quantize_matrices(model, kind, ftype):
    """Quantizes every matrix the converter would (not norms, not 1-D tensors) and sets the model's parameter to
    the values the blocks decode to; returns {parameter name: blocks in Hugging Face row order}."""
    rng, out = np.random.default_rng(sum(map(ord, kind + ftype))), {}
    qtype = QUANT[ftype]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim < 2 or name.endswith("norm.weight"):
                continue
            data = p.detach().float().numpy()
            if ftype == "q4_k":
                blocks = _random_q4_k(*data.shape, rng)
            elif ftype.startswith("iq4"):  # gguf-py cannot quantize the i-quants
                blocks = make_bench_gguf.quantize_iq4(np.ascontiguousarray(data), xs=ftype == "iq4_xs")
            else:
                blocks = gguf.quants.quantize(np.ascontiguousarray(data), qtype)
            p.copy_(torch.from_numpy(gguf.quants.dequantize(blocks, qtype).reshape(data.shape)))
            out[name] = blocks
    return out


def write_gguf(model, kind, path, ftype, blocks=None):
    """The converter's output for this model: metadata, names, edits, and tensor types (F32 or F16 for
    matrices; 1-D tensors and norms always F32). `blocks`: quantized matrices (quantize_matrices) written as
    they are, their rows permuted like the weights'."""
    cfg, arch = model.config, _arch(kind)
    w = gguf.GGUFWriter(path, arch)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    make_bench_gguf.add_shape_metadata(w, cfg, head_dim)
    rope = _rope(cfg)
    if "rope_theta" in rope:
        w.add_rope_freq_base(rope["rope_theta"])
    if rope.get("rope_type") == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rope["factor"])
    if rope.get("rope_type") == "llama3":
        w.add_tensor("rope_freqs.weight", _llama3_rope_factors(rope, head_dim))
    if arch == "llama":
        w.add_rope_dimension_count(head_dim)
        w.add_vocab_size(cfg.vocab_size)
    if arch.startswith("gemma"):
        w.add_sliding_window(cfg.sliding_window)
    if arch == "gemma2":
        w.add_attn_logit_softcapping(cfg.attn_logit_softcapping)
        w.add_final_logit_softcapping(cfg.final_logit_softcapping)
    if arch == "gemma3":
        w.add_sliding_window_pattern([t == "sliding_attention" for t in cfg.layer_types])
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(cfg.vocab_size)])
    w.add_token_types([1] * cfg.vocab_size)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    names = gguf.get_tensor_name_map(ARCHS[arch], cfg.num_hidden_layers)
    for name, t in model.state_dict().items():
        if "rotary_emb" in name or (name == "lm_head.weight" and cfg.tie_word_embeddings):
            continue
        raw = blocks is not None and name in blocks
        data = blocks[name] if raw else t.float().numpy()
        if arch == "llama" and name.endswith(("q_proj.weight", "q_proj.bias")):
            data = _permute(data, cfg.num_attention_heads, cfg.num_attention_heads)
        if arch == "llama" and name.endswith(("k_proj.weight", "k_proj.bias")):
            data = _permute(data, cfg.num_attention_heads, cfg.num_key_value_heads)
        if arch.startswith("gemma") and name.endswith("norm.weight"):
            data = data + 1
        new_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert new_name is not None, name
        data = np.ascontiguousarray(data)
        if raw:
            w.add_tensor(new_name, data, raw_dtype=QUANT[ftype])
            continue
        if ftype != "f32" and data.ndim > 1 and not new_name.endswith("_norm.weight"):
            if ftype == "bf16":
                w.add_tensor(new_name, gguf.quants.quantize(data, gguf.GGMLQuantizationType.BF16),
                             raw_dtype=gguf.GGMLQuantizationType.BF16)
                continue
            data = data.astype(np.float16)
        w.add_tensor(new_name, data)
    gguf_checks.finish_gguf(w)


def _build(kind, ftype, directory):
    model = checks.random_model(kind, _config(kind), _randomize, attn_implementation="eager").eval()
    blocks = quantize_matrices(model, kind, ftype) if ftype in QUANT else None
    if ftype in ("f16", "bf16"):  # the reference holds the values the file holds, and computes in f32
        low = torch.float16 if ftype == "f16" else torch.bfloat16
        with torch.no_grad():
            for p in model.parameters():
                if p.ndim > 1:
                    p.copy_(p.to(low).float())
    path = os.path.join(directory, f"{kind}-{ftype}.gguf")
    write_gguf(model, kind, path, ftype, blocks)
    return model, path


CASES = [(k, f) for k in ("llama", "llama_linear_tied", "llama_rope_llama3", "qwen2", "qwen3", "gemma2", "gemma3")
         for f in ("f32", "f16")] + [("llama", "bf16"), ("qwen3", "bf16"), ("gemma2", "bf16")] + \
        [("llama", "q8_0"), ("llama_linear_tied", "q4_0"), ("qwen2", "q4_0"), ("qwen3", "q8_0"),
         ("gemma2", "q8_0"), ("gemma3", "q4_0"), ("llama_wide", "q4_k"), ("qwen2", "iq4_nl"),
         ("llama_wide", "iq4_xs")]


gguf_checks.add_gguf_case_tests(globals(), CASES, _build, VOCAB, PROMPT_LEN)


def test_directory_with_one_gguf_loads_the_same(case):
    kind, ftype, directory, path, ids, want = case
    m = Model.load(directory)
    assert m.directory == directory
    np.testing.assert_allclose(m.forward(ids), want, atol=checks.ATOL, rtol=0)


def test_synthesized_config(case):
    kind, ftype, directory, path, ids, want = case
    cfg = Model.load(path).config
    ref = _config(kind)
    assert cfg["architectures"] == [type(transformers.AutoModelForCausalLM.from_config(ref)).__name__]
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "intermediate_size", "vocab_size", "tie_word_embeddings", "max_position_embeddings"):
        assert cfg[key] == getattr(ref, key), key
    assert cfg["rms_norm_eps"] == pytest.approx(ref.rms_norm_eps, rel=1e-6)
    assert cfg["bos_token_id"] == 1 and cfg["eos_token_id"] == 2
    # quantized files compute in f32
    assert cfg["torch_dtype"] == {"f16": "float16", "bf16": "bfloat16"}.get(ftype, "float32")


def test_transformers_gguf_loader_agrees(case):
    """transformers' GGUF loader undoes the converter's edits independently (its own name map, reverse permute,
    norm - 1). Its synthesized config drops what this test's models rely on (rope scaling, Gemma's softcaps,
    query_pre_attn_scalar and layer pattern; qwen3's head_dim), so the weights it reads are run under the
    true config."""
    pytest.importorskip("accelerate")  # transformers loads GGUF only with it (requirements.txt has it)
    kind, ftype, directory, path, ids, want = case
    ref = transformers.AutoModelForCausalLM.from_pretrained(
        directory, gguf_file=os.path.basename(path), config=_config(kind), dtype=torch.float32,
        attn_implementation="eager").eval()
    got = Model.load(path).forward(ids)
    np.testing.assert_allclose(got, checks.reference_logits(ref, ids), atol=checks.ATOL, rtol=0)


def test_unsupported_architecture_is_named(tmp_path):
    path = str(tmp_path / "x.gguf")
    w = gguf.GGUFWriter(path, "bert")
    w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    gguf_checks.finish_gguf(w)
    with pytest.raises(ValueError, match=r"x\.gguf: key 'general\.architecture': 'bert' is not supported"):
        Model.load(path)



@pytest.mark.parametrize("key", ["llama.attention.layer_norm_rms_epsilon", "llama.rope.freq_base"])
def test_a_float_the_model_reads_must_be_finite(tmp_path, key):
    """A NaN epsilon or RoPE base is refused naming the key and the file, as a NaN in config.json is, instead of
    becoming null in the synthesized config and so the default."""
    model = checks.random_model("llama", _config("llama"), _randomize, attn_implementation="eager").eval()
    if key.endswith("epsilon"):
        model.config.rms_norm_eps = float("nan")
    else:
        model.config.rope_parameters["rope_theta"] = float("nan")
    path = str(tmp_path / "nan.gguf")
    write_gguf(model, "llama", path, "f32")
    for load in (Model.load, _core.model_config_json):
        with pytest.raises(ValueError, match=rf"nan\.gguf: key '{key}': must be a finite number, got nan"):
            load(path)

def test_two_ggufs_in_a_directory_are_refused(tmp_path):
    for name in ("a.gguf", "b.gguf"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(ValueError, match=r"several \.gguf files \(a\.gguf, b\.gguf\)"):
        Model.load(str(tmp_path))


def _unpermute_rows(rows, n_head):
    """The inverse of the converter's permute on whole rows (raw bytes of any format: blocks run along a row)."""
    return rows.reshape(n_head, rows.shape[0] // n_head // 2, 2, -1).swapaxes(1, 2).reshape(rows.shape)


def test_smollm2_tensors_under_hf_names():
    """The real Q4_1 SmolLM2 file: every tensor exposed under its Hugging Face name with the converter's shape,
    format and bytes; Q and K with their (quantized) rows put back in Hugging Face order."""
    from test_gguf_reader import SMOLLM2
    assert os.path.exists(SMOLLM2), f"{SMOLLM2} is missing: run scripts/setup.sh"
    cfg = json.loads(_core.model_config_json(SMOLLM2))  # config only: running it needs quantized Linear weights
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["model_type"] == "llama"
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
            cfg["intermediate_size"], cfg["vocab_size"], cfg["head_dim"]) == (576, 30, 9, 3, 1536, 49152, 64)
    assert cfg["tie_word_embeddings"] is True and cfg["rope_theta"] == 100000.0
    assert (cfg["bos_token_id"], cfg["eos_token_id"], cfg["pad_token_id"]) == (1, 2, 2)
    # transformers' own reading of the same metadata agrees on every key it maps
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    ref = load_gguf_checkpoint(SMOLLM2, return_tensors=False)["config"]
    for key, value in ref.items():
        if key not in ("_model_name_or_path", "unk_token_id"):
            assert cfg[key] == (pytest.approx(value) if isinstance(value, float) else value), key

    reader = gguf.GGUFReader(SMOLLM2)
    raw = {t.name: t for t in reader.tensors}
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 30)
    tensors = _core.model_tensors(SMOLLM2)
    assert len(tensors) == len(raw) == 272
    for t in tensors:
        r = raw[t["stored_name"]]
        assert names.get_name(t["name"], try_suffixes=(".weight", ".bias")) == t["stored_name"]
        assert t["shape"] == [int(n) for n in reversed(r.shape)] and t["type_name"] == r.tensor_type.name
        assert t["quantized"] == (r.tensor_type.name not in ("F32", "F16", "BF16"))
        rows = np.frombuffer(r.data.tobytes(), np.uint8).reshape(t["shape"][0], -1)
        if t["stored_name"].endswith(("attn_q.weight", "attn_k.weight")):
            rows = _unpermute_rows(rows, 9 if "attn_q" in t["stored_name"] else 3)
        assert t["data"] == rows.tobytes(), t["name"]
    q = next(t for t in tensors if t["name"] == "model.layers.0.self_attn.q_proj.weight")
    assert q["type_name"] == "Q4_1" and q["shape"] == [576, 576] and q["data"] != raw["blk.0.attn_q.weight"].data.tobytes()


def test_chat_template_and_eos_ids_from_the_metadata(tmp_path):
    """A GGUF's tokenizer.chat_template (and the named ones the converter writes as tokenizer.chat_template.NAME),
    with the special-token strings its ids name, and its EOS / EOT ids: from the file or its directory."""
    from attnzoo.chat import load_chat_template
    path = str(tmp_path / "chat.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["a", "<s>", "</s>", "<|eot|>", "<unk>"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_eot_token_id(3)
    w.add_unk_token_id(4)
    w.add_chat_template([{"name": "default", "template": "{{ bos_token }}{{ messages[0]['content'] }}{{ eos_token }}"},
                         {"name": "tool_use", "template": "tools: {{ tools | length }} {{ unk_token }}"}])
    gguf_checks.finish_gguf(w)
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    for source in (path, str(tmp_path)):
        assert load_chat_template(source) == ("{{ bos_token }}{{ messages[0]['content'] }}{{ eos_token }}", special)
        assert load_chat_template(source, "tool_use") == ("tools: {{ tools | length }} {{ unk_token }}", special)
        with pytest.raises(ValueError, match=r"chat\.gguf: no chat template named 'rag' \(key "
                                             r"'tokenizer\.chat_template\.rag' is absent\)"):
            load_chat_template(source, "rag")
        assert _core.load_eos_token_ids(source) == [2, 3]
    # A directory with Hugging Face tokenizer files keeps using them.
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "hf", "eos_token": "</s>"}))
    assert load_chat_template(str(tmp_path)) == ("hf", {"eos_token": "</s>"})
    assert load_chat_template(path)[0].startswith("{{ bos_token }}")
