"""GGUF files for the model tests: writing them (finish_gguf, the test restatements of convert_hf_to_gguf.py's
edits), the per-module GGUF case tests (add_gguf_case_tests), and the checks of a file's tensors, metadata and
logits against transformers, the checkpoint it came from or the converter's file. Plain helpers (no test_*
names), so pytest collects nothing here."""
import os

import numpy as np
import pytest

from attnzoo.model import Model
from checkpoint_edits import copy_with
from model_checks import ATOL, check_full_prompt, check_token_by_token_decode, meaningful_logits, prompt, random_model


def finish_gguf(writer):
    """Writes a gguf.GGUFWriter's header, metadata and tensors, and closes it."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def save_gguf_and_checkpoint(kind, config, randomize, directory, ftype, write):
    """A random transformers model of `kind` (random_model) written by write(model, path) to
    <directory>/<kind>-<ftype>.gguf, which may round the model's values to the file's, then saved as a safetensors
    checkpoint in <directory>/hf; returns the model (eval mode) and the GGUF's path."""
    model = random_model(kind, config, randomize).eval()
    path = os.path.join(directory, f"{kind}-{ftype}.gguf")
    write(model, path)  # the model now holds the values the file decodes to
    model.save_pretrained(os.path.join(directory, "hf"), safe_serialization=True)
    return model, path


def rewrite_gguf(src, dst, arch, drop=(), values=None):
    """Copies the GGUF `src` to `dst` with its <arch>.* keys only (the tokenizer and general.* left out), minus
    the keys in `drop` and with `values` ({key: (value, gguf.GGUFValueType)}) set; the tensors as they are."""
    import gguf
    reader = gguf.GGUFReader(src)
    writer = gguf.GGUFWriter(str(dst), arch)
    values = dict(values or {})
    for field in reader.fields.values():
        if field.name.startswith(arch + ".") and field.name not in drop and field.name not in values:
            writer.add_key_value(field.name, field.contents(), field.types[0])
    for key, (value, kind) in values.items():
        writer.add_key_value(key, value, kind)
    for t in reader.tensors:
        writer.add_tensor(t.name, np.asarray(t.data))
    finish_gguf(writer)
    return str(dst)


def round_as(value, t):
    """`value` rounded as a GGUF tensor of type `t` (a gguf.GGMLQuantizationType) stores it, in float32."""
    import gguf
    if t == gguf.GGMLQuantizationType.F16:
        return value.astype(np.float16).astype(np.float32)
    if t != gguf.GGMLQuantizationType.F32:
        return gguf.quants.dequantize(gguf.quants.quantize(np.ascontiguousarray(value), t), t).reshape(value.shape)
    return value


def llama_permute(w, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's two rotary halves interleaved (Q / K rows)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def add_converter_hybrid_tensor(writer, names, name, data, groups, heads, kv_heads):
    """Adds one tensor of a Mamba-2 hybrid whose attention the converter permutes (NemotronHModel,
    GraniteHybridModel) to the gguf.GGUFWriter `writer` under its gguf package name (`names`: the architecture's
    tensor name map), with the converter's edits: A_log as -exp(A_log) [H, 1], D as [H, 1], the gated norm as
    [groups, inner / groups], conv kernels squeezed, Q / K permuted, dt_bias as ssm_dt.bias."""
    if name.endswith(".A_log"):
        data = -np.exp(data).reshape(-1, 1)
    elif name.endswith(".D"):
        data = data.reshape(-1, 1)
    elif name.endswith(("mixer.norm.weight", "mamba.norm.weight")):
        data = data.reshape(groups, -1)
    elif name.endswith("conv1d.weight"):
        data = data.squeeze(1)
    elif name.endswith("q_proj.weight"):
        data = llama_permute(data, heads)
    elif name.endswith("k_proj.weight"):
        data = llama_permute(data, kv_heads)
    name = name.replace(".dt_bias", ".dt_proj.bias")
    new_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
    assert new_name is not None, name
    writer.add_tensor(new_name, np.ascontiguousarray(data, dtype=np.float32))


def add_converter_attention_keys(writer, cfg, blocks):
    """The <arch>.* keys convert_hf_to_gguf.py's TextModel writes for every attention model, from the config.json
    dict `cfg` (theta from rope_parameters), with block_count `blocks`."""
    writer.add_block_count(blocks)
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    writer.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_key_length(cfg["head_dim"])
    writer.add_value_length(cfg["head_dim"])


def check_gguf_logits(path, ids, want, vocab, prefill):
    """The GGUF loaded by attnzoo: the whole prompt, then token by token after a prefill."""
    m = Model.load(path)
    check_full_prompt(m, ids, want, vocab)
    check_token_by_token_decode(m, ids, want, prefill=prefill, stop=len(ids))


def check_gguf_as_safetensors(path, directory, ids):
    """The GGUF and its reference model saved as a safetensors checkpoint in `directory`, both loaded by attnzoo:
    the same logits and layer kinds."""
    hf, gg = Model.load(directory), Model.load(path)
    np.testing.assert_allclose(gg.forward(ids), hf.forward(ids), atol=ATOL, rtol=0)
    assert [x["kind"] for x in gg.inspect()["layers"]] == [x["kind"] for x in hf.inspect()["layers"]]


def check_synthesized_config(path, ref, keys):
    """The config.json attnzoo synthesizes for a GGUF against the transformers config `ref` it was written from:
    the class, model_type and every key of `keys` both have; returns the synthesized config."""
    import transformers
    cfg = Model.load(path).config
    assert cfg["architectures"] == [type(transformers.AutoModelForCausalLM.from_config(ref)).__name__]
    assert cfg["model_type"] == ref.model_type
    for key in keys:
        if hasattr(ref, key) and key in cfg:
            assert cfg[key] == getattr(ref, key), key
    return cfg


def build_gguf_case(param, tmp_path_factory, build, vocab, prompt_len):
    """A GGUF test case: build(kind, ftype, directory) -> (reference model, GGUF path) for param = (kind, ftype);
    returns kind, ftype, directory, path, prompt ids and the reference's logits on them."""
    kind, ftype = param
    directory = str(tmp_path_factory.mktemp(f"{kind}-{ftype}"))
    ref, path = build(kind, ftype, directory)
    ids = prompt(vocab, prompt_len)
    return kind, ftype, directory, path, ids, meaningful_logits(ref, ids)


def add_gguf_case_tests(namespace, cases, build, vocab, prompt_len, against_safetensors=False):
    """Defines, in a GGUF test module's `namespace`, the module-scoped `case` fixture over `cases` ((kind, ftype)
    pairs, built by build_gguf_case with build(kind, ftype, directory)) and the checks every such module runs on
    it: the file's logits against transformers' (whole prompt, token by token after 30 tokens); with
    against_safetensors, also the file against the checkpoint `build` saved in <directory>/hf, both loaded by
    attnzoo."""

    @pytest.fixture(scope="module", params=cases, ids=lambda c: f"{c[0]}-{c[1]}")
    def case(request, tmp_path_factory):
        return build_gguf_case(request.param, tmp_path_factory, build, vocab, prompt_len)

    def test_logits_match_transformers(case):
        kind, ftype, directory, path, ids, want = case
        check_gguf_logits(path, ids, want, vocab, prefill=30)

    def test_same_model_as_the_safetensors_checkpoint(case):
        kind, ftype, directory, path, ids, want = case
        check_gguf_as_safetensors(path, os.path.join(directory, "hf"), ids)

    namespace["case"] = case
    tests = [test_logits_match_transformers] + ([test_same_model_as_the_safetensors_checkpoint]
                                                if against_safetensors else [])
    for fn in tests:
        fn.__module__ = namespace["__name__"]
        namespace[fn.__name__] = fn


def check_gguf_of_checkpoint(ref, directory, path, arch, ids, want, vocab, prefill, edits=(), extra=None):
    """The GGUF written for the checkpoint in `directory` (by `attnzoo quantize` at F32 when `path` does not exist
    yet): every tensor of the transformers model `ref` under the gguf package's name for `arch` (a
    gguf.MODEL_ARCH), holding its values (after `edits`: (name suffix, function) pairs, the converter's value
    edits), plus the tensors of `extra` ({GGUF name: values}), nothing else; then the file's logits against `want`
    (whole prompt, token by token). Returns the gguf.GGUFReader of the file."""
    import gguf
    import attnzoo
    if not os.path.exists(path):
        attnzoo.quantize(directory, path, type="F32")
    names = gguf.get_tensor_name_map(arch, ref.config.num_hidden_layers)
    reader = gguf.GGUFReader(path)
    stored = {t.name: t for t in reader.tensors}
    expect = dict(extra or {})
    for name, t in ref.state_dict().items():
        if name == "lm_head.weight" and getattr(ref.config, "tie_word_embeddings", False):
            continue
        value = t.float().numpy()
        for suffix, edit in edits:
            if name.endswith(suffix):
                value = edit(value)
        expect[names.get_name(name, try_suffixes=(".weight", ".bias"))] = value
    assert set(stored) == set(expect)
    for name, value in expect.items():
        value = np.asarray(value, dtype=np.float32)
        np.testing.assert_array_equal(np.asarray(stored[name].data).reshape(value.shape), value, err_msg=name)
    check_gguf_logits(path, ids, want, vocab, prefill)
    return reader


def check_gguf_tensors(path, expect, close=()):
    """The GGUF at `path` holds exactly the tensors of `expect` ({GGUF name: values}), each equal to its values
    (within rtol 1e-6 for names ending in one of `close`: values computed in another precision than the
    reference's); returns the file's metadata as {key: value}."""
    import gguf
    reader = gguf.GGUFReader(path)
    stored = {t.name: np.asarray(t.data) for t in reader.tensors}
    assert set(stored) == set(expect)
    for name, value in expect.items():
        value = np.asarray(value, dtype=np.float32)
        got = stored[name].reshape(value.shape)
        if name.endswith(tuple(close)):
            np.testing.assert_allclose(got, value, rtol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(got, value, err_msg=name)
    return {f.name: f.contents() for f in reader.fields.values()}


def check_same_gguf_tensors(ours, theirs):
    """Two GGUF files hold the same tensors with the same values (A = -exp(A_log) within one f32 rounding: exp in
    f32 on one side, in double on the other)."""
    import gguf
    got = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(ours).tensors}
    expect = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(theirs).tensors}
    assert set(got) == set(expect)
    for name, value in expect.items():
        if name.endswith("ssm_a"):
            np.testing.assert_allclose(got[name], value, rtol=1e-6, atol=0, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], value, err_msg=name)


def check_same_gguf(ours, theirs, arch, keys):
    """Two GGUF files hold the same tensors, value for value, and the same <arch>.`keys` values."""
    import gguf
    got, expect = gguf.GGUFReader(ours), gguf.GGUFReader(theirs)
    theirs_by_name = {t.name: np.asarray(t.data) for t in expect.tensors}
    assert {t.name for t in got.tensors} == set(theirs_by_name)
    for t in got.tensors:
        np.testing.assert_array_equal(np.asarray(t.data), theirs_by_name[t.name], err_msg=t.name)
    for key in keys:
        assert got.fields[f"{arch}.{key}"].contents() == pytest.approx(expect.fields[f"{arch}.{key}"].contents()), key
    return got


def check_quantize_matches_converter(directory, write_gguf, arch, keys, ids, want, vocab, tmp_path):
    """`attnzoo quantize` at F32 of the checkpoint in `directory` against write_gguf(directory, path), a test's
    restatement of convert_hf_to_gguf.py with the gguf package: the same tensors and <arch>.`keys` (check_same_gguf);
    ours gives `want` for the whole prompt and token by token, theirs for the whole prompt. Returns ours loaded, and
    the gguf.GGUFReader of it."""
    import attnzoo
    ours, theirs = str(tmp_path / "ours.gguf"), str(tmp_path / "theirs.gguf")
    attnzoo.quantize(str(directory), ours, type="F32")
    write_gguf(directory, theirs)
    reader = check_same_gguf(ours, theirs, arch, keys)
    check_gguf_logits(ours, ids, want, vocab, prefill=30)
    check_full_prompt(Model.load(theirs), ids, want, vocab)
    return Model.load(ours), reader


def check_quantized_file_is_its_rounded_checkpoint(directory, path, gguf_name_of, tmp_path, ids, special=None):
    """The quantized GGUF at `path` (written from the checkpoint in `directory`) computes what the checkpoint computes
    with each tensor rounded as the file stores it: every tensor's GGUF type read from the file (through
    gguf_name_of(Hugging Face name): the GGUF tensor holding it), Q8_0 / F16 tensors rounded with the gguf package
    (special(name, value, types), when given and not None, rounds a tensor the file stores otherwise: a split
    kv_b_proj), the rounded checkpoint loaded by attnzoo at f32 and both compared on the prompt `ids`. Returns the
    file's {GGUF name: type name}."""
    import gguf
    types = {t.name: t.tensor_type for t in gguf.GGUFReader(path).tensors}

    def rounded(name, value):
        done = special(name, value, types) if special else None
        return done if done is not None else round_as(value, types[gguf_name_of(name)])

    copy = copy_with(directory, tmp_path / "rounded",
                     tensors_edit=lambda ts: ts.update({k: rounded(k, v) for k, v in ts.items()}))
    want = Model.load(copy, dtype="float32").forward(ids)
    from conftest import matmul_precision
    with matmul_precision("highest"):  # f32 products on the decoded blocks, as the rounded checkpoint computes
        got = Model.load(path).forward(ids)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
    return {k: v.name for k, v in types.items()}
