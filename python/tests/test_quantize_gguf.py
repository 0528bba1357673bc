"""attnzoo quantize with a GGUF file as its source (llama-quantize's use: GGUF in, GGUF out), against independent
references:
  - tiny transformers Llama / Qwen3 checkpoints written as F32 / F16 GGUF by our exporter, then quantized from that
    file: from F32 the whole file equals the one the Hugging Face path writes directly (the same floats, the same
    policy, metadata and layout); from F16 / BF16 every tensor equals quantizing its stored values (gguf.quants for the
    round-to-nearest formats) and the metadata equals the direct file's;
  - a file written by gguf-py's own GGUFWriter (32-byte alignment, no general.alignment key, F16 matrices): read
    back by gguf.GGUFReader with every key kept, types by the policy, attnzoo's logits close to transformers';
  - requantizing (Q8_0 -> Q4_K) refused by name without --allow-requantize, then gguf.quants' dequantized values
    quantized again with it; --calibration on a GGUF source equal to the Hugging Face path's;
  - bad input: unknown type, truncated file, a split part: one line naming the file / tensor / flag."""
import os
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import model_checks as checks  # noqa: E402
from attnzoo import quant  # noqa: E402
from attnzoo.model import Model  # noqa: E402
from test_gpt_oss_mxfp4_gguf import case  # noqa: E402, F401 (the gpt-oss checkpoints, a module fixture)
from test_quantize import (LOGIT_TOL, SINGLE_API, TEXT, VOCAB, _cli, _expected_types,  # noqa: E402, F401
                           _randomize, _tokenizer, checkpoint, single_type)  # checkpoint: a module fixture

MATMUL_PRECISION = "highest"
T = gguf.GGMLQuantizationType
RTN = (T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1)


def _run(src, out, qtype, *extra):
    r = _cli("quantize", "-m", str(src), "-o", str(out), "--type", *single_type(qtype), *extra)
    assert r.returncode == 0, r.stderr
    return r


def _fields(path):
    """{key: (value types, contents)} of every metadata key, general.file_type and the reader's own GGUF.* aside."""
    out = {}
    for k, f in gguf.GGUFReader(str(path)).fields.items():
        if not k.startswith("GGUF.") and k != "general.file_type":
            out[k] = (list(f.types), f.contents())
    return out


def _file_type(path):
    return gguf.GGUFReader(str(path)).fields["general.file_type"].contents()


def _blocks(values, qtype):
    """The blocks of f32 `values` in `qtype`: gguf.quants' for the round-to-nearest formats, else attnzoo's
    quantizer called directly (its scale search is checked against llama.cpp's in test_quantize_blocks.py)."""
    if qtype in RTN:
        return np.ascontiguousarray(gguf.quants.quantize(values, qtype)).view(np.uint8).reshape(-1)
    return quant.quantize(values, qtype).reshape(-1)


@pytest.mark.parametrize("qtype", ["Q4_K", "Q8_0", "IQ4_XS"])
def test_from_f32_gguf_equals_the_direct_file(checkpoint, qtype, tmp_path):
    kind, directory = checkpoint[:2]
    _run(directory, tmp_path / "f32.gguf", "F32")
    _run(directory, tmp_path / "direct.gguf", qtype)
    _run(tmp_path / "f32.gguf", tmp_path / "from_gguf.gguf", qtype)
    direct, ours = (tmp_path / "direct.gguf").read_bytes(), (tmp_path / "from_gguf.gguf").read_bytes()
    assert len(direct) == len(ours)
    assert direct == ours  # metadata (file_type included), order, alignment, every tensor's bytes
    reader = gguf.GGUFReader(str(tmp_path / "from_gguf.gguf"))
    for t in reader.tensors:
        shape = [int(n) for n in reversed(t.shape)]
        assert t.tensor_type.name == _expected_types(t.name, shape, qtype, tied=kind == "qwen3"), t.name
    assert reader.alignment == 32 and all(t.data_offset % 32 == 0 for t in reader.tensors)  # llama.cpp's default


@pytest.mark.parametrize("source,qtype", [("F16", "Q4_K"), ("F16", "Q8_0"), ("F16", "IQ4_XS"), ("F16", "Q5_0"),
                                          ("BF16", "Q4_K"), ("BF16", "Q6_K")])
def test_from_f16_bf16_gguf_quantizes_the_stored_values(checkpoint, source, qtype, tmp_path):
    kind, directory, model, ids, want = checkpoint
    _run(directory, tmp_path / "f16.gguf", source)
    _run(directory, tmp_path / "direct.gguf", qtype)
    r = _run(tmp_path / "f16.gguf", tmp_path / "from_f16.gguf", qtype)
    assert "warning" not in r.stderr
    src = {t.name: t for t in gguf.GGUFReader(str(tmp_path / "f16.gguf")).tensors}
    direct = {t.name: t for t in gguf.GGUFReader(str(tmp_path / "direct.gguf")).tensors}
    out = gguf.GGUFReader(str(tmp_path / "from_f16.gguf")).tensors
    assert [t.name for t in out] == list(src)  # the source's order
    for t in out:
        assert t.tensor_type == direct[t.name].tensor_type, t.name
        values = gguf.quants.dequantize(src[t.name].data, src[t.name].tensor_type)
        values = values.reshape([int(n) for n in reversed(src[t.name].shape)]).astype(np.float32)
        stored = np.frombuffer(t.data.tobytes(), np.uint8)
        assert np.array_equal(stored, _blocks(values, t.tensor_type)), t.name
    assert _fields(tmp_path / "from_f16.gguf") == _fields(tmp_path / "direct.gguf")
    assert _file_type(tmp_path / "from_f16.gguf") == _file_type(tmp_path / "direct.gguf")
    got = Model.load(str(tmp_path / "from_f16.gguf")).forward(ids)
    err = np.sqrt(np.mean((got - want) ** 2)) / want.std()
    assert err < LOGIT_TOL[qtype], (qtype, err)


def _rewrite_with_gguf_py(src, dst):
    """src's metadata and tensors written again by gguf-py's GGUFWriter (its default 32-byte alignment, no
    general.alignment key), matrices as F16, vectors F32."""
    reader = gguf.GGUFReader(str(src))
    arch = reader.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(str(dst), arch)
    for k, f in reader.fields.items():
        if k.startswith("GGUF.") or k in ("general.architecture", "general.alignment"):
            continue
        sub = f.types[1] if len(f.types) > 1 else None
        w.add_key_value(k, f.contents(), f.types[0], sub)
    for t in reader.tensors:
        shape = [int(n) for n in reversed(t.shape)]
        values = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
        w.add_tensor(t.name, values.astype(np.float16 if len(shape) > 1 else np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_py_written_source(checkpoint, tmp_path):
    kind, directory, model, ids, want = checkpoint
    _run(directory, tmp_path / "f32.gguf", "F32")
    _rewrite_with_gguf_py(tmp_path / "f32.gguf", tmp_path / "gguf_py.gguf")
    _run(tmp_path / "gguf_py.gguf", tmp_path / "q4k.gguf", "Q4_K")
    src = gguf.GGUFReader(str(tmp_path / "gguf_py.gguf"))
    out = gguf.GGUFReader(str(tmp_path / "q4k.gguf"))
    assert out.alignment == 32 and "general.alignment" not in out.fields
    src_fields = _fields(tmp_path / "gguf_py.gguf")
    out_fields = _fields(tmp_path / "q4k.gguf")
    assert out_fields.pop("general.quantization_version")[1] == 2
    assert out_fields == src_fields  # tokenizer, chat template, every key as gguf-py wrote it
    assert _file_type(tmp_path / "q4k.gguf") == int(gguf.LlamaFileType.MOSTLY_Q4_K_M)  # --pure keeps Q4_K's
    srcs = {t.name: t for t in src.tensors}
    for t in out.tensors:
        shape = [int(n) for n in reversed(t.shape)]
        assert t.tensor_type.name == _expected_types(t.name, shape, "Q4_K"), t.name
        values = gguf.quants.dequantize(srcs[t.name].data, srcs[t.name].tensor_type).reshape(shape)
        assert np.array_equal(np.frombuffer(t.data.tobytes(), np.uint8),
                              _blocks(values.astype(np.float32), t.tensor_type)), t.name
    m = Model.load(str(tmp_path / "q4k.gguf"))
    got = m.forward(ids)
    err = np.sqrt(np.mean((got - want) ** 2)) / want.std()
    assert err < LOGIT_TOL["Q4_K"], err
    r = _cli("generate", "-m", str(tmp_path / "q4k.gguf"), "-p", "the quick brown", "-n", "4")
    assert r.returncode == 0, r.stderr


def test_requantize_needs_the_flag(checkpoint, tmp_path):
    kind, directory = checkpoint[:2]
    _run(directory, tmp_path / "q8.gguf", "Q8_0")
    r = _cli("quantize", "-m", str(tmp_path / "q8.gguf"), "-o", str(tmp_path / "q4k.gguf"), "--type", "Q4_K")
    assert r.returncode != 0 and not os.path.exists(tmp_path / "q4k.gguf")
    line = r.stderr.strip()
    assert re.search(r"q8\.gguf: tensor '[^']+' is already quantized \(Q8_0\); quantizing it again to \w+ .*"
                     r"--allow-requantize", line), line
    # the same type: copied without the flag, byte for byte
    _run(tmp_path / "q8.gguf", tmp_path / "q8_again.gguf", "Q8_0")
    assert (tmp_path / "q8.gguf").read_bytes() == (tmp_path / "q8_again.gguf").read_bytes()

    r = _run(tmp_path / "q8.gguf", tmp_path / "q4k.gguf", "Q4_K", "--allow-requantize")
    assert "warning:" in r.stderr and "dequantized and quantized again" in r.stderr
    src = {t.name: t for t in gguf.GGUFReader(str(tmp_path / "q8.gguf")).tensors}
    for t in gguf.GGUFReader(str(tmp_path / "q4k.gguf")).tensors:
        shape = [int(n) for n in reversed(t.shape)]
        assert t.tensor_type.name == _expected_types(t.name, shape, "Q4_K"), t.name
        values = gguf.quants.dequantize(src[t.name].data, src[t.name].tensor_type).reshape(shape)
        if t.tensor_type == src[t.name].tensor_type:
            assert t.data.tobytes() == src[t.name].data.tobytes(), t.name
        else:
            assert np.array_equal(np.frombuffer(t.data.tobytes(), np.uint8),
                                  _blocks(values.astype(np.float32), t.tensor_type)), t.name


def test_calibration_from_gguf_equals_the_direct_one(checkpoint, tmp_path):
    """--calibration runs the model loaded from the GGUF file; from F32 its activations, hence the importance
    and every searched block, are those of the Hugging Face path."""
    kind, directory = checkpoint[:2]
    (tmp_path / "calib.txt").write_text((TEXT + " ") * 12)
    calib = ["--calibration", str(tmp_path / "calib.txt")]
    _run(directory, tmp_path / "f32.gguf", "F32")
    _run(directory, tmp_path / "direct.gguf", "Q4_K", *calib)
    _run(tmp_path / "f32.gguf", tmp_path / "from_gguf.gguf", "Q4_K", *calib)
    _run(tmp_path / "f32.gguf", tmp_path / "plain.gguf", "Q4_K")
    direct = {t.name: t.data.tobytes() for t in gguf.GGUFReader(str(tmp_path / "direct.gguf")).tensors}
    ours = {t.name: t.data.tobytes() for t in gguf.GGUFReader(str(tmp_path / "from_gguf.gguf")).tensors}
    plain = {t.name: t.data.tobytes() for t in gguf.GGUFReader(str(tmp_path / "plain.gguf")).tensors}
    assert ours == direct
    assert sum(ours[n] != plain[n] for n in ours) >= 8  # the importance reached the projections


def test_python_api_on_a_gguf_source(checkpoint, tmp_path):
    import attnzoo
    kind, directory = checkpoint[:2]
    _run(directory, tmp_path / "q8.gguf", "Q8_0")
    _run(tmp_path / "q8.gguf", tmp_path / "cli.gguf", "Q5_K", "--allow-requantize", "--tensor-type", "ffn_down=Q8_0")
    s = attnzoo.quantize(tmp_path / "q8.gguf", tmp_path / "api.gguf", type="q5_k", tensor_types={"ffn_down": "Q8_0"},
                         allow_requantize=True, **SINGLE_API)
    assert (tmp_path / "cli.gguf").read_bytes() == (tmp_path / "api.gguf").read_bytes()
    assert s["architecture"] == kind and s["tokenizer"] and s["requantized"] > 0
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(tmp_path / "api.gguf")).tensors}
    assert {t["name"]: t["type"] for t in s["tensors"]} == types
    assert all(t["source_type"] in ("F32", "Q8_0") for t in s["tensors"])
    with pytest.raises(ValueError, match=r"is already quantized \(Q8_0\)"):
        attnzoo.quantize(tmp_path / "q8.gguf", tmp_path / "x.gguf", type="Q4_K")


@pytest.mark.parametrize("case", ["unknown_type", "truncated", "split_part", "bad_pattern", "same_file"])
def test_bad_gguf_input_one_line(checkpoint, case, tmp_path):
    kind, directory = checkpoint[:2]
    _run(directory, tmp_path / "f16.gguf", "F16")
    src, out = tmp_path / "f16.gguf", str(tmp_path / "out.gguf")
    extra = []
    if case == "unknown_type":
        extra, msg = ["--type", "Q3_X"], r"--type: unknown type 'Q3_X' \(choose from"
    elif case == "truncated":
        data = src.read_bytes()
        (tmp_path / "cut.gguf").write_bytes(data[: len(data) - 1000])
        src, msg = tmp_path / "cut.gguf", r"cut\.gguf: tensor '[^']+'.*(past|beyond|end)"
    elif case == "split_part":
        _rewrite_with_split_key(src, tmp_path / "part.gguf")
        src, msg = tmp_path / "part.gguf", r"part\.gguf: key 'split\.count': this is one part of a split GGUF"
    elif case == "bad_pattern":
        extra, msg = ["--tensor-type", "attn_(q=Q4_0"], r"--tensor-type\): pattern 'attn_\(q' is not a valid"
    else:
        out, msg = str(src), r"out \(-o\): '.*f16\.gguf' is the source file itself"
    r = _cli("quantize", "-m", str(src), "-o", out, *extra)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnzoo: error: "), r.stderr
    assert re.search(msg, lines[0]), lines[0]
    if case != "same_file":
        assert not os.path.exists(out) and not os.path.exists(out + ".partial")


def _rewrite_with_split_key(src, dst):
    reader = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(dst), reader.fields["general.architecture"].contents())
    w.add_uint16("split.no", 0)
    w.add_uint16("split.count", 2)
    for t in reader.tensors[:2]:
        shape = [int(n) for n in reversed(t.shape)]
        w.add_tensor(t.name, gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_moe_calibration_reaches_each_expert_slice(tmp_path):
    """Qwen3-MoE: the experts' stacked ffn_*_exps tensors take each expert's own importance on its slice of rows,
    as the Hugging Face path gives each expert tensor its own: the two files are equal, and the experts differ
    from plain quantization."""
    directory = str(tmp_path / "hf")
    cfg = transformers.Qwen3MoeConfig(vocab_size=VOCAB, max_position_embeddings=256, rms_norm_eps=1e-5,
                                      initializer_range=0.05, hidden_size=256, intermediate_size=512,
                                      moe_intermediate_size=256, num_experts=4, num_experts_per_tok=2,
                                      norm_topk_prob=True, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=64, tie_word_embeddings=False)
    checks.save_random_model("qwen3moe", cfg, directory, _randomize, attn_implementation="eager")
    _tokenizer("qwen3").save_pretrained(directory)
    (tmp_path / "calib.txt").write_text((TEXT + " ") * 12)
    calib = ["--calibration", str(tmp_path / "calib.txt")]
    _run(directory, tmp_path / "f32.gguf", "F32")
    _run(directory, tmp_path / "direct.gguf", "Q4_K", *calib)
    _run(tmp_path / "f32.gguf", tmp_path / "from_gguf.gguf", "Q4_K", *calib)
    _run(tmp_path / "f32.gguf", tmp_path / "plain.gguf", "Q4_K")
    read = lambda p: {t.name: t.data.tobytes() for t in gguf.GGUFReader(str(p)).tensors}  # noqa: E731
    direct, ours = read(tmp_path / "direct.gguf"), read(tmp_path / "from_gguf.gguf")
    plain = read(tmp_path / "plain.gguf")
    assert ours == direct
    experts = [n for n in ours if "_exps" in n]
    assert len(experts) == 6 and all(ours[n] != plain[n] for n in experts)
    # every expert's slice (4 per tensor) calibrated: each differs from its plain slice
    for n in experts:
        size = len(ours[n]) // 4
        assert all(ours[n][e * size:(e + 1) * size] != plain[n][e * size:(e + 1) * size] for e in range(4)), n


SMOLLM2 = os.path.join(os.path.dirname(__file__), "..", "..", ".models", "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.mark.skipif(not os.path.exists(SMOLLM2), reason="scripts/setup.sh fetches SmolLM2-135M-Instruct.Q4_1.gguf")
def test_llama_cpp_written_q4_1_file(tmp_path):
    """A file llama.cpp wrote (SmolLM2-135M, Q4_1 with a Q8_0 embedding): refused by tensor without the flag; with it,
    every key but file_type kept, each requantized tensor equal to quantizing gguf.quants' decoding of the source,
    and the result generates."""
    out = tmp_path / "q4k.gguf"
    r = _cli("quantize", "-m", SMOLLM2, "-o", str(out), "--type", "Q4_K")
    assert r.returncode != 0 and re.search(r"Q4_1\.gguf: tensor '[^']+' is already quantized \(Q4_1\)", r.stderr)
    _run(SMOLLM2, out, "Q4_K", "--allow-requantize")
    src, dst = gguf.GGUFReader(SMOLLM2), gguf.GGUFReader(str(out))
    assert _fields(out) == _fields(SMOLLM2)
    assert _file_type(out) == int(gguf.LlamaFileType.MOSTLY_Q4_K_M) and dst.alignment == src.alignment
    srcs = {t.name: t for t in src.tensors}
    assert [t.name for t in dst.tensors] == list(srcs)
    checked = 0
    for t in dst.tensors:
        s = srcs[t.name]
        if t.tensor_type == s.tensor_type:
            assert t.data.tobytes() == s.data.tobytes(), t.name
        elif checked < 12:  # a sample: the whole model's K-quant search in Python's loop would take minutes
            shape = [int(n) for n in reversed(t.shape)]
            values = gguf.quants.dequantize(s.data, s.tensor_type).reshape(shape).astype(np.float32)
            assert np.array_equal(np.frombuffer(t.data.tobytes(), np.uint8), _blocks(values, t.tensor_type)), t.name
            checked += 1
    assert checked == 12
    r = _cli("generate", "-m", str(out), "-p", "The capital of France is", "-n", "8")
    assert r.returncode == 0, r.stderr


FAMILIES = {"jamba": ("test_model_jamba", "attn_every_2nd_moe_every_2nd"),
            "lfm2moe": ("test_model_lfm2_moe", "dense1_top2_of_4"),
            "nemotron_h": ("test_model_nemotron_h", "biased_grouped"),
            "granite_hybrid": ("test_model_granite_hybrid", "granite_moe_rope"),
            "bamba": ("test_model_granite_hybrid", "bamba"),
            "kimi_linear": ("test_model_kimi_linear", "moe")}


@pytest.mark.parametrize("kind", ["mamba", "mamba2", "falcon_h1", "lfm2", "qwen3next", *FAMILIES])
def test_hybrid_families_from_f32_gguf_equal_the_direct_file(kind, tmp_path):
    """The state-space, hybrid and MLA families (the tiny checkpoints of test_gguf_hybrids.py and FAMILIES' test
    files): the tensors the Hugging Face path writes F32 by plan (conv kernels, A, D, grouped norms, routers) are
    the ones llama-quantize leaves as stored, so from the F32 file every type and byte is the direct file's
    (Kimi Linear's split kv_b_proj and KDA kernels included)."""
    import importlib
    name, variant = FAMILIES.get(kind, ("test_gguf_hybrids", kind))
    module = importlib.import_module(name)
    directory = str(tmp_path / "hf")
    checks.save_random_model(kind, module._config(variant), directory, module._randomize)
    _run(directory, tmp_path / "f32.gguf", "F32")
    for qtype in ("Q8_0", "Q4_K"):
        _run(directory, tmp_path / "direct.gguf", qtype)
        _run(tmp_path / "f32.gguf", tmp_path / "from_gguf.gguf", qtype)
        assert (tmp_path / "direct.gguf").read_bytes() == (tmp_path / "from_gguf.gguf").read_bytes(), qtype


def test_gpt_oss_from_f32_gguf_equals_the_direct_file(case, tmp_path):
    """gpt-oss (test_gpt_oss_mxfp4_gguf.py's tiny checkpoints), dense and with MXFP4 experts: the GGUF written at F32
    (MXFP4 experts kept as they are) quantized to Q8_0 is the direct Q8_0 file, the MXFP4 experts still MXFP4."""
    for source in ("dense_dir", "mx_dir"):
        _run(case[source], tmp_path / "f32.gguf", "F32")
        _run(case[source], tmp_path / "direct.gguf", "Q8_0")
        _run(tmp_path / "f32.gguf", tmp_path / "from_gguf.gguf", "Q8_0")
        assert (tmp_path / "direct.gguf").read_bytes() == (tmp_path / "from_gguf.gguf").read_bytes(), source
    types = {t.name: t.tensor_type for t in gguf.GGUFReader(str(tmp_path / "from_gguf.gguf")).tensors}
    assert types["blk.1.ffn_up_exps.weight"] == T.MXFP4 and types["blk.1.attn_q.weight"] == T.Q8_0
