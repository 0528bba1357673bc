"""Checks shared by the test_model_*.py files: tiny random transformers checkpoints and the comparisons of
attnzoo's Model against them. Plain helpers (no test_* names), so pytest collects nothing here. The GGUF helpers
are in gguf_checks.py, the edited checkpoints and load errors in checkpoint_edits.py."""
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


def randomize_vectors(base):
    """A randomize() for random_model: every 1-D parameter (norm weights, biases) set to base + 0.3 * noise."""
    def randomize(model):
        import torch
        for p in model.parameters():
            if p.ndim == 1:
                p.copy_(base + 0.3 * torch.randn_like(p))
    return randomize


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


def randomize_ssm(model):
    """A randomize() for state-space models: A_log so that the decays exp(-A dt) spread over (0, 1), norm weights
    near 1, every other vector (D, dt_bias, biases) near 0: all exercised."""
    import torch
    for name, p in model.named_parameters():
        if name.endswith("A_log"):
            p.copy_(torch.log(torch.rand_like(p) * 2 + 0.2))
        elif p.ndim == 1:
            p.copy_((1.0 if "norm" in name else 0.0) + 0.3 * torch.randn_like(p))


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


def runs_torch_forms(functions):
    """Whether transformers runs its own PyTorch forms of `functions`: where fla, causal-conv1d or a hub kernel is
    installed it swaps them in behind these names, and each wrapper's closure says whether it did
    (is_new_implementation)."""
    import inspect
    return not any(inspect.getclosurevars(fn).nonlocals.get("is_new_implementation", True) for fn in functions)


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
