"""Checks shared by the test_model_*.py files: tiny random transformers checkpoints and the comparisons of
attnzoo's Model against them. Plain helpers (no test_* names), so pytest collects nothing here."""
import json
import os

import numpy as np
import pytest

from attnzoo.generate import generate
from attnzoo.model import Model

ATOL = 1e-4


def prompt(vocab, n, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, size=n).astype(np.int64)


def random_model(kind, config, randomize, **from_config_kwargs):
    """A transformers model seeded by its kind's name; randomize(model) runs under no_grad to move the
    parameters that start at constants (norms, biases) so that they are really exercised."""
    import torch
    import transformers
    torch.manual_seed(sum(map(ord, kind)))
    model = transformers.AutoModelForCausalLM.from_config(config, **from_config_kwargs)
    with torch.no_grad():
        randomize(model)
    return model


def save_random_model(kind, config, directory, randomize, **from_config_kwargs):
    """Saves a random checkpoint; returns the transformers model (eval mode) holding the saved values."""
    model = random_model(kind, config, randomize, **from_config_kwargs)
    model.save_pretrained(directory, safe_serialization=True)
    return model.eval()


def build_gguf_case(param, tmp_path_factory, build, vocab, prompt_len):
    """A GGUF test case: build(kind, ftype, directory) -> (reference model, GGUF path) for param = (kind, ftype);
    returns kind, ftype, directory, path, prompt ids and the reference's logits on them."""
    kind, ftype = param
    directory = str(tmp_path_factory.mktemp(f"{kind}-{ftype}"))
    ref, path = build(kind, ftype, directory)
    ids = prompt(vocab, prompt_len)
    return kind, ftype, directory, path, ids, meaningful_logits(ref, ids)


def save_gguf_and_checkpoint(kind, config, randomize, directory, ftype, write):
    """A random transformers model of `kind` (random_model) written by write(model, path) to
    <directory>/<kind>-<ftype>.gguf, which may round the model's values to the file's, then saved as a safetensors
    checkpoint in <directory>/hf; returns the model (eval mode) and the GGUF's path."""
    model = random_model(kind, config, randomize).eval()
    path = os.path.join(directory, f"{kind}-{ftype}.gguf")
    write(model, path)  # the model now holds the values the file decodes to
    model.save_pretrained(os.path.join(directory, "hf"), safe_serialization=True)
    return model, path


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


def check_gguf_logits(path, ids, want, vocab, prefill):
    """The GGUF loaded by attnzoo: the whole prompt, then token by token after a prefill."""
    m = Model.load(path)
    check_full_prompt(m, ids, want, vocab)
    check_token_by_token_decode(m, ids, want, prefill=prefill, stop=len(ids))


def finish_gguf(writer):
    """Writes a gguf.GGUFWriter's header, metadata and tensors, and closes it."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


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


def reference_logits(ref, ids):
    import torch
    with torch.no_grad():
        return ref(torch.from_numpy(ids)[None]).logits[0].numpy()


def meaningful_logits(ref, ids):
    """transformers' logits for ids, checked to be large enough that comparing against them means something."""
    want = reference_logits(ref, ids)
    assert want.std() > 0.1
    return want


def check_full_prompt(m, ids, want, vocab):
    got = m.forward(ids)
    assert got.shape == (len(ids), vocab) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)


def check_prompt_in_pieces(m, ids, want, piece_orders):
    """Feeds the prompt through one sequence in each order of piece sizes; the rows match the one-shot logits."""
    for pieces in piece_orders:
        seq, rows, start = m.new_sequence(), [], 0
        for size in pieces:
            rows.append(m.forward(ids[start:start + size], seq=seq))
            start += size
        assert seq.length == len(ids)
        np.testing.assert_allclose(np.concatenate(rows), want, atol=ATOL, rtol=0)


def check_token_by_token_decode(m, ids, want, prefill, stop):
    """Prefills ids[:prefill] (last row only), then decodes tokens prefill..stop-1 one at a time."""
    seq = m.new_sequence()
    np.testing.assert_allclose(m.forward(ids[:prefill], seq=seq, last_only=True)[0], want[prefill - 1],
                               atol=ATOL, rtol=0)
    for t in range(prefill, stop):
        np.testing.assert_allclose(m.forward(ids[t:t + 1], seq=seq)[0], want[t], atol=ATOL, rtol=0)


def check_odd_shuffled_blocks(m, ids, want, piece_orders, prefill, stop):
    """The same checkpoint on a pool of 7-token blocks handed out in shuffled order: every piece and decode step
    reads its keys through non-adjacent blocks, and must give the logits of the default pool."""
    odd = type(m).load(m.path, block_size=7, shuffle_blocks_seed=13)
    check_prompt_in_pieces(odd, ids, want, piece_orders)
    check_token_by_token_decode(odd, ids, want, prefill=prefill, stop=stop)


def check_greedy_continuation(ref, m, prompt_ids, pad_token_id, explicit_mask=True, new_tokens=32):
    """Greedy generate() against transformers' generate(). With explicit_mask, an all-ones attention_mask is
    passed: otherwise generate() takes prompt tokens equal to pad_token_id for padding."""
    import torch
    with torch.no_grad():
        x = torch.tensor(np.asarray(prompt_ids, dtype=np.int64))[None]
        mask = dict(attention_mask=torch.ones_like(x)) if explicit_mask else {}
        out = ref.generate(x, **mask, max_new_tokens=new_tokens, do_sample=False, min_new_tokens=new_tokens,
                           pad_token_id=pad_token_id, eos_token_id=None)
    expect = out[0, len(prompt_ids):].tolist()
    got = generate(m, None, prompt_ids, max_new_tokens=new_tokens, temperature=0, eos_token_id=[])
    assert list(got) == expect


def check_ragged_batch(m, ids, want, other):
    """Sequence a decodes 3 tokens while b prefills all of `other`, in one call; then both decode a single
    token together (the parallel-over-sequences path)."""
    a, b = m.new_sequence(), m.new_sequence()
    m.forward(ids[:30], seq=a)
    out_a, out_b = m.forward_batch([a, b], [ids[30:33], other])
    np.testing.assert_allclose(out_a, want[30:33], atol=ATOL, rtol=0)
    np.testing.assert_allclose(out_b, m.forward(other), atol=ATOL, rtol=0)
    out_a, out_b = m.forward_batch([a, b], [ids[33:34], ids[:1]], last_only=True)
    np.testing.assert_allclose(out_a[0], want[33], atol=ATOL, rtol=0)
    np.testing.assert_allclose(out_b[0], m.forward(np.concatenate([other, ids[:1]]))[-1], atol=ATOL, rtol=0)


def check_fixed_state_only(m, ids, layer_kinds, per_layer):
    """`inspect` of a model whose layers are of `layer_kinds` and each hold a fixed state of per_layer bytes and
    nothing per token: the totals at 4K and 1M tokens are the layers' states, and so is a sequence's cache after
    50 tokens (it does not grow). Returns the inspect dict."""
    info = m.inspect()
    total = len(layer_kinds) * per_layer
    assert [layer["kind"] for layer in info["layers"]] == layer_kinds
    for layer in info["layers"]:
        assert layer["cache"]["fixed_bytes"] == per_layer and layer["cache"]["bytes_per_token"] == 0
    assert info["cache_bytes_per_token"] == 0
    assert info["cache_bytes_at"][4096] == info["cache_bytes_at"][1048576] == total
    seq = m.new_sequence()
    m.forward(ids[:50], seq=seq)
    assert seq.cache_bytes == total
    return info


def copy_with(src, dst, config_edit=None, tensors_edit=None):
    """Copies a checkpoint, editing its config dict and / or its tensor dict in place on the way."""
    from safetensors.numpy import load_file, save_file
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    if config_edit:
        config_edit(cfg)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f)
    tensors = load_file(os.path.join(src, "model.safetensors"))
    if tensors_edit:
        tensors_edit(tensors)
    save_file(tensors, os.path.join(dst, "model.safetensors"))
    return dst


def expect_load_error(directory, match):
    with pytest.raises(ValueError, match=match):
        Model.load(directory)


def check_missing_tensors_are_named(src, tmp_path, names):
    """A checkpoint missing any one of `names` fails to load with an error naming it."""
    for i, name in enumerate(names):
        d = copy_with(src, tmp_path / f"missing{i}", tensors_edit=lambda t: t.pop(name))
        expect_load_error(d, name.replace(".", r"\."))


def check_edited_tensor_is_named(src, dst, name, edit):
    """A checkpoint whose tensor `name` is replaced by edit(its value) (a misshapen copy) fails to load with an
    error naming it."""
    def apply(tensors):
        tensors[name] = edit(tensors[name])
    expect_load_error(copy_with(src, dst, tensors_edit=apply), name.replace(".", r"\."))


def checkpoint_fixture(build, kind):
    """A module-scoped fixture: the directory build(kind, directory) saved a checkpoint in, built once for the
    module's load-error tests to copy and edit."""
    @pytest.fixture(scope="module")
    def checkpoint_dir(tmp_path_factory):
        directory = tmp_path_factory.mktemp(kind)
        build(kind, directory)
        return directory
    return checkpoint_dir


def check_config_error_is_named(src, dst, match, **updates):
    """A config with `updates` applied fails to load with an error matching `match`."""
    expect_load_error(copy_with(src, dst, config_edit=lambda c: c.update(updates)), match)


def add_standard_tests(namespace, vocab, piece_orders, prefill, stop, pad_token_id, other_prompt,
                       greedy_prompt_len=24):
    """Defines, in a test module's `namespace`, the six checks every architecture runs on its `case` fixture
    (kind, transformers model, attnzoo model, prompt ids, transformers logits):
    the whole prompt, the prompt in pieces (each order in piece_orders), token-by-token decode after `prefill`
    tokens up to `stop`, a greedy continuation of the first greedy_prompt_len ids, a ragged batch that prefills
    other_prompt beside a decoding sequence, and the pieces and the decode again on 7-token blocks in shuffled
    order."""

    def test_full_prompt_matches_transformers(case):
        kind, ref, m, ids, want = case
        check_full_prompt(m, ids, want, vocab)

    def test_prompt_in_pieces_carries_the_state(case):
        kind, ref, m, ids, want = case
        check_prompt_in_pieces(m, ids, want, piece_orders)

    def test_token_by_token_decode(case):
        kind, ref, m, ids, want = case
        check_token_by_token_decode(m, ids, want, prefill=prefill, stop=stop)

    def test_greedy_continuation_matches_transformers(case):
        kind, ref, m, ids, want = case
        check_greedy_continuation(ref, m, ids[:greedy_prompt_len], pad_token_id=pad_token_id)

    def test_ragged_batch_mixes_prefill_and_decode(case):
        kind, ref, m, ids, want = case
        check_ragged_batch(m, ids, want, other_prompt)

    def test_odd_shuffled_blocks_give_the_same_logits(case):
        kind, ref, m, ids, want = case
        check_odd_shuffled_blocks(m, ids, want, piece_orders, prefill, stop)

    for fn in (test_full_prompt_matches_transformers, test_prompt_in_pieces_carries_the_state,
               test_token_by_token_decode, test_greedy_continuation_matches_transformers,
               test_ragged_batch_mixes_prefill_and_decode, test_odd_shuffled_blocks_give_the_same_logits):
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


def round_as(value, t):
    """`value` rounded as a GGUF tensor of type `t` (a gguf.GGMLQuantizationType) stores it, in float32."""
    import gguf
    if t == gguf.GGMLQuantizationType.F16:
        return value.astype(np.float16).astype(np.float32)
    if t != gguf.GGMLQuantizationType.F32:
        return gguf.quants.dequantize(gguf.quants.quantize(np.ascontiguousarray(value), t), t).reshape(value.shape)
    return value


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


def randomize_vectors(base):
    """A randomize() for random_model: every 1-D parameter (norm weights, biases) set to base + 0.3 * noise."""
    def randomize(model):
        import torch
        for p in model.parameters():
            if p.ndim == 1:
                p.copy_(base + 0.3 * torch.randn_like(p))
    return randomize


def randomize_ssm(model):
    """A randomize() for state-space models: A_log so that the decays exp(-A dt) spread over (0, 1), norm weights
    near 1, every other vector (D, dt_bias, biases) near 0: all exercised."""
    import torch
    for name, p in model.named_parameters():
        if name.endswith("A_log"):
            p.copy_(torch.log(torch.rand_like(p) * 2 + 0.2))
        elif p.ndim == 1:
            p.copy_((1.0 if "norm" in name else 0.0) + 0.3 * torch.randn_like(p))


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


def runs_torch_forms(functions):
    """Whether transformers runs its own PyTorch forms of `functions`: where fla, causal-conv1d or a hub kernel is
    installed it swaps them in behind these names, and each wrapper's closure says whether it did
    (is_new_implementation)."""
    import inspect
    return not any(inspect.getclosurevars(fn).nonlocals.get("is_new_implementation", True) for fn in functions)


def define_family_tests(namespace, config, kinds, randomize, vocab, prompt_len=40, piece_orders=([1, 7, 17, 15],),
                        prefill=25, stop=None, pad_token_id=0, block_size=4, torch_path=None,
                        attn_implementation="eager", **from_config_kwargs):
    """For a test module of one architecture family built by transformers from config(kind) (attn_implementation,
    None for a model without attention, and from_config_kwargs such as experts_implementation): defines
    _build(kind, directory) (the random checkpoint, as test_inspect_config.py builds it too), _prompt(n, seed), the
    module-scoped `case` fixture over `kinds` (a prompt of prompt_len ids, the attnzoo model on block_size-token
    blocks; torch_path(), when given, must hold first: transformers runs its own torch code, not a fused kernel)
    and add_standard_tests' six checks (pieces in each order of piece_orders, decode from `prefill` up to `stop`,
    by default the whole prompt; pad_token_id for the greedy continuation, a 23-token other prompt)."""
    def _build(kind, directory):
        kwargs = dict(from_config_kwargs)
        if attn_implementation is not None:
            kwargs["attn_implementation"] = attn_implementation
        return save_random_model(kind, config(kind), directory, randomize, **kwargs)

    def _prompt(n=prompt_len, seed=0):
        return prompt(vocab, n, seed)

    @pytest.fixture(scope="module", params=kinds)
    def case(request, tmp_path_factory):
        if torch_path is not None:
            assert torch_path()
        directory = tmp_path_factory.mktemp(request.param)
        ref = _build(request.param, directory)
        ids = _prompt()
        return request.param, ref, Model.load(directory, block_size=block_size), ids, meaningful_logits(ref, ids)

    namespace.update(_build=_build, _prompt=_prompt, case=case)
    add_standard_tests(namespace, vocab, piece_orders, prefill=prefill, stop=prompt_len if stop is None else stop,
                       pad_token_id=pad_token_id, other_prompt=_prompt(23, seed=1))


def randomize_with_correction_bias(base):
    """randomize_vectors(base), plus the routers' e_score_correction_bias buffers (sigmoid-routed MoEs) set large
    enough to change which experts win."""
    def randomize(model):
        import torch
        randomize_vectors(base)(model)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.05 * torch.randn_like(b))
    return randomize


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
