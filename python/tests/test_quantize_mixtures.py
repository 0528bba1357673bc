"""llama-quantize's mixture file types (`attnzoo quantize --type Q2_K_M (llama-quantize's Q2_K) | Q2_K_S | Q3_K_S |
Q3_K_M | Q3_K_L | Q4_K_M | Q4_K_S | Q5_K_M | Q5_K_S | IQ4_NL | IQ4_XS`, and --pure), against independent references:
  - llama.cpp's rules (llama-quant.cpp's llama_tensor_get_type), restated here in Python from its source and
    independent of the C++ table: every tensor's type, for every mixture, of tiny Llama (GQA 4, untied; GQA 1, tied),
    Qwen3 (rows of 128 that fall back), Mixtral with 8 experts, LFM2 (a conv / attention hybrid whose layer 0 has
    no KV heads) and Qwen3-Next (4 experts; its linear layers' attn_qkv count as attn_v), from the checkpoint
    directory and from its F32 GGUF;
  - llama-quantize itself where scripts/build_llama_bench.sh built it: the same F32 GGUF quantized by it and by us
    in every file type both know (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q6_K, the mixtures and the
    aliases Q2_K ... Q5_K), with and without --pure, every tensor's type and general.file_type equal (Q2_K_S, and
    Q4_0 / Q5_0 once more, with an imatrix of ones); and SmolLM2-135M's Q4_1 file requantized to Q4_K_M, Q2_K_M,
    Q3_K_S, Q3_K_M and Q3_K_L by both;
  - the files load and run: attnzoo's logits close to the f32 model's, llama.cpp's llama-bench generating from
    them where built; SmolLM2-135M's perplexity on the Sherlock Holmes text is lower in Q4_K_M than in Q4_K and
    higher than in Q6_K (a bump the wrong way round fails it), and falls from the single Q2_K through Q2_K_M (the
    same types as Q3_K_S there), Q3_K_M and Q3_K_L to Q4_K_M;
  - Q2_K_S is refused without an importance matrix, as llama-quantize refuses it;
  - the single types read llama.cpp's rules too: an 8-expert model's attn_k / attn_v in Q8_0, an untied token
    embedding in the main type, Q4_0 / Q5_0's first ffn_down layers in Q4_1 / Q5_1 with an imatrix.
Elsewhere "single" (every matrix in Q2_K ... Q5_K) is test_quantize.single_type: --pure and a Q6_K head."""
import glob
import os
import struct
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402
from test_quantize import CLI, SINGLE_FLAGS, VOCAB, _cli, _randomize, _tokenizer, single_type  # noqa: E402

MATMUL_PRECISION = "highest"
LLAMA_CACHE = os.environ.get("ATTNZOO_LLAMA_CACHE", os.path.expanduser("~/.cache/attnzoo/llama.cpp"))
LLAMA_QUANTIZE = sorted(glob.glob(os.path.join(LLAMA_CACHE, "build-*", "bin", "llama-quantize")))
LLAMA_BENCH = sorted(glob.glob(os.path.join(LLAMA_CACHE, "build-*", "bin", "llama-bench")))
NO_LLAMA = f"llama-quantize not built under {LLAMA_CACHE}/build-*/bin (scripts/build_llama_bench.sh builds it)"

# llama.cpp's LLAMA_FTYPE_MOSTLY_* and the main type of each mixture
FILE_TYPE = {"Q2_K_M": 10, "Q2_K_S": 21, "Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K_M": 15,
             "Q5_K_S": 16, "Q5_K_M": 17, "IQ4_NL": 25, "IQ4_XS": 30}
MIXTURES = list(FILE_TYPE)
# llama-quantize's single types (and the float ones), which read the same rules: its head / tied embedding, an
# 8-expert model's attn_k / attn_v, Q4_0 / Q5_0's first ffn_down layers with an imatrix
SINGLE_FILE_TYPE = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 8, "Q5_1": 9, "Q8_0": 7, "Q6_K": 18}
FLOAT_FILE_TYPE = {"F32": 0, "F16": 1, "BF16": 32}
SINGLES = list(SINGLE_FILE_TYPE)
LLAMA_NAME = {"Q2_K_M": "Q2_K"}  # llama-quantize's name where ours differs (its Q2_K is a mixture)
NEEDS_IMATRIX = {"Q2_K_S"}
TEXT = "the quick brown fox jumps over the lazy dog, 12345 times!\nHello world. " * 8


# --- llama.cpp's rules, restated ---------------------------------------------------------------------------------

BLOCK = {"F32": 1, "F16": 1, "BF16": 1, "Q8_0": 32, "Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q5_1": 32, "IQ4_NL": 32, "Q2_K": 256,
         "Q3_K": 256, "Q4_K": 256, "Q5_K": 256, "Q6_K": 256, "IQ4_XS": 256}
SMALLER = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0", "IQ4_XS": "IQ4_NL"}


def _main(ftype):
    return ftype[:4] if ftype[:4] in ("Q2_K", "Q3_K", "Q4_K", "Q5_K") else ftype


def _category(name):
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    for key, cat in (("attn_qkv.weight", "attn_v"), ("attn_kv_b.weight", "attn_v"), ("attn_v.weight", "attn_v"),
                     ("attn_k.weight", "attn_k"), ("attn_q.weight", "attn_q"),
                     ("attn_output.weight", "attn_output"), ("ffn_up", "ffn_up"), ("ffn_gate", "ffn_gate"),
                     ("ffn_down", "ffn_down")):
        if key in name:
            return cat
    return "other"


def _quantizable(name, ne):
    """tensor_allows_quantization, for the tensors these models have (ggml_n_dims: trailing 1s do not count)."""
    dims = len(ne)
    while dims > 1 and ne[dims - 1] == 1:
        dims -= 1
    return (dims >= 2 and name.endswith("weight") and "_norm.weight" not in name
            and "ffn_gate_inp.weight" not in name and "shortconv.conv.weight" not in name
            and "ssm_conv1d" not in name)


def _layer(name):
    parts = name.split(".")
    return int(parts[1]) if parts[0] == "blk" and parts[1].isdigit() else -1


def _more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _fallback(qtype, ncols):
    if ncols % BLOCK[qtype] == 0:
        return qtype
    smaller = SMALLER.get(qtype, qtype)
    return smaller if ncols % BLOCK[smaller] == 0 else "F16"


def llama_cpp_types(tensors, meta, ftype, pure=False, imatrix=False, manual=(), output_type=None):
    """{name: type} as llama-quantize writes `ftype` from an F32 file: `tensors` [(name, ne)], `meta` the file's
    keys (general.architecture, <arch>.block_count / expert_count / attention.head_count(_kv)); `manual`
    {name: type} as --tensor-type gives them, `output_type` --output-tensor-type."""
    arch = meta["general.architecture"]
    first = lambda v: v[0] if isinstance(v, list) else v  # noqa: E731 (per-layer arrays: layer 0's)
    n_layer = meta[f"{arch}.block_count"]
    n_expert = meta.get(f"{arch}.expert_count", 0)
    n_head = first(meta[f"{arch}.attention.head_count"])
    n_head_kv = first(meta.get(f"{arch}.attention.head_count_kv", n_head))
    n_gqa = n_head // n_head_kv if n_head_kv else 0
    main = _main(ftype)
    quantized = main not in FLOAT_FILE_TYPE  # ggml_is_quantized: a float file type reads no rules
    tied = not any(name == "output.weight" for name, _ in tensors)
    n_attention_wv = sum(_category(name) == "attn_v" for name, _ in tensors)
    i_attention_wv = i_ffn_down = 0
    out = {}
    for name, ne in sorted(tensors, key=lambda t: (_layer(t[0]), t[0])):  # the loader's map order
        if not _quantizable(name, ne):
            out[name] = "F32"
            continue
        cat, new = _category(name), main
        if not quantized:
            out[name] = main
            continue
        if name in manual:  # decided by hand, then not counted
            out[name] = _fallback(manual[name], ne[0])
            continue
        if pure:
            out[name] = _fallback(new, ne[0])
            continue
        if cat == "output" or (tied and cat == "token_embd"):
            if output_type:
                new = output_type
            else:
                new = "Q8_0" if arch == "falcon" or ne[0] % BLOCK[main] or main == "Q8_0" else "Q6_K"
        elif cat == "token_embd":
            pass
        elif cat == "attn_v":
            if ftype == "Q2_K_M":
                new = "Q4_K" if n_gqa >= 4 else "Q3_K"
            elif ftype == "Q2_K_S" and n_gqa >= 4:
                new = "Q4_K"
            elif ftype == "Q3_K_M":
                new = "Q5_K" if i_attention_wv < 2 else "Q4_K"
            elif ftype == "Q3_K_L":
                new = "Q5_K"
            elif ftype in ("IQ4_NL", "IQ4_XS") and n_gqa >= 4:
                new = "Q5_K"
            elif ftype in ("Q4_K_M", "Q5_K_M") and _more_bits(i_attention_wv, n_attention_wv):
                new = "Q6_K"
            elif ftype == "Q4_K_S" and i_attention_wv < 4:
                new = "Q5_K"
            if arch == "llama" and n_layer == 80 and n_gqa > 1 and n_expert != 8 and new in ("Q3_K", "Q4_K"):
                new = "Q5_K"  # LLM_TYPE_70B (none of these models)
            if n_expert == 8:
                new = "Q8_0"
            i_attention_wv += 1
        elif cat == "attn_k":
            if n_expert == 8:
                new = "Q8_0"
        elif cat == "ffn_down":
            i_layer = _layer(name) if n_expert > 1 else i_ffn_down
            if ftype == "Q2_K_M":
                new = "Q3_K"
            elif ftype == "Q2_K_S":
                if i_layer < n_layer // 8:
                    new = "Q4_K"
            elif ftype == "Q3_K_M":
                new = "Q5_K" if i_layer < n_layer // 16 else "Q4_K"  # (falcon's Q3_K rows: no falcon here)
            elif ftype == "Q3_K_L":
                new = "Q5_K"
            elif ftype == "Q4_K_M":
                if _more_bits(i_layer, n_layer):
                    new = "Q6_K"
            elif i_layer < n_layer // 8 and ftype in ("IQ4_NL", "IQ4_XS") and not imatrix:
                new = "Q5_K"
            elif ftype == "Q5_K_M" and _more_bits(i_layer, n_layer):
                new = "Q6_K"
            elif ftype == "Q4_K_S" and i_layer < n_layer // 8:
                new = "Q5_K"
            elif ftype in ("Q4_0", "Q5_0") and imatrix and i_layer < n_layer // 8:
                new = {"Q4_0": "Q4_1", "Q5_0": "Q5_1"}[ftype]
            i_ffn_down += 1
        elif cat == "attn_output":
            if n_expert == 8:
                if ftype in ("Q2_K_M", "Q3_K_S", "Q3_K_M", "Q4_K_S", "Q4_K_M", "IQ4_NL", "IQ4_XS"):
                    new = "Q5_K"
            else:
                new = {"Q2_K_M": "Q3_K", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K"}.get(ftype, new)
        out[name] = _fallback(new, ne[0])
    return out


# --- the models --------------------------------------------------------------------------------------------------

def _config(kind):
    common = dict(vocab_size=VOCAB, max_position_embeddings=256, initializer_range=0.05, hidden_size=256)
    if kind == "llama_gqa4":  # 16 layers: use_more_bits picks 0 1 4 7 10 13 14 15
        return transformers.LlamaConfig(intermediate_size=512, num_hidden_layers=16, num_attention_heads=8,
                                        num_key_value_heads=2, tie_word_embeddings=False, **common)
    if kind == "llama_gqa1":  # ffn_down rows of 384: K-quants fall back
        return transformers.LlamaConfig(intermediate_size=384, num_hidden_layers=10, num_attention_heads=4,
                                        num_key_value_heads=4, tie_word_embeddings=True, **common)
    if kind == "qwen3":  # attn_output rows of 128
        return transformers.Qwen3Config(intermediate_size=512, num_hidden_layers=9, num_attention_heads=4,
                                        num_key_value_heads=1, head_dim=32, tie_word_embeddings=True, **common)
    if kind == "mixtral8":
        return transformers.MixtralConfig(intermediate_size=256, num_hidden_layers=8, num_attention_heads=4,
                                          num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=2,
                                          tie_word_embeddings=False, **common)
    if kind == "qwen3next":  # 4 experts; linear layers' attn_qkv count as attn_v; llama.cpp needs dv == dk
        return transformers.Qwen3NextConfig(
            intermediate_size=256, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2, head_dim=32,
            partial_rotary_factor=0.5, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
            linear_value_head_dim=32, linear_conv_kernel_dim=4, full_attention_interval=4, num_experts=4,
            num_experts_per_tok=2, moe_intermediate_size=256, shared_expert_intermediate_size=256,
            tie_word_embeddings=False, **common)
    return transformers.Lfm2Config(  # conv layers first: head_count_kv[0] is 0, so no GQA bump anywhere
        intermediate_size=512, block_auto_adjust_ff_dim=False, num_hidden_layers=8, num_attention_heads=8,
        num_key_value_heads=2, conv_L_cache=3, layer_types=["conv", "conv", "full_attention", "conv"] * 2,
        norm_eps=1e-5, tie_word_embeddings=True, **common)


def _randomize_zero_centered(model):
    """Qwen3-Next's norms compute x * (1 + w): vectors near 0 (A_log near -1)."""
    for name, p in model.named_parameters():
        if p.ndim == 1:
            p.copy_((-1.0 if name.endswith("A_log") else 0.0) + 0.2 * torch.randn_like(p))


KINDS = ["llama_gqa4", "llama_gqa1", "qwen3", "mixtral8", "lfm2", "qwen3next"]


@pytest.fixture(scope="module", params=KINDS)
def model(request, tmp_path_factory):
    kind = request.param
    directory = tmp_path_factory.mktemp(f"mix-{kind}")
    ref = checks.save_random_model(kind, _config(kind), str(directory / "hf"),
                                   _randomize_zero_centered if kind == "qwen3next" else _randomize)
    _tokenizer("llama").save_pretrained(str(directory / "hf"))
    f32 = directory / "f32.gguf"
    r = _cli("quantize", "-m", str(directory / "hf"), "-o", str(f32), "--type", "F32")
    assert r.returncode == 0, r.stderr
    return kind, directory, ref


def _read(path):
    reader = gguf.GGUFReader(str(path))
    meta = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    tensors = [(t.name, [int(n) for n in t.shape]) for t in reader.tensors]  # ne order
    return meta, tensors, {t.name: t.tensor_type.name for t in reader.tensors}


def _calibration(directory):
    calib = os.path.join(str(directory), "calib.txt")
    with open(calib, "w") as f:
        f.write(TEXT)
    return calib


def _quantize(src, out, ftype, *extra):
    if ftype in NEEDS_IMATRIX and "--pure" not in extra and "--calibration" not in extra:
        extra = (*extra, "--calibration", _calibration(os.path.dirname(str(out))))
    r = _cli("quantize", "-m", str(src), "-o", str(out), "--type", ftype, *extra)
    assert r.returncode == 0, r.stderr
    return _read(out)


def _imatrix(path, tensors):
    """llama.cpp's legacy imatrix file (entries of name, ncall, values; ncall 1) with an importance of 1 for every
    input channel (of every expert) of each matrix: llama-quantize's Q2_K_S needs one, and its types do not
    depend on the values."""
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(tensors)))
        for name, ne in tensors:
            n = ne[0] * (ne[2] if len(ne) > 2 else 1)
            f.write(struct.pack("<i", len(name)) + name.encode() + struct.pack("<ii", 1, n))
            f.write(np.ones(n, dtype=np.float32).tobytes())


@pytest.mark.parametrize("ftype", MIXTURES + SINGLES)
def test_every_tensor_as_llama_cpps_rules(model, ftype):
    kind, directory = model[:2]
    meta, tensors, _ = _read(directory / "f32.gguf")
    want = llama_cpp_types(tensors, meta, ftype)
    for src in (directory / "hf", directory / "f32.gguf"):
        got_meta, _, got = _quantize(src, directory / f"{ftype}.gguf", ftype)
        assert got == want, (src, {n: (got[n], want[n]) for n in want if got.get(n) != want[n]})
        assert got_meta["general.file_type"] == {**FILE_TYPE, **SINGLE_FILE_TYPE}[ftype]
    # the rules really raise something in these shapes (Q5_K_S, Q3_K_S and the single types only an 8-expert
    # model's attn_k / attn_v, to the Q8_0 that Q8_0 has already)
    pure = llama_cpp_types(tensors, meta, ftype, pure=True)
    raised = {n for n in want if want[n] != pure[n] and not n.startswith(("output", "token_embd"))}
    assert raised or (ftype in ("Q5_K_S", "Q3_K_S", *SINGLES) and (kind != "mixtral8" or ftype == "Q8_0")), \
        (kind, ftype)
    if ftype in ("Q4_0", "Q5_0"):  # with an imatrix, the first n/8 ffn_down layers one step up (Q4_1 / Q5_1)
        got = _quantize(directory / "f32.gguf", directory / f"{ftype}-i.gguf", ftype, "--calibration",
                        _calibration(directory))[2]
        want = llama_cpp_types(tensors, meta, ftype, imatrix=True)
        assert got == want, {n: (got[n], want[n]) for n in want if got.get(n) != want[n]}
        assert {want[n] for n in want if "ffn_down" in n} == {ftype, ftype[:3] + "1"}, want


@pytest.mark.parametrize("ftype", ["Q4_K_M", "IQ4_XS"])
def test_pure_and_overrides(model, ftype):
    kind, directory = model[:2]
    meta, tensors, _ = _read(directory / "f32.gguf")
    _, _, got = _quantize(directory / "f32.gguf", directory / "pure.gguf", ftype, "--pure")
    assert got == llama_cpp_types(tensors, meta, ftype, pure=True)
    # an override decides its tensor and is not counted by the rules (Q4_K_M's attn_v ranks move); a tied
    # embedding follows --output-tensor-type
    _, _, got = _quantize(directory / "f32.gguf", directory / "over.gguf", ftype, "--tensor-type",
                          r"blk\.0\.attn_v=Q8_0", "--output-tensor-type", "Q5_K")
    manual = {"blk.0.attn_v.weight": "Q8_0"} if "blk.0.attn_v.weight" in got else {}
    assert got == llama_cpp_types(tensors, meta, ftype, manual=manual, output_type="Q5_K")


# Every file type `attnzoo quantize --type` shares with llama-quantize, by llama-quantize's names (its Q2_K is our
# Q2_K_M; its Q3_K, Q4_K and Q5_K name the _M mixtures, as ours do)
LLAMA_ALIASES = {"Q2_K": "Q2_K_M", "Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}
LLAMA_FILE_TYPES = [*FLOAT_FILE_TYPE, *SINGLES, *LLAMA_ALIASES, *(m for m in MIXTURES if m != "Q2_K_M")]
ALL_FILE_TYPE = {**FILE_TYPE, **SINGLE_FILE_TYPE, **FLOAT_FILE_TYPE}
PARITY_KINDS = ("llama_gqa1", "llama_gqa4", "mixtral8")  # dense, GQA 4, 8 experts: every type
# --pure reads no rule that depends on the model's shape: one model checks every type with it (CI time)
PURE_KIND = "llama_gqa4"


@pytest.mark.skipif(not LLAMA_QUANTIZE, reason=NO_LLAMA)
@pytest.mark.parametrize("name", LLAMA_FILE_TYPES)
def test_llama_quantize_writes_the_same_types(model, name, tmp_path):
    """`attnzoo quantize --type NAME` and `llama-quantize IN OUT NAME` from the same F32 GGUF, with and without
    --pure (Q4_0 / Q5_0 also with an imatrix, Q2_K_S only with one): every tensor's type and general.file_type
    equal, and equal to the Python restatement above. Every name on the dense, GQA and 8-expert models (--pure on
    the GQA one); the mixtures (and the aliases with --pure) on the other three too."""
    kind, directory = model[:2]
    if kind not in PARITY_KINDS and name not in (*MIXTURES, *LLAMA_ALIASES):
        pytest.skip("the single and float types are compared on the dense, GQA and 8-expert models")
    src = directory / "f32.gguf"
    meta, tensors, _ = _read(src)
    ftype = LLAMA_ALIASES.get(name, name)
    imatrix_runs = [False, True] if name in ("Q4_0", "Q5_0") else [name in NEEDS_IMATRIX]
    if any(imatrix_runs):
        _imatrix(tmp_path / "imatrix.dat", [(n, ne) for n, ne in tensors if len(ne) >= 2])
    files = []
    for pure in (False, True) if kind == PURE_KIND or name in LLAMA_ALIASES else (False,):
        for imatrix in imatrix_runs:
            flags = ["--pure"] if pure else []
            theirs_flags = [*flags, *(["--imatrix", str(tmp_path / "imatrix.dat")] if imatrix else [])]
            r = subprocess.run([LLAMA_QUANTIZE[-1], *theirs_flags, str(src), str(tmp_path / "llama.gguf"), name, "2"],
                               capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, r.stderr[-2000:]
            theirs_meta, _, theirs = _read(tmp_path / "llama.gguf")
            ours_flags = [*flags, *(["--calibration", _calibration(tmp_path)] if imatrix else [])]
            ours_meta, _, ours = _quantize(src, tmp_path / "ours.gguf", name, *ours_flags)
            case = (name, pure, imatrix)
            assert ours == theirs, (case, {n: (ours.get(n), theirs[n]) for n in theirs if ours.get(n) != theirs[n]})
            assert ours_meta["general.file_type"] == theirs_meta["general.file_type"] == ALL_FILE_TYPE[ftype], case
            # the restatement, checked against the original
            assert theirs == llama_cpp_types(tensors, meta, ftype, pure=pure, imatrix=imatrix), case
            files.append(ours)
    if name in LLAMA_ALIASES:  # the name is a mixture, and --pure the one type
        assert files[0] != files[1]


# RMS(logits - the f32 model's) / std(logits) bounds: test_quantize.py's Q4_K bound; Qwen3-Next's tiny random
# MoE hybrid amplifies weight noise far more (measured: Q8_0 0.11, Q6_K 0.46, Q4_K 0.68, Q5_K_S 0.62); a misplaced
# block gives ~1.4.
LOGIT_BOUND = {"qwen3next": 1.0}
# The low-bit mixtures on these models (measured: Q2_K_M 0.67-1.10, single Q2_K 0.85-1.15; Q3_K_M / Q3_K_L
# 0.34-0.80, single Q3_K 0.59-0.83): bounded loosely, and each must beat the single main type on the same model.
MAIN_BOUND = {"Q2_K": 1.25, "Q3_K": 0.9}


@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q5_K_S", "IQ4_NL", "Q2_K_M", "Q3_K_M", "Q3_K_L"])
def test_files_load_and_run(model, ftype, tmp_path):
    kind, directory, ref = model
    out = tmp_path / f"{kind}-{ftype}.gguf"
    _, _, types = _quantize(directory / "hf", out, ftype)
    ids = checks.prompt(VOCAB, 24)
    want = checks.meaningful_logits(ref, ids)
    # llama-quantize raises Qwen3-Next's attn_qkv as an attn_v and not attn_gate: the loader keeps the two apart
    # (in_proj_qkv / in_proj_z) instead of gathering them into in_proj_qkvz; Q4_K_M must take that path here
    split = [n for n in types if n.endswith("attn_qkv.weight") and types[n] != types[n.replace("qkv", "gate")]]
    assert split or (kind, ftype) != ("qwen3next", "Q4_K_M"), types

    def error(path):
        return np.sqrt(np.mean((Model.load(str(path)).forward(ids) - want) ** 2)) / want.std()
    err = error(out)
    if kind == "qwen3next" and _main(ftype) in ("Q2_K", "Q3_K"):
        # 2-3 bits leave this tiny random hybrid's logits as far from the f32 ones as noise (relative error 1.0-1.3,
        # mixture and single type alike): the file loads (attn_qkv and attn_gate in two types) and runs, no more
        assert np.isfinite(err) and split, (ftype, err)
    elif _main(ftype) in ("Q2_K", "Q3_K"):
        # 2-3 bits on these random tiny models: closer to the f32 logits than the file with every matrix in the main
        # type (the mixtures raise some)
        _quantize(directory / "hf", tmp_path / "single.gguf", _main(ftype), *SINGLE_FLAGS)
        single = error(tmp_path / "single.gguf")
        assert err < single, (kind, ftype, err, single)
        assert err < MAIN_BOUND[_main(ftype)], (kind, ftype, err)
    else:
        assert err < LOGIT_BOUND.get(kind, 0.5), (kind, ftype, err)
    if LLAMA_BENCH:  # llama.cpp loads the file and generates from it
        r = subprocess.run([LLAMA_BENCH[-1], "-m", str(out), "-p", "0", "-n", "4", "-r", "1", "-t", "2", "-o", "csv"],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.skipif(not LLAMA_QUANTIZE, reason=NO_LLAMA)
def test_llama_quantize_q4_k_m_files_load_and_run(model, tmp_path):
    """llama-quantize's own Q4_K_M file of each tiny model, from our F32 GGUF (Qwen3-Next's attn_qkv raised above
    attn_gate), loads and its logits stay within the bound of the f32 model's; llama.cpp loads it too. (Our files
    once said general.alignment 64, which llama-quantize copies while padding to 32: neither loaded its output.)"""
    kind, directory, ref = model
    out = tmp_path / "llama.gguf"
    r = subprocess.run([LLAMA_QUANTIZE[-1], str(directory / "f32.gguf"), str(out), "Q4_K_M", "2"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    _, _, types = _read(out)
    if kind == "qwen3next":
        assert any(types[n] != types[n.replace("qkv", "gate")] for n in types if n.endswith("attn_qkv.weight"))
    ids = checks.prompt(VOCAB, 24)
    want = checks.meaningful_logits(ref, ids)
    err = np.sqrt(np.mean((Model.load(str(out)).forward(ids) - want) ** 2)) / want.std()
    assert err < LOGIT_BOUND.get(kind, 0.5), (kind, err)
    assert gguf.GGUFReader(str(out)).alignment == 32
    if LLAMA_BENCH:
        r = subprocess.run([LLAMA_BENCH[-1], "-m", str(out), "-p", "0", "-n", "4", "-r", "1", "-t", "2", "-o", "csv"],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]


def test_qwen3next_qkv_and_gate_in_any_two_types(model, tmp_path):
    """Hand-made: attn_gate in F16, Q8_0 or Q4_K beside attn_qkv in Q6_K (and the reverse) loads and runs as the
    single-type file of the wider type does."""
    kind, directory, ref = model
    if kind != "qwen3next":
        pytest.skip("Qwen3-Next's attn_qkv / attn_gate")
    ids = checks.prompt(VOCAB, 24)
    want = checks.meaningful_logits(ref, ids)
    for qkv, gate in (("Q6_K", "F16"), ("Q6_K", "Q8_0"), ("Q4_K", "Q6_K"), ("F16", "Q4_K")):
        out = tmp_path / f"{qkv}-{gate}.gguf"
        _, _, types = _quantize(directory / "hf", out, "Q8_0", "--pure", "--tensor-type", f"attn_qkv={qkv}",
                                "--tensor-type", f"attn_gate={gate}")
        assert {types[n] for n in types if n.endswith("attn_qkv.weight")} == {qkv}, types
        assert {types[n] for n in types if n.endswith("attn_gate.weight")} == {gate}, types
        err = np.sqrt(np.mean((Model.load(str(out)).forward(ids) - want) ** 2)) / want.std()
        assert err < LOGIT_BOUND.get(kind, 0.5), (qkv, gate, err)


def test_refusals_name_the_type(tmp_path):
    r = _cli("quantize", "-m", str(tmp_path), "-o", str(tmp_path / "x.gguf"), "--type", "Q4_K_X")
    assert r.returncode != 0 and "or a mixture: Q2_K_M, Q2_K_S, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, " \
                                 "Q5_K_M, IQ4_NL, IQ4_XS)" in r.stderr, r.stderr


def test_q2_k_s_needs_an_importance_matrix(model, tmp_path):
    """llama-quantize refuses Q2_K_S without --imatrix (its Q2_K matrices, the head and embeddings aside); so do
    we, naming the tensor and --calibration, from the checkpoint, the GGUF file and with --pure."""
    kind, directory = model[:2]
    for src, extra in ((directory / "hf", ()), (directory / "f32.gguf", ()), (directory / "f32.gguf", ("--pure",))):
        r = _cli("quantize", "-m", str(src), "-o", str(tmp_path / "x.gguf"), "--type", "Q2_K_S", *extra)
        assert r.returncode != 0 and not (tmp_path / "x.gguf").exists()
        assert "would be Q2_K, which llama-quantize's Q2_K_S writes only with an importance matrix" in r.stderr
        assert "pass --calibration FILE" in r.stderr, r.stderr
    # every Q2_K matrix overridden: nothing needs one
    _, _, got = _quantize(directory / "f32.gguf", tmp_path / "y.gguf", "Q2_K_S", "--pure", "--tensor-type",
                          r"blk\.=Q4_K")
    assert "Q2_K" not in {t for n, t in got.items() if n.startswith("blk.")}
    if LLAMA_QUANTIZE:
        r = subprocess.run([LLAMA_QUANTIZE[-1], str(directory / "f32.gguf"), str(tmp_path / "llama.gguf"), "Q2_K_S",
                            "2"], capture_output=True, text=True, timeout=600)
        assert r.returncode != 0 and "requires an imatrix" in r.stderr + r.stdout, r.stderr[-2000:]


SMOLLM2 = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), ".models",
                       "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.mark.skipif(not os.path.exists(SMOLLM2), reason=f"{SMOLLM2} is missing: run scripts/setup.sh")
def test_q4_k_m_perplexity_lies_between_q4_k_and_q6_k(tmp_path):
    """SmolLM2-135M (Q4_1, dequantized and quantized again): Q4_K_M raises attn_v and ffn_down in a third of the
    layers, so it must land between all-Q4_K and all-Q6_K. Measured (c 256, 8 chunks): Q4_K 26.78, Q4_K_M 26.53."""
    from attnzoo import perplexity as ppl_module
    try:
        text = ppl_module.default_text()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    ppl = {}
    for ftype in ("Q4_K", "Q4_K_M", "Q6_K"):
        out = tmp_path / f"{ftype}.gguf"
        r = _cli("quantize", "-m", SMOLLM2, "-o", str(out), "--type", *single_type(ftype), "--allow-requantize")
        assert r.returncode == 0, r.stderr
        r = subprocess.run([CLI, "perplexity", "-m", str(out), "-f", text, "-c", "256", "--chunks", "8"],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        ppl[ftype] = float(r.stdout.split("Final estimate: PPL = ")[1].split()[0])
    assert ppl["Q6_K"] < ppl["Q4_K_M"] < ppl["Q4_K"], ppl


@pytest.mark.skipif(not os.path.exists(SMOLLM2), reason=f"{SMOLLM2} is missing: run scripts/setup.sh")
def test_low_bit_mixtures_perplexity_order(tmp_path):
    """SmolLM2-135M (Q4_1, dequantized and quantized again), c 256, 8 chunks. Its rows of 576 are not whole
    super-blocks, so every matrix but ffn_down (rows of 1536) falls back to Q4_0 / Q5_0 / Q5_1: Q2_K_M and Q3_K_S
    then write the same types (ffn_down Q3_K, the rest Q4_0), and the order is Q2_K (single) > Q2_K_M = Q3_K_S >
    Q3_K_M > Q3_K_L > Q4_K_M. Measured: 174.40, 32.38, 32.38, 27.77, 27.65, 26.53."""
    from attnzoo import perplexity as ppl_module
    try:
        text = ppl_module.default_text()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    ppl, types = {}, {}
    for ftype in ("Q2_K", "Q2_K_M", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_M"):
        out = tmp_path / f"{ftype}.gguf"
        r = _cli("quantize", "-m", SMOLLM2, "-o", str(out), "--type", *single_type(ftype), "--allow-requantize")
        assert r.returncode == 0, r.stderr
        types[ftype] = _read(out)[2]
        r = subprocess.run([CLI, "perplexity", "-m", str(out), "-f", text, "-c", "256", "--chunks", "8"],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        ppl[ftype] = float(r.stdout.split("Final estimate: PPL = ")[1].split()[0])
    assert types["Q2_K_M"] == types["Q3_K_S"] and ppl["Q2_K_M"] == ppl["Q3_K_S"], ppl
    # Q3_K_M and Q3_K_L differ in a few tensors here (most fall back): within 1% of each other (27.77 / 27.65 on the
    # bf16 prompt panels, 27.770 / 27.777 on the 8-bit integer rows), both between Q3_K_S and Q4_K_M
    q3 = (ppl["Q3_K_M"], ppl["Q3_K_L"])
    assert ppl["Q2_K"] > ppl["Q3_K_S"] > max(q3) and min(q3) > ppl["Q4_K_M"], ppl
    assert abs(q3[0] - q3[1]) < 0.01 * q3[0], ppl


@pytest.mark.skipif(not os.path.exists(SMOLLM2), reason=f"{SMOLLM2} is missing: run scripts/setup.sh")
@pytest.mark.skipif(not LLAMA_QUANTIZE, reason=NO_LLAMA)
@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q2_K_M", "Q3_K_S", "Q3_K_M", "Q3_K_L"])
def test_smollm2_types_equal_llama_quantizes(tmp_path, ftype):
    """A real layout (30 layers, 3 query heads per KV head, rows of 576 that fall back): both requantize the Q4_1
    file with the same type for each of its 272 tensors."""
    r = subprocess.run([LLAMA_QUANTIZE[-1], "--allow-requantize", SMOLLM2, str(tmp_path / "llama.gguf"),
                        LLAMA_NAME.get(ftype, ftype), "2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    theirs_meta, _, theirs = _read(tmp_path / "llama.gguf")
    ours_meta, _, ours = _quantize(SMOLLM2, tmp_path / "ours.gguf", ftype, "--allow-requantize")
    assert ours == theirs, {n: (ours.get(n), theirs[n]) for n in theirs if ours.get(n) != theirs[n]}
    assert ours_meta["general.file_type"] == theirs_meta["general.file_type"] == FILE_TYPE[ftype]
    raised = {"Q4_K_M": {"Q4_K", "Q6_K", "Q5_0", "Q8_0"}, "Q2_K_M": {"Q3_K", "Q4_0"}, "Q3_K_S": {"Q3_K", "Q4_0"},
              "Q3_K_M": {"Q4_K", "Q5_K", "Q5_0", "Q5_1"}, "Q3_K_L": {"Q5_K", "Q5_1", "Q4_0"}}[ftype]
    assert raised <= set(ours.values()), set(ours.values())
