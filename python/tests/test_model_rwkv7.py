"""RWKV7ForCausalLM (flash-linear-attention's checkpoint format) against rwkv7_reference.py, a pure-torch
re-statement of fla's model (fla's own classes need triton): tiny random checkpoints, logits in f32, chunked
prefill, token-by-token decode, ragged batches, greedy continuation, the CLI, and load errors. The reference's
parameter names and shapes are checked against those fla's modeling code declares."""
import ast
import json
import os
import subprocess
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

import checkpoint_edits as edits  # noqa: E402
import model_checks as checks  # noqa: E402
import rwkv7_reference as ref  # noqa: E402
from attnzoo.generate import generate  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320
PROMPT_LEN = 40
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

CONFIGS = {
    # fla defaults otherwise: norm_first, norm_bias, fuse_norm (fused l2norm), value_dim = hidden.
    "h64_hd16_2l": dict(hidden_size=64, head_dim=16, num_hidden_layers=2, decay_low_rank_dim=8,
                        gate_low_rank_dim=16, a_low_rank_dim=8, v_low_rank_dim=4),
    # value heads twice as wide as key heads, explicit intermediate_size, tied embeddings.
    "h128_hd32_3l_wide_v_tied": dict(hidden_size=128, head_dim=32, num_hidden_layers=3, decay_low_rank_dim=16,
                                     gate_low_rank_dim=32, a_low_rank_dim=12, v_low_rank_dim=8, value_dim=256,
                                     intermediate_size=160, tie_word_embeddings=True),
    # LayerNorms without bias, F.normalize for kk (fuse_norm=False), hidden_ratio 3.
    "h64_hd32_4l_nobias": dict(hidden_size=64, head_dim=32, num_hidden_layers=4, decay_low_rank_dim=4,
                               gate_low_rank_dim=8, a_low_rank_dim=12, v_low_rank_dim=6, norm_bias=False,
                               fuse_norm=False, hidden_ratio=3),
}


def _build(kind, directory):
    cfg = ref.make_config(vocab_size=VOCAB, **CONFIGS[kind])
    torch.manual_seed(0)
    model = ref.RWKV7ForCausalLM(cfg)
    ref.randomize(model, seed=sum(map(ord, kind)))
    ref.save_checkpoint(model, directory)
    return model


@pytest.fixture(scope="module", params=list(CONFIGS))
def case(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    model = _build(request.param, directory)
    ids = checks.prompt(VOCAB, PROMPT_LEN)
    want = model(torch.from_numpy(ids))[0].numpy()
    assert want.std() > 0.1  # the comparisons are meaningful, not between near-zero logits
    return request.param, model, Model.load(directory), ids, want


def test_full_prompt_matches_reference(case):
    kind, model, m, ids, want = case
    checks.check_full_prompt(m, ids, want, VOCAB)


def test_chunked_prefill_matches_one_shot(case):
    kind, model, m, ids, want = case
    checks.check_prompt_in_pieces(m, ids, want, ([1, 7, 17, 15], [17, 1, 7, 15]))


def test_token_by_token_decode(case):
    kind, model, m, ids, want = case
    checks.check_token_by_token_decode(m, ids, want, prefill=1, stop=PROMPT_LEN)


def test_odd_shuffled_blocks_give_the_same_logits(case):
    kind, model, m, ids, want = case
    checks.check_odd_shuffled_blocks(m, ids, want, ([1, 7, 17, 15], [17, 1, 7, 15]), prefill=1, stop=PROMPT_LEN)


def test_ragged_batch_matches_separate_sequences(case):
    kind, model, m, ids, want = case
    checks.check_ragged_batch(m, ids, want, checks.prompt(VOCAB, 23, seed=1))


def test_greedy_continuation_matches_reference_loop(case):
    kind, model, m, ids, want = case
    prompt = ids[:12]
    expect = model.greedy(torch.from_numpy(prompt), 32)
    got = generate(m, None, prompt, max_new_tokens=32, temperature=0, eos_token_id=[])
    assert list(got) == expect


def test_inspect_reports_fixed_state_per_layer(case):
    kind, model, m, ids, want = case
    cfg = model.config
    info = m.inspect()
    C, L, K = cfg.hidden_size, cfg.num_hidden_layers, cfg.head_dim
    H, V = C // K, cfg.value_dim[0] // (C // K)
    per_layer = 4 * (C + H * K * V + C)  # attn shift + wkv state [H, K, V] + ffn shift, f32
    assert info["architecture"] == "RWKV7ForCausalLM" and info["num_layers"] == L
    assert [layer["kind"] for layer in info["layers"]] == ["rwkv7"] * L
    assert info["cache_bytes_per_token"] == 0
    for t in (4096, 1048576):
        assert info["cache_bytes_at"][t] == L * per_layer
    assert info["parameter_count"] == sum(p.numel() for p in model.state_dict().values()) - (
        VOCAB * C if cfg.tie_word_embeddings else 0)
    assert info["tied_embeddings"] == cfg.tie_word_embeddings
    seq = m.new_sequence()
    m.forward(ids[:5], seq=seq)
    assert seq.cache_bytes == L * per_layer
    trace = m.trace(ids[:6])
    assert len(trace) == L and all(len(t["state_norms"]) == H for t in trace)
    _, state = model(torch.from_numpy(ids[:6]))
    for t, s in zip(trace, state):
        np.testing.assert_allclose(t["state_norms"], s["recurrent_state"].flatten(1).norm(dim=1).numpy(), rtol=1e-4)


def test_bf16_weights(small):
    model, directory = small
    ids = checks.prompt(VOCAB, 24)
    want = model(torch.from_numpy(ids))[0].double().numpy()
    m = Model.load(directory, dtype="bfloat16")
    got = m.forward(ids)
    rel = np.sqrt(((got - want) ** 2).sum() / (want ** 2).sum())
    assert 0 < rel <= 2e-2
    assert m.inspect()["owned_weight_bytes"] > 0


# ---- the reference keeps fla's parameter names and shapes -------------------------------------------------------

def _stub_norm(hidden_size, elementwise_affine=True, bias=False, eps=1e-5, **_):
    """fla.modules.LayerNorm / GroupNorm parameters: weight [hidden], bias [hidden] when bias=True."""
    m = torch.nn.Module()
    m.weight = torch.nn.Parameter(torch.zeros(hidden_size))
    if bias:
        m.bias = torch.nn.Parameter(torch.zeros(hidden_size))
    return m


def _fla_declared(path, class_name, names, self_attrs):
    """Parameters fla's `class_name.__init__` declares directly (self.X = nn.Parameter / nn.Linear / LoRA / norms
    / nn.Embedding), found by walking its source: if-branches are taken by evaluating their test, assignments
    to locals and to self.X are evaluated in order, except those naming what this file does not provide
    (sub-blocks, activations, ModuleList: their parameters are declared by their own classes).
    Returns {name: shape}."""
    tree = ast.parse(open(os.path.join(ref.FLA_DIR, path)).read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    self = types.SimpleNamespace(**self_attrs)
    env = dict(names, self=self, nn=torch.nn, torch=torch, LoRA=ref.LoRA, LayerNorm=_stub_norm,
               GroupNorm=_stub_norm, max=max, int=int, round=round,
               _init_weights=False,  # the weight-init branches declare nothing
               get_attention=lambda config, layer_idx: None)  # no softmax-attention layers (attn=None)
    leaf_makers = ("nn.Parameter", "nn.Linear", "LoRA", "LayerNorm", "GroupNorm", "nn.Embedding", "nn.GroupNorm")
    declared = {}

    def run(body):
        for st in body:
            if isinstance(st, ast.If):
                run(st.body if eval(compile(ast.Expression(st.test), path, "eval"), env) else st.orelse)
            elif isinstance(st, ast.Assign) and len(st.targets) == 1:
                tgt, src = st.targets[0], ast.unparse(st.value)
                is_leaf = isinstance(st.value, ast.Call) and any(k in ast.unparse(st.value.func) for k in leaf_makers)
                try:
                    value = eval(src, env)
                except (NameError, KeyError):  # sub-blocks, activations: declared by their own classes
                    if is_leaf:
                        raise
                    continue
                if isinstance(tgt, ast.Name):
                    env[tgt.id] = value
                elif isinstance(tgt, ast.Attribute) and ast.unparse(tgt.value) == "self":
                    setattr(self, tgt.attr, value)
                    if isinstance(value, torch.nn.Parameter):
                        declared[tgt.attr] = tuple(value.shape)
                    elif isinstance(value, torch.nn.Module):
                        declared.update({f"{tgt.attr}.{k}": tuple(v.shape) for k, v in value.state_dict().items()})
    run(init.body)
    return declared


def _fla_state_dict_shapes(cfg):
    out = {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}"
        attn = _fla_declared("layers/rwkv7.py", "RWKV7Attention", dict(
            mode="chunk", hidden_size=cfg.hidden_size, head_dim=cfg.head_dim, num_heads=cfg.num_heads,
            decay_low_rank_dim=cfg.decay_low_rank_dim, gate_low_rank_dim=cfg.gate_low_rank_dim,
            a_low_rank_dim=cfg.a_low_rank_dim, v_low_rank_dim=cfg.v_low_rank_dim, elementwise_affine=True,
            norm_eps=cfg.norm_eps, layer_idx=i, fuse_norm=cfg.fuse_norm, value_dim=cfg.value_dim[i],
            num_hidden_layers=cfg.num_hidden_layers), {})
        ffn = _fla_declared("models/rwkv7/modeling_rwkv7.py", "RWKV7FeedForward", dict(
            hidden_size=cfg.hidden_size, hidden_ratio=cfg.hidden_ratio, intermediate_size=cfg.intermediate_size,
            hidden_act=cfg.hidden_act, layer_idx=i, num_hidden_layers=cfg.num_hidden_layers), {})
        block = _fla_declared("models/rwkv7/modeling_rwkv7.py", "RWKV7Block", dict(config=cfg, layer_idx=i), {})
        out.update({f"{p}.attn.{k}": v for k, v in attn.items()})
        out.update({f"{p}.ffn.{k}": v for k, v in ffn.items()})
        out.update({f"{p}.{k}": v for k, v in block.items()})
    model = _fla_declared("models/rwkv7/modeling_rwkv7.py", "RWKV7Model", dict(config=cfg), {})
    out.update({f"model.{k}": v for k, v in model.items()})
    out.update(_fla_declared("models/rwkv7/modeling_rwkv7.py", "RWKV7ForCausalLM", dict(config=cfg), {}))
    return out


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_reference_state_dict_is_what_fla_declares(kind):
    cfg = ref.make_config(vocab_size=VOCAB, **CONFIGS[kind])
    mine = {k: tuple(v.shape) for k, v in ref.RWKV7ForCausalLM(cfg).state_dict().items()}
    fla = _fla_state_dict_shapes(cfg)
    assert mine == fla
    assert "model.layers.0.attn.v_lora.lora.0.weight" not in fla and "model.layers.1.pre_norm.weight" not in fla


# ---- CLI and errors ---------------------------------------------------------------------------------------------

def _cli():
    for path in (os.environ.get("ATTNZOO_CLI"), os.path.join(ROOT, "build-rwkv7model", "attnzoo"),
                 os.path.join(ROOT, "build", "attnzoo")):
        if path and os.access(path, os.X_OK):
            return path
    pytest.skip("attnzoo CLI not built (set ATTNZOO_CLI)")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    directory = tmp_path_factory.mktemp("rwkv7_small")
    return _build("h64_hd16_2l", directory), directory


def test_cli_inspect_and_generate(small, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers
    model, directory = small
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 20, trainer)
    d = edits.copy_with(directory, tmp_path / "with_tok")
    tok.save(str(d / "tokenizer.json"))

    r = subprocess.run([_cli(), "inspect", "-m", str(d), "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    per_layer = 4 * (64 + 4 * 16 * 16 + 64)  # attn shift + wkv [4 heads, 16, 16] + ffn shift, f32
    assert info["architecture"] == "RWKV7ForCausalLM" and info["cache_bytes_per_token"] == 0
    assert [(x["kind"], x["cache"]["kind"], x["cache"]["fixed_bytes"]) for x in info["layers"]] == [
        ("rwkv7", "state", per_layer)] * 2
    r = subprocess.run([_cli(), "inspect", "-m", str(d)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "RWKV7ForCausalLM" in r.stdout and "rwkv7 [state]" in r.stdout, r.stderr

    prompt = "the quick brown"
    r = subprocess.run([_cli(), "generate", "-m", str(d), "-p", prompt, "-n", "12"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    want = model.greedy(torch.tensor(tok.encode(prompt).ids), 12)
    if 2 in want:  # config.json's eos_token_id: generation stops after it
        want = want[:want.index(2) + 1]
    assert r.stdout.rstrip("\n") == tok.decode(want, skip_special_tokens=True)


@pytest.mark.parametrize("name", ["model.layers.1.attn.v_lora.lora.2.bias", "model.layers.0.attn.r_k",
                                  "model.layers.1.ffn.key.weight", "model.layers.0.pre_norm.bias", "lm_head.weight"])
def test_missing_tensor_is_named(small, tmp_path, name):
    _, directory = small
    d = edits.copy_with(directory, tmp_path / "m", tensors_edit=lambda t: t.pop(name))
    with pytest.raises(ValueError) as e:
        Model.load(d)
    assert name in str(e.value) and str(d) in str(e.value)


def test_misshapen_tensor_and_bad_config_are_named(small, tmp_path):
    _, directory = small
    name = "model.layers.1.attn.k_k"

    def shrink(t):
        t[name] = t[name][:-1].copy()
    d = edits.copy_with(directory, tmp_path / "s", tensors_edit=shrink)
    with pytest.raises(ValueError, match=r"attn\.k_k.*model\.safetensors|model\.safetensors.*attn\.k_k"):
        Model.load(d)
    edits.check_config_error_is_named(directory, tmp_path / "a", "hidden_act", hidden_act="gelu")
    edits.check_config_error_is_named(directory, tmp_path / "b", "attn", attn=dict(layers=[1], num_heads=4))
    edits.check_config_error_is_named(directory, tmp_path / "c", "head_dim", head_dim=24)
