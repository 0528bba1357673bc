"""What a flash-attn / transformers user types first: float64 arrays and plain lists get a message naming the
dtype, flash-attn's softmax_scale / window_size mean what they mean there (checked against the window=W form
and a torch reference with the explicit mask), grads are refused loudly, and Model.forward answers in the
caller's framework."""
import numpy as np
import pytest

import attnzoo

torch = pytest.importorskip("torch")


def _qkv(T=24, H=2, D=16, seed=0):
    g = np.random.default_rng(seed)
    return [g.standard_normal((1, T, H, D)).astype(np.float32) for _ in range(3)]


def test_float64_and_lists_name_the_dtype():
    q, k, v = _qkv()
    with pytest.raises(TypeError, match=r"^q: float64 is not supported; use float32, bfloat16 or float16"):
        attnzoo.attention(q.astype(np.float64), k, v)
    with pytest.raises(TypeError, match=r"^k: float64 is not supported"):
        attnzoo.attention(q, k.tolist(), v)
    with pytest.raises(TypeError, match=r"^v: int16 is not supported"):
        attnzoo.attention(q, k, v.astype(np.int16))
    with pytest.raises(TypeError, match=r"^v: float8_e4m3fn is not supported.*uint8 bytes with kv_cache_dtype='fp8'"):
        attnzoo.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v).to(torch.float8_e4m3fn))
    with pytest.raises(TypeError, match=r"^v: float8_e5m2 is not supported"):
        attnzoo.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v).to(torch.float8_e5m2))
    # int8 is a known dtype (quantized KV caches), refused where a float tensor is needed.
    with pytest.raises(TypeError, match=r"^v: expected float32, bfloat16 or float16, got int8"):
        attnzoo.attention(q, k, v.astype(np.int8))


def _torch_reference(q, k, v, scale, left):
    """Causal softmax attention where key j is visible from query i iff i - left <= j <= i (flash-attn's rule)."""
    qt, kt, vt = (torch.from_numpy(x).double().transpose(1, 2) for x in (q, k, v))
    T = q.shape[1]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None]
    mask = (j <= i) & (j >= i - left)
    return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale) \
        .transpose(1, 2).float().numpy()


def test_flash_attn_spellings():
    q, k, v = _qkv()
    want = _torch_reference(q, k, v, scale=0.3, left=5)
    got = attnzoo.attention(q, k, v, causal=True, softmax_scale=0.3, window_size=(5, 0))
    np.testing.assert_allclose(got, want, atol=2e-5, rtol=0)
    np.testing.assert_array_equal(got, attnzoo.attention(q, k, v, scale=0.3, window=6))
    np.testing.assert_array_equal(attnzoo.attention(q, k, v, window_size=(-1, -1)), attnzoo.attention(q, k, v))
    with pytest.raises(ValueError, match=r"^window_size: right=3 is not supported"):
        attnzoo.attention(q, k, v, causal=False, window_size=(4, 3))
    with pytest.raises(ValueError, match=r"^softmax_scale: give scale or softmax_scale"):
        attnzoo.attention(q, k, v, scale=0.1, softmax_scale=0.1)
    with pytest.raises(ValueError, match=r"^window_size: expected \(left, right\)"):
        attnzoo.attention(q, k, v, window_size=4)


def test_tensors_requiring_grad_are_refused_loudly():
    q, k, v = (torch.from_numpy(x).requires_grad_() for x in _qkv())
    with pytest.warns(UserWarning, match=r"^q: requires grad, but attnzoo has no autograd"):
        out = attnzoo.attention(q, k, v)
    assert isinstance(out, torch.Tensor) and out.grad_fn is None and not out.requires_grad


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    d = tmp_path_factory.mktemp("tiny")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    transformers.LlamaForCausalLM(cfg).save_pretrained(d)
    return attnzoo.Model.load(d)


def test_model_forward_answers_in_the_callers_framework(tiny_model):
    ids = [3, 1, 4, 1, 5]
    want = tiny_model.forward(np.array(ids))
    assert isinstance(want, np.ndarray) and isinstance(tiny_model.forward(ids), np.ndarray)
    got = tiny_model.forward(torch.tensor(ids))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), want)
    a, b = tiny_model.forward_batch([tiny_model.new_sequence(), tiny_model.new_sequence()],
                                    [torch.tensor(ids), np.array(ids[:2])])
    assert isinstance(a, torch.Tensor) and isinstance(b, np.ndarray)
    np.testing.assert_array_equal(a.numpy(), want)
