"""attnzoo quantize on whole checkpoints, against independent references:
  - tiny transformers Llama / Qwen3 checkpoints written with save_pretrained -> `attnzoo quantize` -> the file read
    by gguf.GGUFReader (every tensor, the policy's types, RTN tensors byte-identical to gguf.quants of the
    permuted weights), transformers' GGUF loader (weights and logits agree with ours on the same file), and
    attnzoo's Model (logits close to the f32 model, tolerance per type);
  - calibration (importance weighting from activations), overrides, the Python API;
  - bad input: one clear line, non-zero exit.
The block quantizers themselves: test_quantize_blocks.py."""
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import model_checks as checks  # noqa: E402
from attnzoo import quant  # noqa: E402
from attnzoo.model import Model  # noqa: E402
from attnzoo.explain import inside_model  # noqa: E402

# Quantized files against f32 references at 1e-4: f32 products in every projection (conftest.py); the
# default "auto" is covered by test_gguf_auto_precision.py.
MATMUL_PRECISION = "highest"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(ROOT, "build", "attnzoo"))
T = gguf.GGMLQuantizationType

VOCAB = 320
PROMPT_LEN = 24
TEXT = "the quick brown fox jumps over the lazy dog, 12345 times!\nHello world."
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
MAIN_TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
              "IQ4_NL", "IQ4_XS"]
# RMS(logits - the f32 model's logits) / std(logits): measured on both models (Q4_0 0.28 / 0.33, Q4_1 0.23 /
# 0.28, Q4_K 0.23 / 0.25, IQ4_NL 0.24 / 0.30, IQ4_XS 0.24 / 0.31, Q5_0 0.15 / 0.18, Q5_1 0.13 / 0.15, Q5_K 0.12 /
# 0.15, Q6_K 0.06 / 0.08, Q8_0 0.021 / 0.027, BF16 0.007 / 0.008, F16 0.0008 / 0.001), bounds about 1.5x; a
# misplaced row or scale gives ~1.4.
# Q2_K 0.86 / 0.87 and Q3_K 0.47 / 0.51 (qwen3's o_proj falls back to Q4_0), bounded at 1.27x / 1.4x: 2 bits come
# close to the misplaced-row level.
# Random 2-layer models amplify weight noise about 3x (Q4_0's weights alone are off by ~9%).
LOGIT_TOL = {"F32": 1e-5, "F16": 0.002, "BF16": 0.015, "Q8_0": 0.04, "Q6_K": 0.12, "Q5_K": 0.23, "Q5_1": 0.23,
             "Q5_0": 0.27, "Q3_K": 0.7, "Q2_K": 1.1,
             "Q4_K": 0.38, "Q4_1": 0.42, "Q4_0": 0.5, "IQ4_NL": 0.45, "IQ4_XS": 0.46}


def _config(kind):
    common = dict(vocab_size=VOCAB, max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.05,
                  hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2)
    if kind == "llama":  # untied head; GQA so Q and K are permuted with different head counts
        return transformers.LlamaConfig(tie_word_embeddings=False, **common)
    return transformers.Qwen3Config(head_dim=32, tie_word_embeddings=True, **common)  # q/k norms, tied head


def _tokenizer(kind):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    if kind == "llama":  # GPT-2's byte-level regex
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:  # Qwen2's split regex, then bytes
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TEXT] * 20, trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    fast.chat_template = "{% for m in messages %}<s>{{ m['content'] }}</s>{% endfor %}"
    return fast


def _randomize(model):
    for name, p in model.named_parameters():
        if p.ndim == 1:
            p.copy_((1.0 if "norm" in name else 0.0) + 0.2 * torch.randn_like(p))


def _cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def checkpoint(request, tmp_path_factory):
    kind = request.param
    directory = str(tmp_path_factory.mktemp(f"hf-{kind}"))
    model = checks.save_random_model(kind, _config(kind), directory, _randomize, attn_implementation="eager")
    _tokenizer(kind).save_pretrained(directory)
    ids = checks.prompt(VOCAB, PROMPT_LEN)
    return kind, directory, model, ids, checks.meaningful_logits(model, ids)


# llama-quantize's Q2_K, Q3_K, Q4_K and Q5_K are mixtures (test_quantize_mixtures.py); these tests quantize every
# matrix in the one type, the head and embedding in Q6_K as the other single types have them: --pure and two overrides.
SINGLE_FLAGS = ("--pure", "--output-tensor-type", "Q6_K", "--token-embedding-type", "Q6_K")
SINGLE_API = dict(pure=True, output_tensor_type="Q6_K", token_embedding_type="Q6_K")


def single_type(qtype):
    """`--type` arguments that put every matrix in `qtype` (llama-quantize's names alias Q2_K ... Q5_K to mixtures)."""
    return [qtype, *SINGLE_FLAGS] if qtype.upper() in ("Q2_K", "Q3_K", "Q4_K", "Q5_K") else [qtype]


def _quantize(checkpoint, qtype, tmp_path_factory, *extra):
    kind, directory = checkpoint[:2]
    out = str(tmp_path_factory.mktemp(f"gguf-{kind}-{qtype}") / f"{kind}-{qtype}.gguf")
    r = _cli("quantize", "-m", directory, "-o", out, "--type", *single_type(qtype), *extra)
    assert r.returncode == 0, r.stderr
    assert out in r.stdout and "tensors" in r.stdout
    return out


def _expected_types(name, shape, qtype, tied=True):
    """llama-quantize's defaults, restated: 1-D -> F32; head / tied embedding -> Q8_0 (for Q8_0) or Q6_K (lower
    bits); an untied embedding keeps the main type (single_type's Q2_K ... Q5_K set it to Q6_K); rows that are not
    whole super-blocks fall back (Q2_K, Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL).
    IQ4_NL / IQ4_XS are llama-quantize's mixtures (test_quantize_mixtures.py): their bumps do not apply to these
    2-layer, 2-queries-per-KV-head models."""
    if len(shape) == 1:
        return "F32"
    own_type = name == "token_embd.weight" and not tied and qtype not in ("Q2_K", "Q3_K", "Q4_K", "Q5_K")
    if name in ("output.weight", "token_embd.weight") and qtype not in ("F32", "F16", "BF16") and not own_type:
        qtype = "Q8_0" if qtype == "Q8_0" else "Q6_K"
    if shape[-1] % 256 and (qtype.endswith("_K") or qtype == "IQ4_XS"):  # qwen3's o_proj: rows of 128
        return {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0",
                "IQ4_XS": "IQ4_NL"}[qtype]
    return qtype


def _permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's two rotary halves interleaved."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _hf_tensors_as_gguf(model, kind):
    """{GGUF name: the tensor the converter would store (f32, rows permuted for llama's Q / K)}."""
    cfg = model.config
    arch = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen3": gguf.MODEL_ARCH.QWEN3}[kind]
    names = gguf.get_tensor_name_map(arch, cfg.num_hidden_layers)
    out = {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        data = t.float().numpy()
        if kind == "llama" and name.endswith("q_proj.weight"):
            data = _permute(data, cfg.num_attention_heads)
        if kind == "llama" and name.endswith("k_proj.weight"):
            data = _permute(data, cfg.num_key_value_heads)
        out[names.get_name(name, try_suffixes=(".weight", ".bias"))] = np.ascontiguousarray(data)
    return out


@pytest.mark.parametrize("qtype", MAIN_TYPES)
def test_quantized_file_reads_back_everywhere(checkpoint, qtype, tmp_path_factory):
    kind, directory, model, ids, want = checkpoint
    path = _quantize(checkpoint, qtype, tmp_path_factory)

    # gguf's reader: every tensor under the converter's name, with the policy's type and the torch shape.
    reader = gguf.GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    expected = _hf_tensors_as_gguf(model, kind)
    assert set(tensors) == set(expected)
    for name, data in expected.items():
        t = tensors[name]
        assert t.tensor_type.name == _expected_types(name, data.shape, qtype, tied=kind == "qwen3"), name
        assert [int(n) for n in reversed(t.shape)] == list(data.shape), name
        stored = np.frombuffer(t.data.tobytes(), np.uint8)
        if t.tensor_type in (T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
            blocks = np.ascontiguousarray(gguf.quants.quantize(data, t.tensor_type)).view(np.uint8)
            assert np.array_equal(stored, blocks.reshape(-1)), name
        else:  # searched formats (gguf has no quantizer): the blocks of attnzoo.quant.quantize, which gguf decodes
            assert np.array_equal(stored, quant.quantize(data, t.tensor_type).reshape(-1)), name
            np.testing.assert_array_equal(quant.dequantize(stored, t.tensor_type),
                                          gguf.quants.dequantize(stored, t.tensor_type).reshape(-1), err_msg=name)
    field = lambda k: reader.fields[k].contents()  # noqa: E731
    # llama.cpp's 32-byte alignment and no general.alignment key (llama-quantize pads its output to 32 whatever the
    # key says: test_quantize_mixtures.py reads its files of ours)
    assert "general.alignment" not in reader.fields and reader.alignment == 32
    assert all(t.data_offset % 32 == 0 for t in reader.tensors)
    assert field("general.architecture") == kind
    # --pure keeps the file type --type names, as llama-quantize's does (Q3_K -> Q3_K_M ...)
    ftype = {"F32": "ALL_F32", "Q3_K": "MOSTLY_Q3_K_M", "Q4_K": "MOSTLY_Q4_K_M", "Q5_K": "MOSTLY_Q5_K_M"}.get(
        qtype, f"MOSTLY_{qtype}")
    assert field("general.file_type") == int(gguf.LlamaFileType[ftype])  # llama.cpp's LLAMA_FTYPE_*
    assert field(f"{kind}.block_count") == 2 and field(f"{kind}.attention.head_count_kv") == 2
    assert field("tokenizer.ggml.model") == "gpt2"
    assert field("tokenizer.ggml.pre") == ("gpt-2" if kind == "llama" else "qwen2")
    assert field("tokenizer.chat_template").startswith("{% for m in messages %}")

    # attnzoo on the file: close to the f32 model, by a tolerance per type.
    m = Model.load(path)
    got = m.forward(ids)
    # Copies made at load stand in for the mapped pages they came from, so the memory the explainer and inspect
    # report is checkpoint - released + owned, not checkpoint plus copies. Block formats are computed on as
    # stored (regrouped where the CPU's decode rows want it: the same bytes moved), F16 projections widen to f32.
    info = m.inspect()
    held = inside_model.memory_breakdown(info)["weight_bytes"]
    if qtype == "F16":
        assert info["owned_weight_bytes"] == 2 * info["released_weight_bytes"] > 0
        assert held == info["checkpoint_bytes"] + info["released_weight_bytes"]
    else:
        assert info["released_weight_bytes"] == info["owned_weight_bytes"]
        assert held == info["checkpoint_bytes"]
    err = np.sqrt(np.mean((got - want) ** 2)) / want.std()
    assert err < LOGIT_TOL[qtype], (qtype, err)


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_1", "Q3_K", "Q5_K", "Q6_K"])
def test_transformers_gguf_loader_agrees(checkpoint, qtype, tmp_path_factory):
    """transformers' GGUF loader reads the same file with its own name map, reverse permutation and gguf's
    dequantization: its model and ours compute the same logits from it."""
    pytest.importorskip("accelerate")
    kind, directory, model, ids, want = checkpoint
    path = _quantize(checkpoint, qtype, tmp_path_factory)
    ref = transformers.AutoModelForCausalLM.from_pretrained(
        os.path.dirname(path), gguf_file=os.path.basename(path), config=_config(kind), dtype=torch.float32,
        attn_implementation="eager").eval()
    np.testing.assert_allclose(Model.load(path).forward(ids), checks.reference_logits(ref, ids), atol=checks.ATOL,
                               rtol=0)


def test_tokenizer_metadata_tokenizes_as_the_checkpoint(checkpoint, tmp_path_factory):
    from attnzoo.tokenizer import Tokenizer
    kind, directory = checkpoint[:2]
    path = _quantize(checkpoint, "Q8_0", tmp_path_factory)
    hf = transformers.AutoTokenizer.from_pretrained(directory)
    ours = Tokenizer.load(path)
    want = hf(TEXT, add_special_tokens=False)["input_ids"]
    assert ours.encode(TEXT, add_special_tokens=False) == want
    # transformers' own GGUF tokenizer converter, reading the same metadata independently
    theirs = transformers.AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    assert theirs(TEXT, add_special_tokens=False)["input_ids"] == want
    assert (theirs.bos_token, theirs.eos_token) == ("<s>", "</s>")
    reader = gguf.GGUFReader(path)
    assert reader.fields["tokenizer.ggml.bos_token_id"].contents() == hf.bos_token_id
    assert reader.fields["tokenizer.ggml.eos_token_id"].contents() == hf.eos_token_id
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    assert len(tokens) == VOCAB and tokens[-1] == f"[PAD{VOCAB - 1}]"
    assert types[hf.convert_tokens_to_ids("<s>")] == 3 and types[hf.convert_tokens_to_ids("e")] == 1


def test_overrides(checkpoint, tmp_path_factory):
    kind, directory, model, ids, want = checkpoint
    path = _quantize(checkpoint, "Q4_0", tmp_path_factory, "--tensor-type", r"ffn_down=Q8_0", "--keep", "attn_v",
                     "--token-embedding-type", "f16", "--output-tensor-type", "Q5_K")
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(path).tensors}
    assert types["blk.0.ffn_down.weight"] == "Q8_0" and types["blk.1.attn_v.weight"] == "F32"
    assert types["blk.0.ffn_up.weight"] == "Q4_0" and types["token_embd.weight"] == "F16"
    assert types.get("output.weight", "Q5_K") == "Q5_K"


def _write_fake_checkpoint(directory, architecture):
    import json
    from safetensors.numpy import save_file
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump({"architectures": [architecture], "model_type": "x", "hidden_size": 64, "num_attention_heads": 2,
                   "num_hidden_layers": 1, "intermediate_size": 64, "vocab_size": 8}, f)
    save_file({"model.embed_tokens.weight": np.zeros((8, 64), np.float32)}, os.path.join(directory, "model.safetensors"))


@pytest.mark.parametrize("case", ["missing_dir", "unknown_type", "unsupported_arch", "nan_weight", "no_output",
                                  "unigram_tokenizer", "bad_added_token", "gguf_source"])
def test_bad_input_one_line_nonzero_exit(case, tmp_path):
    out = str(tmp_path / "out.gguf")
    if case == "missing_dir":
        args, msg = ["-m", str(tmp_path / "nope"), "-o", out], r"nope' is not a directory"
    elif case == "unknown_type":
        args, msg = ["-m", str(tmp_path), "-o", out, "--type", "Q3_X"], r"--type: unknown type 'Q3_X' \(choose from"
    elif case == "unsupported_arch":
        _write_fake_checkpoint(str(tmp_path / "m"), "BertForMaskedLM")
        args, msg = ["-m", str(tmp_path / "m"), "-o", out], r"architecture 'BertForMaskedLM' cannot be quantized"
    elif case == "nan_weight":
        cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=2, vocab_size=16)
        m = transformers.LlamaForCausalLM(cfg)
        with torch.no_grad():
            m.model.layers[0].mlp.up_proj.weight[3, 5] = float("nan")
        m.save_pretrained(str(tmp_path / "m"))
        args, msg = ["-m", str(tmp_path / "m"), "-o", out], \
            r"model\.layers\.0\.mlp\.up_proj\.weight: value at row 3, column 5 is nan"
    elif case == "gguf_source":
        (tmp_path / "m").mkdir()
        (tmp_path / "m" / "x.gguf").write_bytes(b"")
        args, msg = ["-m", str(tmp_path / "m"), "-o", out], r"holds a GGUF checkpoint; quantize reads Hugging Face"
    elif case in ("unigram_tokenizer", "bad_added_token"):
        _write_fake_checkpoint(str(tmp_path / "m"), "LlamaForCausalLM")
        tok = {"model": {"type": "Unigram", "vocab": []}} if case == "unigram_tokenizer" else \
            {"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "added_tokens": [{"content": "<s>"}]}
        (tmp_path / "m" / "tokenizer.json").write_text(__import__("json").dumps(tok))
        args = ["-m", str(tmp_path / "m"), "-o", out]
        msg = r"m/tokenizer\.json: key 'model\.type': only byte-level BPE" if case == "unigram_tokenizer" else \
            r"m/tokenizer\.json: key 'added_tokens': every entry needs an integer 'id'"
    else:
        args, msg = ["-m", str(tmp_path)], r"-o OUT\.gguf is required"
    r = _cli("quantize", *args)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnzoo: error: "), r.stderr
    assert __import__("re").search(msg, lines[0]), lines[0]
    assert not os.path.exists(out) and not os.path.exists(out + ".partial")


def test_output_never_overwrites_the_source_checkpoint(checkpoint, tmp_path):
    """-o naming a file of the checkpoint being read (directly, through a symlink to it, or the blob a symlinked
    checkpoint file points at, as in the Hugging Face cache) is refused by name, and nothing is written."""
    import shutil
    directory = str(tmp_path / "m")
    shutil.copytree(checkpoint[1], directory)
    blob = tmp_path / "blob"
    os.rename(os.path.join(directory, "config.json"), blob)
    os.symlink(blob, os.path.join(directory, "config.json"))
    os.symlink(os.path.join(directory, "model.safetensors"), tmp_path / "link.gguf")
    before = {n: open(os.path.join(directory, n), "rb").read() for n in os.listdir(directory)}
    for out in [os.path.join(directory, "model.safetensors"), os.path.join(directory, "config.json"),
                os.path.join(directory, ".", "tokenizer.json"), str(tmp_path / "link.gguf"), str(blob)]:
        r = _cli("quantize", "-m", directory, "-o", out, "--type", "Q8_0")
        assert r.returncode != 0, out
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("attnzoo: error: out (-o): "), r.stderr
        assert "is a file of the source checkpoint" in lines[0], lines[0]
    assert {n: open(os.path.join(directory, n), "rb").read() for n in os.listdir(directory)} == before
    assert not [n for n in os.listdir(directory) if n.endswith(".partial")]
    # Refused before calibration runs the model over its text, and a directory as -o by what it is.
    (tmp_path / "calib.txt").write_text("The quick brown fox jumps over the lazy dog. " * 20)
    r = _cli("quantize", "-m", directory, "-o", os.path.join(directory, "config.json"), "--type", "Q8_0",
             "--calibration", str(tmp_path / "calib.txt"))
    assert r.returncode != 0 and "calibration:" not in r.stdout and "is a file of the source" in r.stderr, r.stdout
    r = _cli("quantize", "-m", directory, "-o", directory, "--type", "Q8_0")
    assert r.returncode != 0 and f"out (-o): '{directory}' is a directory" in r.stderr, r.stderr
    r = _cli("quantize", "-m", directory, "-o", os.path.join(directory, "new.gguf"), "--type", "Q8_0")
    assert r.returncode == 0, r.stderr  # a new file beside the checkpoint's own is fine


@pytest.mark.parametrize("qtype", ["Q4_K", "Q4_0", "IQ4_XS", "Q2_K", "Q3_K"])
def test_calibration_lowers_the_error_on_its_activations(checkpoint, qtype, tmp_path_factory, tmp_path):
    """--calibration (llama.cpp's imatrix): the error that matters for a projection is ||X (W - W_q)^T||^2 over
    the activations X it sees. Collected here independently (torch hooks on the transformers model, the same
    text and tokens), it must be lower with the calibrated file than with plain quantization."""
    kind, directory, model, ids, want = checkpoint
    text = (TEXT + " ") * 12
    (tmp_path / "calib.txt").write_text(text)
    plain = _quantize(checkpoint, qtype, tmp_path_factory)
    calibrated = _quantize(checkpoint, qtype, tmp_path_factory, "--calibration", str(tmp_path / "calib.txt"))
    tokens = transformers.AutoTokenizer.from_pretrained(directory)(text, add_special_tokens=False)["input_ids"]
    assert len(tokens) < 512  # one chunk, as the CLI runs it

    inputs, hooks = {}, []
    names = gguf.get_tensor_name_map({"llama": gguf.MODEL_ARCH.LLAMA, "qwen3": gguf.MODEL_ARCH.QWEN3}[kind], 2)
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear):
            gname = names.get_name(name + ".weight", try_suffixes=(".weight",))
            hooks.append(mod.register_forward_hook(
                lambda m, a, o, g=gname: inputs.__setitem__(g, a[0][0].detach().double().numpy())))
    with torch.no_grad():
        model(torch.tensor([tokens]))
    for h in hooks:
        h.remove()

    weights = _hf_tensors_as_gguf(model, kind)
    def errors(path):
        out = {}
        for t in gguf.GGUFReader(path).tensors:
            if t.name in inputs:
                wq = gguf.quants.dequantize(t.data, t.tensor_type).reshape(weights[t.name].shape)
                out[t.name] = np.sum((inputs[t.name] @ (weights[t.name] - wq).T.astype(np.float64)) ** 2)
        return out
    e_plain, e_cal = errors(plain), errors(calibrated)
    assert set(e_plain) == set(inputs) - ({"output.weight"} if kind == "qwen3" else set())
    better = sum(e_cal[n] < e_plain[n] for n in e_plain)
    # Measured: 0.84-0.89 of the plain error for Q4_0 / Q4_K, 0.90-0.93 for IQ4_XS, 0.69-0.71 for Q2_K, 0.83-0.84
    # for Q3_K (random tiny models have few outlier channels; real ones gain more).
    assert sum(e_cal.values()) < 0.95 * sum(e_plain.values()), (sum(e_cal.values()), sum(e_plain.values()))
    assert better >= 0.8 * len(e_plain), (better, len(e_plain))


def test_calibration_refusals(checkpoint, tmp_path):
    kind, directory = checkpoint[:2]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff\xfe bad")
    # Each named by the flag and the file, in one line; /dev/zero stops at the 1 GiB limit on a text input.
    for path, message in [(tmp_path / "none.txt", f"--calibration: cannot open '{tmp_path / 'none.txt'}'"),
                          (tmp_path, f"--calibration: '{tmp_path}' is a directory, not a text file"),
                          (bad, f"--calibration: '{bad}': not valid UTF-8 (byte 3)"),
                          ("/dev/zero", "--calibration: '/dev/zero': more than the 1024 MiB a text input may hold")]:
        r = _cli("quantize", "-m", directory, "-o", str(tmp_path / "x.gguf"), "--calibration", str(path))
        lines = r.stderr.strip().splitlines()
        assert r.returncode != 0 and len(lines) == 1 and lines[0].startswith("attnzoo: error: "), r.stderr
        assert message in lines[0], lines[0]
    r = _cli("quantize", "-m", directory, "-o", str(tmp_path / "x.gguf"), "--calibration-chunk", "-3")
    assert r.returncode != 0 and "--calibration-chunk: expected a non-negative integer, got '-3'" in r.stderr


def test_python_api_writes_the_cli_file(checkpoint, tmp_path_factory, tmp_path):
    import attnzoo
    kind, directory = checkpoint[:2]
    cli_file = _quantize(checkpoint, "Q5_K", tmp_path_factory, "--tensor-type", "ffn_down=Q8_0")
    out = tmp_path / "api.gguf"
    s = attnzoo.quantize(directory, out, type="q5_k", tensor_types={"ffn_down": "Q8_0"}, **SINGLE_API)
    assert open(cli_file, "rb").read() == out.read_bytes()  # deterministic, one code path
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(out)).tensors}
    assert {t["name"]: t["type"] for t in s["tensors"]} == types
    assert s["architecture"] == kind and s["tokenizer"] and not s["calibrated"]
    assert s["bytes_out"] == sum(t["bytes"] for t in s["tensors"]) < s["bytes_in"]
    with pytest.raises(ValueError, match=r"type: unknown type 'Q7'"):
        attnzoo.quantize(directory, tmp_path / "x.gguf", type="Q7")


def test_qwen2_with_biases(tmp_path):
    """Qwen2: q / k / v biases (1-D, F32, not permuted), untied head, Qwen2's split regex."""
    pytest.importorskip("accelerate")
    directory = str(tmp_path / "qwen2")
    cfg = transformers.Qwen2Config(vocab_size=VOCAB, max_position_embeddings=256, rms_norm_eps=1e-5, hidden_size=256,
                                   intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, tie_word_embeddings=False, initializer_range=0.05)
    model = checks.save_random_model("qwen2", cfg, directory, _randomize, attn_implementation="eager")
    _tokenizer("qwen2").save_pretrained(directory)
    ids = checks.prompt(VOCAB, PROMPT_LEN)
    want = checks.meaningful_logits(model, ids)
    for qtype in ("Q8_0", "Q4_K"):
        out = str(tmp_path / f"qwen2-{qtype}.gguf")
        r = _cli("quantize", "-m", directory, "-o", out, "--type", *single_type(qtype))
        assert r.returncode == 0, r.stderr
        tensors = {t.name: t for t in gguf.GGUFReader(out).tensors}
        names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, 2)
        state = {names.get_name(n, try_suffixes=(".weight", ".bias")): t.numpy() for n, t in model.state_dict().items()}
        assert set(tensors) == set(state)
        bias = tensors["blk.1.attn_k.bias"]
        assert bias.tensor_type == T.F32 and np.array_equal(bias.data, state["blk.1.attn_k.bias"])
        got = Model.load(out).forward(ids)
        assert np.sqrt(np.mean((got - want) ** 2)) / want.std() < LOGIT_TOL[qtype]
        ref = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=os.path.basename(out),
                                                                config=cfg, dtype=torch.float32,
                                                                attn_implementation="eager").eval()
        np.testing.assert_allclose(got, checks.reference_logits(ref, ids), atol=checks.ATOL, rtol=0)


@pytest.mark.parametrize("rope", [dict(rope_type="linear", rope_theta=10000.0, factor=4.0),
                                  dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                       high_freq_factor=4.0, original_max_position_embeddings=8192),
                                  dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                       original_max_position_embeddings=64)], ids=lambda r: r["rope_type"])
def test_rope_scaling_survives_the_round_trip(rope, tmp_path):
    """RoPE scaling as the converter stores it (linear / yarn keys; Llama 3's as the rope_freqs tensor): the F32
    file's logits equal the transformers model's, which they would not with the scaling lost."""
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, max_position_embeddings=256, rms_norm_eps=1e-5, hidden_size=64,
                                   intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, rope_parameters=rope, initializer_range=0.1)
    model = checks.save_random_model("llama", cfg, str(tmp_path / "m"), _randomize, attn_implementation="eager")
    ids = checks.prompt(VOCAB, 120)  # long enough for the scaled frequencies to matter
    out = str(tmp_path / "m.gguf")
    r = _cli("quantize", "-m", str(tmp_path / "m"), "-o", out, "--type", "F32")
    assert r.returncode == 0, r.stderr
    names = {t.name for t in gguf.GGUFReader(out).tensors}
    assert ("rope_freqs.weight" in names) == (rope["rope_type"] == "llama3")
    np.testing.assert_allclose(Model.load(out).forward(ids), checks.meaningful_logits(model, ids), atol=checks.ATOL,
                               rtol=0)


def test_bf16_checkpoint(tmp_path):
    """A bf16 checkpoint: --type BF16 copies its bytes, Q8_0 quantizes its values widened to f32 (gguf's bytes),
    --keep leaves a matrix bf16."""
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=False)
    torch.manual_seed(3)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(str(tmp_path / "m"))
    up = model.model.layers[0].mlp.up_proj.weight.detach()
    for qtype, extra in (("BF16", []), ("Q8_0", ["--keep", "ffn_down"])):
        out = str(tmp_path / f"{qtype}.gguf")
        r = _cli("quantize", "-m", str(tmp_path / "m"), "-o", out, "--type", qtype, *extra)
        assert r.returncode == 0, r.stderr
        t = {t.name: t for t in gguf.GGUFReader(out).tensors}
        got = np.frombuffer(t["blk.0.ffn_up.weight"].data.tobytes(), np.uint8)
        if qtype == "BF16":
            assert np.array_equal(got, up.view(torch.int16).numpy().view(np.uint8).reshape(-1))
        else:
            want = gguf.quants.quantize(up.float().numpy(), T.Q8_0).view(np.uint8).reshape(-1)
            assert np.array_equal(got, want)
            assert t["blk.0.ffn_down.weight"].tensor_type == T.BF16
