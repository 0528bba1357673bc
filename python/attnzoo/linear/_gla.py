"""Linear attention, RetNet retention, simple GLA, GLA and the causal short convolution.

All four attention families run one gated linear recurrence per (sequence, value head):

    S_t = diag(exp(g_t)) S_{t-1} + phi(k_t)^T v_t        o_t = scale * phi(q_t) S_t

Layout (fla's): q, k [B, T, H, K]; v [B, T, HV, V] with HV a multiple of H (value head hv reads key head
hv // (HV // H)); gates in natural-log space; recurrent state [N, HV, K, V] float32 where N is B, or
len(cu_seqlens) - 1 for packed sequences (B == 1). scale defaults to K ** -0.5. Inputs float32, bfloat16 or
float16 (numpy in -> numpy out, torch in -> torch out); accumulation and states in float32; o has q's dtype.
`chunk_*` is the chunkwise-parallel prefill (chunk_size 16, 32, 64 or 128); `recurrent_*` (alias
`fused_recurrent_*`) the O(1)-per-token decode form. Both return (o, final_state or None).
CUDA torch tensors run the recurrent and chunked forms on the GPU (outputs and states on their device, on the
caller's current stream; cu_seqlens is read on the host, a CUDA one is copied there; the chunked kernels take
K, V <= 128 and chunk_size <= 64, and the normalised linear attention runs the recurrent kernel there), as do the
short convolution's prefill and decode step; the parallel and reference forms refuse them by name. check_inputs
scans CUDA inputs with torch there.
"""
import numpy as np

from .. import _core
from .._arrays import _is_torch, as_i32_vector, as_input, as_output, cuda_stream_of, empty_like_input, shape_of
from ._common import check_layouts, contiguous, empty_f32, float32_state, in_place_state, num_seqs, optional_input, scan

__all__ = [
    "chunk_linear_attn", "recurrent_linear_attn", "fused_recurrent_linear_attn",
    "chunk_retention", "recurrent_retention", "fused_recurrent_retention", "parallel_retention",
    "chunk_simple_gla", "recurrent_simple_gla", "fused_recurrent_simple_gla",
    "chunk_gla", "recurrent_gla", "fused_recurrent_gla",
    "causal_conv1d", "causal_conv1d_update",
]


def _float_input(x, name, cuda=False):
    """A float array taken as it is (TypeError for non-float dtypes); copied and scanned after the layout checks.
    CUDA tensors where `cuda` (the recurrence's tensors: the entries run them or refuse them by name)."""
    x = as_input(x, name, cuda)
    if _is_torch(x):
        if not x.is_floating_point():
            raise TypeError(f"{name}: expected a float tensor, got {x.dtype}")
    elif np.asarray(x).dtype.kind != "f":
        raise TypeError(f"{name}: expected a float array, got {np.asarray(x).dtype}")
    return x


def _ready(x, name, check=True):
    """After the layout checks: contiguous, and scanned for NaN / Inf unless not `check`."""
    return scan(contiguous(x), name, check)


def _reverse_time(x, cu):
    """Reverses every sequence in time: the padded axis 1, or each packed segment of cu_seqlens."""
    if x is None:
        return None
    if cu is None:
        return x.flip(1) if _is_torch(x) else np.ascontiguousarray(x[:, ::-1])
    c = np.asarray(cu.numpy() if _is_torch(cu) else cu, dtype=np.int64)
    idx = np.concatenate([np.arange(c[i + 1] - 1, c[i] - 1, -1) for i in range(len(c) - 1)] + [np.zeros(0, np.int64)])
    if _is_torch(x):
        import torch
        return x[:, torch.from_numpy(idx)].contiguous()
    return np.ascontiguousarray(x[:, idx])


def _state_in(s, state_v_first, name):
    s = _f32(s, name)
    if s is not None and state_v_first:
        s = contiguous(s.transpose(-1, -2) if _is_torch(s) else np.swapaxes(s, -1, -2))
    return s


def _state_out(s, state_v_first):
    if s is not None and state_v_first:
        return contiguous(s.transpose(-1, -2) if _is_torch(s) else np.swapaxes(s, -1, -2))
    return s


def _f32(x, name):
    """A float state as contiguous float32 (TypeError for non-float dtypes), on its device."""
    return None if x is None else float32_state(_float_input(x, name, cuda=True), name)


def _run(family, path, q, k, v, g=None, g_gamma=None, scale=None, initial_state=None, output_final_state=False,
         cu_seqlens=None, chunk_size=64, feature_map=None, normalize=False, initial_z=None, reverse=False,
         state_v_first=False, inplace_final_state=False, check_inputs=True):
    q, k, v = (_float_input(x, n, cuda=True) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    g = None if g is None else _float_input(g, "g", cuda=True)
    g_gamma = optional_input(g_gamma, "g_gamma", cuda=True)
    caller_state = initial_state
    if inplace_final_state:
        if state_v_first:
            raise ValueError("initial_state: inplace_final_state=True needs the [N, HV, K, V] layout "
                             "(state_v_first=False)")
        initial_state = in_place_state(initial_state, cuda=True)
    else:
        initial_state = optional_input(initial_state, "initial_state", cuda=True)
    initial_z = optional_input(initial_z, "initial_z", cuda=True)
    cu = as_i32_vector(cu_seqlens, "cu_seqlens")
    if chunk_size not in (16, 32, 64, 128):
        raise ValueError(f"chunk_size: must be 16, 32, 64 or 128, got {chunk_size}")
    dims = check_layouts([("q", q, "B T H K"), ("k", k, "B T H K"), ("v", v, "B T HV V"),
                          ("g", g, "B T HV | B T HV K"), ("g_gamma", g_gamma, "HV")])
    N = num_seqs(dims["B"], cu)
    check_layouts([("initial_state", initial_state, "N HV V K" if state_v_first else "N HV K V"),
                   ("initial_z", initial_z, "N 1 H K")], {**dims, "N": N})
    q, k, v = (_ready(x, n, check_inputs) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    g = None if g is None else _ready(g, "g", check_inputs)
    if reverse:
        q, k, v, g = (_reverse_time(x, cu) for x in (q, k, v, g))
    B, T, H, K = shape_of(q)
    HV, V = shape_of(v)[2], shape_of(v)[3]
    o = empty_like_input(q, (B, T, HV, V))
    if inplace_final_state:  # the kernel reads each (sequence, head) state before writing it back
        h0 = ht = initial_state
    else:
        h0 = _state_in(initial_state, state_v_first, "initial_state")
        ht = empty_f32(q, (N, HV, K, V)) if output_final_state else None
    z0 = _f32(initial_z, "initial_z")
    zt = empty_f32(q, (N, 1, H, K)) if (output_final_state and normalize) else None
    _core.gla_forward(family, path, q, k, v, g, _f32(g_gamma, "g_gamma"), o, None if scale is None else float(scale),
                      h0, ht, cu, int(chunk_size), feature_map, bool(normalize), z0, zt, bool(check_inputs),
                      cuda_stream_of(q))
    if reverse:
        o = _reverse_time(o, cu)
    if inplace_final_state:
        return o, caller_state, zt
    return o, _state_out(ht, state_v_first), zt


# --- linear attention ---------------------------------------------------------------------------------

def _linear_attn(path, q, k, v, scale, initial_state, output_final_state, normalize, cu_seqlens, feature_map,
                 chunk_size, reverse=False):
    if feature_map not in (None, "elu", "relu", "identity"):
        raise ValueError(f"feature_map: expected None, 'elu', 'relu' or 'identity', got {feature_map!r}")
    kv_init, z_init = initial_state, None
    if normalize and isinstance(initial_state, tuple):
        kv_init, z_init = initial_state
    o, ht, zt = _run("linear_attn", path, q, k, v, scale=scale, initial_state=kv_init,
                     output_final_state=output_final_state, cu_seqlens=cu_seqlens, chunk_size=chunk_size,
                     feature_map=feature_map, normalize=normalize, initial_z=z_init, reverse=reverse)
    if normalize:
        return o, ((ht, zt) if output_final_state else None)
    return o, ht


def chunk_linear_attn(q, k, v, scale=None, initial_state=None, output_final_state=False, normalize=True,
                      cu_seqlens=None, feature_map=None, chunk_size=64):
    """Linear attention (Katharopoulos et al.), chunkwise-parallel; fla.ops.linear_attn.chunk_linear_attn.

    o_t = scale * phi(q_t) S_t with S_t = S_{t-1} + phi(k_t)^T v_t (no decay). With normalize (the default, as
    fla's chunk form), o_t /= scale * phi(q_t) . z_t + 1e-10 where z_t = z_{t-1} + phi(k_t).
    q, k: [B, T, H, K]; v: [B, T, HV, V]; feature_map: None / 'identity', 'relu' or 'elu' (elu(x) + 1), applied
    to q and k. initial_state: [N, HV, K, V], or with normalize a tuple (S [N, HV, K, V], z [N, 1, H, K]).
    Returns (o [B, T, HV, V], final_state): final_state is S, or (S, z) with normalize, or None.
    """
    return _linear_attn("chunk", q, k, v, scale, initial_state, output_final_state, normalize, cu_seqlens,
                        feature_map, chunk_size)


def recurrent_linear_attn(q, k, v, scale=None, initial_state=None, output_final_state=False, reverse=False,
                          normalize=False, cu_seqlens=None, feature_map=None):
    """Linear attention, token by token (decode); fla.ops.linear_attn.fused_recurrent_linear_attn.

    Same semantics and shapes as chunk_linear_attn; normalize defaults to False as in fla's recurrent form.
    reverse=True scans every sequence from its last token to its first.
    """
    return _linear_attn("recurrent", q, k, v, scale, initial_state, output_final_state, normalize, cu_seqlens,
                        feature_map, 64, reverse)


fused_recurrent_linear_attn = recurrent_linear_attn


# --- retention ----------------------------------------------------------------------------------------

def chunk_retention(q, k, v, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None,
                    chunk_size=64):
    """RetNet retention, chunkwise; fla.ops.retention.chunk_retention.

    S_t = gamma_h S_{t-1} + k_t^T v_t, o_t = scale * q_t S_t with gamma_h = 1 - 2 ** (-5 - h) for value head h.
    q, k: [B, T, H, K]; v: [B, T, HV, V]; state [N, HV, K, V] float32. Returns (o, final_state or None).
    """
    o, ht, _ = _run("retention", "chunk", q, k, v, scale=scale, initial_state=initial_state,
                    output_final_state=output_final_state, cu_seqlens=cu_seqlens, chunk_size=chunk_size)
    return o, ht


def recurrent_retention(q, k, v, scale=None, initial_state=None, output_final_state=False, reverse=False,
                        state_v_first=False, cu_seqlens=None):
    """RetNet retention, token by token; fla.ops.retention.fused_recurrent_retention. Shapes as chunk_retention;
    state_v_first=True takes and returns states as [N, HV, V, K]."""
    o, ht, _ = _run("retention", "recurrent", q, k, v, scale=scale, initial_state=initial_state,
                    output_final_state=output_final_state, cu_seqlens=cu_seqlens, reverse=reverse,
                    state_v_first=state_v_first)
    return o, ht


fused_recurrent_retention = recurrent_retention


def parallel_retention(q, k, v, scale=None, output_attentions=False, cu_seqlens=None):
    """RetNet retention in its parallel (quadratic) form: O = (Q K^T * D) V, D[i, j] = gamma ** (i - j) for
    j <= i. fla.ops.retention.parallel_retention; returns (o, None). No state in or out."""
    if output_attentions:
        raise ValueError("output_attentions: returning the [B, H, T, T] retention matrix is not supported")
    o, _, _ = _run("retention", "parallel", q, k, v, scale=scale, cu_seqlens=cu_seqlens)
    return o, None


# --- simple GLA ---------------------------------------------------------------------------------------

def chunk_simple_gla(q, k, v, g=None, g_gamma=None, scale=None, initial_state=None, output_final_state=False,
                     state_v_first=False, cu_seqlens=None, chunk_size=64):
    """Simple GLA, chunkwise; fla.ops.simple_gla.chunk_simple_gla.

    S_t = exp(g_t + g_gamma) S_{t-1} + k_t^T v_t, o_t = scale * q_t S_t. g: [B, T, HV] data-dependent log decay
    (optional); g_gamma: [HV] constant log decay (optional). q, k: [B, T, H, K]; v: [B, T, HV, V].
    state_v_first=True takes and returns states as [N, HV, V, K]. Returns (o, final_state or None).
    """
    o, ht, _ = _run("simple_gla", "chunk", q, k, v, g=g, g_gamma=g_gamma, scale=scale, initial_state=initial_state,
                    output_final_state=output_final_state, cu_seqlens=cu_seqlens, chunk_size=chunk_size,
                    state_v_first=state_v_first)
    return o, ht


def recurrent_simple_gla(q, k, v, g=None, g_gamma=None, scale=None, initial_state=None, output_final_state=False,
                         reverse=False, state_v_first=False, cu_seqlens=None, inplace_final_state=False,
                         check_inputs=True):
    """Simple GLA, token by token; fla.ops.simple_gla.fused_recurrent_simple_gla. Shapes as chunk_simple_gla.

    For decode loops: inplace_final_state=True updates initial_state ([N, HV, K, V] float32, contiguous) in
    place and returns it as the final state (no new state allocation; ValueError / TypeError if it would need a
    copy); check_inputs=False skips the NaN / Inf scans of q, k, v, g (shapes and dtypes are still checked).
    """
    o, ht, _ = _run("simple_gla", "recurrent", q, k, v, g=g, g_gamma=g_gamma, scale=scale,
                    initial_state=initial_state, output_final_state=output_final_state, cu_seqlens=cu_seqlens,
                    reverse=reverse, state_v_first=state_v_first, inplace_final_state=inplace_final_state,
                    check_inputs=check_inputs)
    return o, ht


fused_recurrent_simple_gla = recurrent_simple_gla


# --- GLA ----------------------------------------------------------------------------------------------

def chunk_gla(q, k, v, g, scale=None, initial_state=None, output_final_state=False, state_v_first=False,
              cu_seqlens=None, chunk_size=64):
    """GLA (per-key-channel decay), chunkwise; fla.ops.gla.chunk_gla.

    S_t = diag(exp(g_t)) S_{t-1} + k_t^T v_t, o_t = scale * q_t S_t. g: [B, T, HV, K] log decays (stable down to
    at least -8 per step). q, k: [B, T, H, K]; v: [B, T, HV, V]. Returns (o, final_state or None).
    """
    if g is None:
        raise ValueError("g: chunk_gla needs the per-channel log decay [B, T, HV, K]")
    o, ht, _ = _run("gla", "chunk", q, k, v, g=g, scale=scale, initial_state=initial_state,
                    output_final_state=output_final_state, cu_seqlens=cu_seqlens, chunk_size=chunk_size,
                    state_v_first=state_v_first)
    return o, ht


def recurrent_gla(q, k, v, gk=None, gv=None, scale=None, initial_state=None, output_final_state=False,
                  reverse=False, state_v_first=False, cu_seqlens=None, inplace_final_state=False, check_inputs=True):
    """GLA token by token; fla.ops.gla.fused_recurrent_gla. gk: [B, T, HV, K] (None: no decay). Gating of the
    value dimension (gv) is not supported and raises ValueError. inplace_final_state and check_inputs as in
    recurrent_simple_gla."""
    if gv is not None:
        raise ValueError("gv: value-dimension gates are not supported")
    family = "gla" if gk is not None else "simple_gla"
    o, ht, _ = _run(family, "recurrent", q, k, v, g=gk, scale=scale, initial_state=initial_state,
                    output_final_state=output_final_state, cu_seqlens=cu_seqlens, reverse=reverse,
                    state_v_first=state_v_first, inplace_final_state=inplace_final_state, check_inputs=check_inputs)
    return o, ht


fused_recurrent_gla = recurrent_gla


# --- causal short convolution -------------------------------------------------------------------------

def causal_conv1d(x, weight, bias=None, initial_state=None, output_final_state=False, activation=None,
                  cu_seqlens=None, check_inputs=True):
    """Depthwise causal convolution over time (Mamba / DeltaNet short conv), width W = weight.shape[1].

    y[t, d] = act(bias[d] + sum_w weight[d, w] * x[t - (W - 1) + w, d]), i.e. torch conv1d with groups=D and
    W - 1 zeros of left padding. x: [B, T, D] (or packed [1, total, D] with cu_seqlens); weight: [D, W];
    bias: [D]; activation: None, 'silu' or 'swish'. initial_state: [N, D, S] float32 with S >= W - 1, the last
    S inputs before each sequence, oldest first (causal-conv1d's layout; S = W reads fla's caches).
    Returns (y [B, T, D] in x's dtype, final_state [N, D, S] or None; S = W - 1 without an initial state).
    check_inputs=False skips the NaN / Inf scan of x (it reads x once more; shapes and dtypes are still checked).
    CUDA tensors run on their GPU (the caller's current stream); y and the final state are allocated there.
    """
    x, weight = _float_input(x, "x", cuda=True), _float_input(weight, "weight", cuda=True)
    bias = None if bias is None else _float_input(bias, "bias", cuda=True)
    initial_state = optional_input(initial_state, "initial_state", cuda=True)
    cu = as_i32_vector(cu_seqlens, "cu_seqlens")
    dims = check_layouts([("x", x, "B T D"), ("weight", weight, "D W"), ("bias", bias, "D")])
    N = num_seqs(dims["B"], cu)
    check_layouts([("initial_state", initial_state, "N D S")], {**dims, "N": N})
    x, weight, bias = _ready(x, "x", check_inputs), _ready(weight, "weight"), _ready(bias, "bias")
    h0 = _f32(initial_state, "initial_state")
    ht = None
    if output_final_state:
        S = shape_of(h0)[-1] if h0 is not None else max(shape_of(weight)[1] - 1, 0)
        ht = empty_f32(x, (N, shape_of(x)[2], S))
    y = empty_like_input(x, shape_of(x))
    _core.causal_conv1d(x, weight, bias, y, h0, ht, activation, cu, stream=cuda_stream_of(x))
    return y, ht


def causal_conv1d_update(x, conv_state, weight, bias=None, activation=None):
    """One decode step: x [N, D] (or [N, L, D] for L tokens); conv_state [N, D, S] float32 (S >= W - 1) is
    advanced in place and must be contiguous. Returns y with x's shape and dtype (causal-conv1d's API).
    CUDA tensors run on their GPU (the caller's current stream); y is allocated there."""
    x, weight = _float_input(x, "x", cuda=True), _float_input(weight, "weight", cuda=True)
    bias = None if bias is None else _float_input(bias, "bias", cuda=True)
    conv_state = as_output(conv_state, "conv_state", cuda=True)
    check_layouts([("conv_state", conv_state, "N D S"), ("x", x, "N D | N L D"), ("weight", weight, "D W"),
                   ("bias", bias, "D")])
    x, weight, bias = _ready(x, "x"), _ready(weight, "weight"), _ready(bias, "bias")
    y = empty_like_input(x, shape_of(x))
    _core.causal_conv1d_update(x, conv_state, weight, bias, y, activation, cuda_stream_of(x))
    return y
