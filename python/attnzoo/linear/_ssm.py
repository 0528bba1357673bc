"""State-space members of the linear family: Mamba-2 (SSD), Mamba (S6 selective scan), RWKV-7, RWKV-4.

Mamba and Mamba-2 keep mamba_ssm's layouts and argument names; RWKV-7 mirrors flash-linear-attention's
chunk_rwkv7 / fused_recurrent_rwkv7. Inputs may be float32, bfloat16 or float16 (numpy or torch; CPU);
accumulation and states are float32; outputs come back in the caller's framework with the main input's dtype.
Mamba's selective scan, Mamba-2's and RWKV-7's recurrent and chunked forms, and both decode steps, also take CUDA
torch tensors: they run on the tensors' GPU, on the caller's current stream, with outputs there; the references
refuse them by name.
"""
import math

import numpy as np

from .. import _core
from .._arrays import _is_torch, as_i32_vector, as_input, as_output, cuda_stream_of, empty_like_input, shape_of
from ._common import check_layouts, contiguous, empty_f32, float32_state, in_place_state, num_seqs, scan

__all__ = [
    "mamba2_chunk_scan", "mamba2_recurrent", "mamba2_reference", "mamba2_state_update",
    "selective_scan_fn", "selective_scan", "selective_scan_reference", "selective_state_update",
    "rwkv4_wkv", "recurrent_rwkv4", "fused_recurrent_rwkv4", "rwkv4_reference",
    "recurrent_rwkv7", "fused_recurrent_rwkv7", "rwkv7_reference", "chunk_rwkv7", "chunk_dplr_delta_rule",
]


def _prepared(pairs, layouts, check, required=(), in_place=(), states=(), seqs=None, cuda=False):
    """Every input of one call, in the wrappers' one order: taken as they are (TypeError naming a required one that
    is None), layouts checked (no copy yet), then made contiguous and scanned for NaN / Inf when `check`.

    pairs: (array, name) in the order the caller wants them back; layouts: name -> layout (check_layouts).
    in_place: (array, name) pairs already taken as outputs, checked for layout only (never copied).
    states: (array, name) pairs converted to float32; their layouts may use "seqs", the number of sequences,
    which seqs(bound sizes) gives. cuda: CUDA tensors pass (the entry runs them or refuses them by name).
    Returns the inputs, then the states, in the order given."""
    arrays = [(None if x is None and n not in required else as_input(x, n, cuda), n) for x, n in pairs]
    held = [(None if x is None else as_input(x, n, cuda), n) for x, n in states]
    dims = check_layouts([(n, x, layouts[n]) for x, n in list(in_place) + arrays])
    if held:
        check_layouts([(n, x, layouts[n]) for x, n in held], {**dims, "seqs": seqs(dims)})
    return ([scan(contiguous(x), n, check) for x, n in arrays] +
            [scan(float32_state(x, n), n, check) for x, n in held])


# Layouts as mamba_ssm names their dimensions; "seqs" is the number of sequences (batch, or len(cu_seqlens) - 1).
_MAMBA2 = {"x": "batch seqlen nheads headdim", "dt": "batch seqlen nheads", "A": "nheads",
           "B": "batch seqlen ngroups dstate", "C": "batch seqlen ngroups dstate", "D": "nheads | nheads headdim",
           "z": "batch seqlen nheads headdim", "dt_bias": "nheads", "initial_state": "seqs nheads headdim dstate"}
_MAMBA2_STEP = {"state": "batch nheads headdim dstate", "x": "batch nheads headdim", "dt": "batch nheads",
                "A": "nheads", "B": "batch ngroups dstate", "C": "batch ngroups dstate", "D": "nheads | nheads headdim",
                "z": "batch nheads headdim", "dt_bias": "nheads"}
_MAMBA = {"u": "batch dim seqlen", "delta": "batch dim seqlen", "A": "dim dstate",
          "B": "batch dstate seqlen | batch ngroups dstate seqlen", "C": "batch dstate seqlen | batch ngroups dstate seqlen",
          "D": "dim", "z": "batch dim seqlen", "delta_bias": "dim", "initial_state": "seqs dim dstate"}
_MAMBA_STEP = {"state": "batch dim dstate", "x": "batch dim", "dt": "batch dim", "A": "dim dstate",
               "B": "batch dstate | batch ngroups dstate", "C": "batch dstate | batch ngroups dstate", "D": "dim",
               "z": "batch dim", "dt_bias": "dim"}
_RWKV4 = {"w": "C", "u": "C", "k": "batch seqlen C", "v": "batch seqlen C", "state": "seqs 3 C"}
_RWKV7 = {n: "batch seqlen H K" for n in ("r", "w", "k", "a", "b")} | {"v": "batch seqlen H V",
                                                                      "initial_state": "seqs H K V"}


def _seqs(cu):
    return lambda dims: num_seqs(dims["batch"], cu)


def _stack(parts):
    if _is_torch(parts[0]):
        import torch
        return torch.stack(parts, 1)
    return np.stack(parts, 1)


def _dt_limit(dt_limit):
    if dt_limit is None:
        return None
    lo, hi = dt_limit
    lo, hi = float(lo), float(hi)
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise ValueError(f"dt_limit: needs (min, max) with min <= max, got {dt_limit}")
    return (lo, hi)


def _mamba2(mode, x, dt, A, B, C, D, z, dt_bias, dt_softplus, dt_limit, initial_state, output_final_state,
            cu_seqlens, chunk_size, check_inputs):
    cu = as_i32_vector(cu_seqlens, "cu_seqlens")
    x, dt, A, B, C, D, z, dt_bias, initial_state = _prepared(
        ((x, "x"), (dt, "dt"), (A, "A"), (B, "B"), (C, "C"), (D, "D"), (z, "z"), (dt_bias, "dt_bias")), _MAMBA2,
        check_inputs, required=("x", "dt", "A", "B", "C"), states=((initial_state, "initial_state"),), seqs=_seqs(cu),
        cuda=True)
    y = empty_like_input(x, shape_of(x))
    final = None
    if output_final_state:
        b, _, h, p = shape_of(x)
        final = empty_f32(x, (num_seqs(b, cu), h, p, shape_of(B)[3]))
    _core.mamba2_scan(mode, x, dt, A, B, C, D, z, dt_bias, bool(dt_softplus), _dt_limit(dt_limit), initial_state, y,
                      final, cu, int(chunk_size), cuda_stream_of(x))
    return y, final


def mamba2_chunk_scan(x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False, dt_limit=None,
                      initial_state=None, output_final_state=False, cu_seqlens=None, chunk_size=64,
                      check_inputs=True):
    """Mamba-2 (SSD) prefill, chunked: dense tile products inside chunks, the state carried between chunks.

    x: [B, T, H, P]; dt: [B, T, H]; A: [H] (negative, one scalar per head); B, C: [B, T, G, N] with G dividing H
    (head h uses group h // (H // G)); D: [H] or [H, P] skip weight; z: [B, T, H, P] gate; dt_bias: [H].
    With dt' = clamp(softplus?(dt + dt_bias), *dt_limit):
        h_t = exp(A dt'_t) h_{t-1} + dt'_t x_t B_t^T   (h: [P, N] per head),   y_t = h_t C_t + D x_t
    and y_t *= silu(z_t) when z is given. This is mamba_ssm's mamba_chunk_scan_combined without the gated
    RMSNorm that Mamba-2 blocks apply afterwards (pass z=None and normalize outside to reproduce those blocks).
    dt_limit: (min, max) clamp applied after softplus, or None for no clamp.
    initial_state: [N_seq, H, P, N] (mamba_ssm's layout), converted to float32. cu_seqlens: int32 [N_seq + 1]
    offsets of packed sequences (then B must be 1). chunk_size: 16, 32, 64 or 128.
    CUDA tensors run on their GPU on tensor cores (bf16 products, f32 state; chunk_size 16, 32 or 64 there; a state
    size N or head dim P over 128 runs the recurrent kernel instead).
    Returns (y [B, T, H, P] in x's dtype, final_state [N_seq, H, P, N] float32 or None).
    check_inputs: refuse NaN / Inf in the inputs (one pass over each).
    """
    return _mamba2("chunk", x, dt, A, B, C, D, z, dt_bias, dt_softplus, dt_limit, initial_state, output_final_state,
                   cu_seqlens, chunk_size, check_inputs)


def mamba2_recurrent(x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False, dt_limit=None,
                     initial_state=None, output_final_state=False, cu_seqlens=None, check_inputs=True):
    """Mamba-2 token by token (O(1) state per step); same arguments and results as mamba2_chunk_scan."""
    return _mamba2("recurrent", x, dt, A, B, C, D, z, dt_bias, dt_softplus, dt_limit, initial_state,
                   output_final_state, cu_seqlens, 64, check_inputs)


def mamba2_reference(x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False, dt_limit=None,
                     initial_state=None, output_final_state=False, cu_seqlens=None):
    """The plain recurrence in double precision (slow); same arguments and results as mamba2_chunk_scan."""
    return _mamba2("reference", x, dt, A, B, C, D, z, dt_bias, dt_softplus, dt_limit, initial_state,
                   output_final_state, cu_seqlens, 64, True)


def mamba2_state_update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False, dt_limit=None,
                        check_inputs=True):
    """One Mamba-2 decode step for a batch, updating `state` in place (mamba_ssm's selective_state_update).

    state: [Bn, H, P, N] float32, contiguous (written in place); x, z: [Bn, H, P]; dt: [Bn, H]; A: [H];
    B, C: [Bn, G, N]; D: [H] or [H, P]; dt_bias: [H]. Returns y [Bn, H, P] in x's dtype.
    CUDA tensors run on their GPU (the caller's current stream); y is allocated there.
    """
    state = as_output(state, "state", cuda=True)
    x, dt, A, B, C, D, z, dt_bias = _prepared(
        ((x, "x"), (dt, "dt"), (A, "A"), (B, "B"), (C, "C"), (D, "D"), (z, "z"), (dt_bias, "dt_bias")),
        _MAMBA2_STEP, check_inputs, required=("x", "dt", "A", "B", "C"), in_place=((state, "state"),), cuda=True)
    y = empty_like_input(x, shape_of(x))
    _core.mamba2_state_update(False, state, x, dt, A, B, C, D, z, dt_bias, bool(dt_softplus), _dt_limit(dt_limit), y,
                              cuda_stream_of(x))
    return y


def _selective_scan(reference, u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state,
                    initial_state, cu_seqlens, check_inputs):
    cu = as_i32_vector(cu_seqlens, "cu_seqlens")
    u, delta, A, B, C, D, z, delta_bias, initial_state = _prepared(
        ((u, "u"), (delta, "delta"), (A, "A"), (B, "B"), (C, "C"), (D, "D"), (z, "z"), (delta_bias, "delta_bias")),
        _MAMBA, check_inputs, required=("u", "delta", "A", "B", "C"), states=((initial_state, "initial_state"),),
        seqs=_seqs(cu), cuda=True)
    out = empty_like_input(u, shape_of(u))
    last = None
    if return_last_state:
        last = empty_f32(u, (num_seqs(shape_of(u)[0], cu), shape_of(u)[1], shape_of(A)[1]))
    _core.selective_scan(reference, u, delta, A, B, C, D, z, delta_bias, bool(delta_softplus), initial_state, out,
                         last, cu, cuda_stream_of(u))
    return (out, last) if return_last_state else out


def selective_scan_fn(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                      return_last_state=False, initial_state=None, cu_seqlens=None, check_inputs=True):
    """Mamba's selective scan (S6), as mamba_ssm.ops.selective_scan_interface.selective_scan_fn.

    u, delta, z: [B, D, L] (channel-major, mamba_ssm's layout); A: [D, N] (real); B, C: [B, N, L] or
    [B, G, N, L] with G dividing D (channel d uses group d // (D // G)); D, delta_bias: [D].
    With dt = softplus?(delta + delta_bias):
        h_t[d, n] = exp(dt_t[d] A[d, n]) h_{t-1}[d, n] + dt_t[d] B_t[n] u_t[d]
        out_t[d] = sum_n h_t[d, n] C_t[n] + D[d] u_t[d],   out *= silu(z) when z is given.
    Additions to mamba_ssm's API: initial_state [N_seq, D, N] (float32 after conversion) and cu_seqlens
    (int32 [N_seq + 1] offsets along L of packed sequences, batch 1). B and C as a fixed [D, N] matrix
    (mamba_ssm's non-selective case) are not supported.
    Returns out [B, D, L] in u's dtype, or (out, last_state [N_seq, D, N] float32) when return_last_state.
    """
    return _selective_scan(False, u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state,
                           initial_state, cu_seqlens, check_inputs)


def selective_scan_reference(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                             return_last_state=False, initial_state=None, cu_seqlens=None):
    """The plain recurrence in double precision (slow); same arguments and results as selective_scan_fn."""
    return _selective_scan(True, u, delta, A, B, C, D, z, delta_bias, delta_softplus, return_last_state,
                           initial_state, cu_seqlens, True)


def selective_state_update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False,
                           check_inputs=True):
    """One decode step, updating `state` in place (mamba_ssm.ops.triton.selective_state_update).

    Mamba: state [Bn, D, N] float32; x, dt, z: [Bn, D]; A: [D, N]; B, C: [Bn, N] or [Bn, G, N]; D, dt_bias: [D].
    Mamba-2 (state [Bn, H, P, N]): forwards to mamba2_state_update, which takes A, dt_bias, D per head.
    Returns y with x's shape and dtype. CUDA tensors run on their GPU (the caller's current stream).
    """
    state = as_output(state, "state", cuda=True)
    if len(shape_of(state)) == 4:
        return mamba2_state_update(state, x, dt, A, B, C, D=D, z=z, dt_bias=dt_bias, dt_softplus=dt_softplus,
                                   check_inputs=check_inputs)
    x, dt, A, B, C, D, z, dt_bias = _prepared(
        ((x, "x"), (dt, "dt"), (A, "A"), (B, "B"), (C, "C"), (D, "D"), (z, "z"), (dt_bias, "dt_bias")),
        _MAMBA_STEP, check_inputs, required=("x", "dt", "A", "B", "C"), in_place=((state, "state"),), cuda=True)
    y = empty_like_input(x, shape_of(x))
    _core.selective_state_update(False, state, x, dt, A, B, C, D, z, dt_bias, bool(dt_softplus), y,
                                 cuda_stream_of(x))
    return y


def _rwkv4(reference, w, u, k, v, state, output_final_state, cu_seqlens, check_inputs):
    cu = as_i32_vector(cu_seqlens, "cu_seqlens")
    layouts, states = _RWKV4, ((state, "state"),)
    if isinstance(state, (tuple, list)):  # transformers' (num, den, max), each [seqs, C]
        if len(state) != 3:
            raise ValueError(f"state: expected (num, den, max), got {len(state)} tensors")
        layouts, states = {**_RWKV4, "state": "seqs C"}, tuple((x, "state") for x in state)
    # The max slot may hold the -1e38 "nothing seen yet" marker, which is finite: the scan passes it.
    w, u, k, v, *held = _prepared(((w, "w"), (u, "u"), (k, "k"), (v, "v")), layouts, check_inputs,
                                  required=("w", "u", "k", "v"), states=states, seqs=_seqs(cu))
    state = held[0] if len(held) == 1 else _stack(held)
    out = empty_like_input(k, shape_of(k))
    final = empty_f32(k, (num_seqs(shape_of(k)[0], cu), 3, shape_of(k)[2])) if output_final_state else None
    _core.rwkv4(reference, w, u, k, v, state, out, final, cu)
    return out, final


def rwkv4_wkv(w, u, k, v, state=None, output_final_state=False, cu_seqlens=None, check_inputs=True):
    """RWKV-4 WKV (time mixing core), numerically stable running-maximum form.

    w: [C] raw time_decay (the per-step decay is exp(-exp(w))); u: [C] time_first bonus for the current token;
    k, v: [B, T, C]. state: [N_seq, 3, C] float32 holding (num, den, max) per channel, or a (num, den, max)
    tuple of [N_seq, C] tensors (transformers' layout), or None (num = den = 0, max = -1e38).
        out_t = (e^{max-q} num + e^{u+k_t-q} v_t) / (e^{max-q} den + e^{u+k_t-q}),  q = max(max, u + k_t)
    then the state absorbs token t with decay -exp(w). cu_seqlens: int32 [N_seq + 1] packed offsets (B = 1).
    Returns (out [B, T, C] in k's dtype, final state [N_seq, 3, C] float32 or None).
    """
    return _rwkv4(False, w, u, k, v, state, output_final_state, cu_seqlens, check_inputs)


recurrent_rwkv4 = rwkv4_wkv


def rwkv4_reference(w, u, k, v, state=None, output_final_state=False, cu_seqlens=None):
    """The same recurrence in double precision (slow); same arguments and results as rwkv4_wkv."""
    return _rwkv4(True, w, u, k, v, state, output_final_state, cu_seqlens, True)


def fused_recurrent_rwkv4(w, u, k, v, state):
    """flash-linear-attention's signature: state [B, 3, 1, C] (alpha, beta, eps) in, (wkv, state [B, 3, 1, C]) out."""
    state = as_input(state, "state")
    if len(shape_of(state)) != 4 or shape_of(state)[1:3] != (3, 1):
        raise ValueError(f"state: expected [batch, 3, 1, channels], got shape {shape_of(state)}")
    out, final = rwkv4_wkv(w, u, k, v, state=state[:, :, 0], output_final_state=True)
    return out, final[:, :, None]


def _rwkv7(form, r, w, k, v, a, b, scale, initial_state, output_final_state, cu_seqlens, check_inputs,
           chunk_size=64, inplace_final_state=False):
    """form: "reference" (double precision), "recurrent" or "chunk" (with chunk_size). inplace_final_state: the
    caller's initial_state buffer is the final state (never copied; its layout checked against the inputs')."""
    cu = as_i32_vector(cu_seqlens, "cu_seqlens")
    caller_state = initial_state
    state = in_place_state(initial_state, cuda=True) if inplace_final_state else None
    r, w, k, v, a, b, *held = _prepared(
        ((r, "r"), (w, "w"), (k, "k"), (v, "v"), (a, "a"), (b, "b")), _RWKV7, check_inputs,
        required=("r", "w", "k", "v", "a", "b"),
        states=() if inplace_final_state else ((initial_state, "initial_state"),), seqs=_seqs(cu), cuda=True)
    if inplace_final_state:
        dims = check_layouts([(n, x, _RWKV7[n]) for x, n in ((r, "r"), (v, "v"))])
        check_layouts([("initial_state", state, _RWKV7["initial_state"])], {**dims, "seqs": _seqs(cu)(dims)})
        initial_state = scan(state, "initial_state", check_inputs)
    else:
        initial_state = held[0]
    Bsz, _, H, K = shape_of(r)
    if K == 0 or shape_of(v)[3] == 0:
        name, arr = ("r", r) if K == 0 else ("v", v)
        raise ValueError(f"{name}: head dimension {'K' if K == 0 else 'V'} must be >= 1, got {shape_of(arr)}")
    if scale is None:
        scale = K ** -0.5
    o = empty_like_input(r, shape_of(v))
    if inplace_final_state:
        final = initial_state
    else:
        final = empty_f32(r, (num_seqs(Bsz, cu), H, K, shape_of(v)[3])) if output_final_state else None
    _core.rwkv7(form, r, w, k, v, a, b, float(scale), initial_state, o, final, cu, chunk_size, cuda_stream_of(r))
    return o, (caller_state if inplace_final_state else final)


def recurrent_rwkv7(r, w, k, v, a, b, scale=None, initial_state=None, output_final_state=True, cu_seqlens=None,
                    inplace_final_state=False, check_inputs=True):
    """RWKV-7 time mixing core, token by token (fla's fused_recurrent_rwkv7; same arguments and defaults).

    r, w, k, a, b: [B, T, H, K]; v: [B, T, H, V]; w is the log decay (natural log). Per head, state S [K, V]:
        S_t = diag(exp(w_t)) S_{t-1} + b_t (a_t^T S_{t-1}) + k_t v_t^T,     o_t = S_t^T (scale * r_t)
    (RWKV-7 blocks pass a = -kk, b = kk * iclr). scale: default K ** -0.5 as in fla's fused_recurrent_rwkv7
    (fla's chunk_rwkv7 defaults to 1.0: pass scale=1.0 to match RWKV-7 models). initial_state: [N_seq, H, K, V]
    (converted to float32). cu_seqlens: int32 [N_seq + 1] packed offsets (B = 1).
    Returns (o [B, T, H, V] in r's dtype, final_state [N_seq, H, K, V] float32 or None).
    For prefill, chunk_rwkv7 gives the same results with dense chunk products. CUDA torch tensors run on their GPU
    (prefill and decode: T = 1, with the state passed as initial_state), on the current stream.
    inplace_final_state=True: initial_state (float32, contiguous, required) is updated in place and returned as
    the final state, so a decode step reads and writes the state once (fla's decode ops offer the same).
    """
    return _rwkv7("recurrent", r, w, k, v, a, b, scale, initial_state, output_final_state, cu_seqlens, check_inputs,
                  inplace_final_state=inplace_final_state)


fused_recurrent_rwkv7 = recurrent_rwkv7


def _chunk_size_arg(chunk_size):
    if chunk_size is None:  # fla picks by gate bounds; ours is stable at any decay, so one default
        return 64
    valid = isinstance(chunk_size, (int, np.integer)) and not isinstance(chunk_size, bool)
    if not valid or chunk_size not in (16, 32, 64, 128):
        raise ValueError(f"chunk_size: must be 16, 32, 64 or 128, got {chunk_size!r}")
    return int(chunk_size)


def chunk_rwkv7(r, w, k, v, a, b, scale=1.0, initial_state=None, output_final_state=False, cu_seqlens=None,
                chunk_size=64, check_inputs=True):
    """RWKV-7 time mixing core, chunkwise parallel (prefill); fla's chunk_rwkv7 argument names, order and defaults
    (scale=1.0 and output_final_state=False there, unlike fused_recurrent_rwkv7). fla's GPU-only arguments
    cu_seqlens_cpu, safe_gate, disable_recompute, cp_context and lower_bound are not taken, so chunk_size follows
    cu_seqlens directly (pass it by keyword to stay portable between the two).

    r, w, k, a, b: [B, T, H, K]; v: [B, T, H, V]; w is the log decay (natural log, <= 0 in RWKV-7 models).
    Per head, state S [K, V]:
        S_t = diag(exp(w_t)) S_{t-1} + b_t (a_t^T S_{t-1}) + k_t v_t^T,     o_t = S_t^T (scale * r_t)
    (RWKV-7 blocks pass a = -kk, b = kk * iclr). Chunks of chunk_size tokens (16, 32, 64 or 128; None means 64)
    are done as dense products (fla's chunk_dplr_delta_rule algorithm); results match recurrent_rwkv7 to float32
    rounding at every decay strength. initial_state: [N_seq, H, K, V] (converted to float32). cu_seqlens: int32
    [N_seq + 1] packed offsets (B = 1). check_inputs=False skips the finiteness scan of the inputs.
    Returns (o [B, T, H, V] in r's dtype, final_state [N_seq, H, K, V] float32 or None).
    CUDA tensors run on their GPU on tensor cores (bf16 products, f32 state, a relative error of a few 1e-3;
    K, V <= 128 and chunk_size 16, 32 or 64 there), on the current stream.
    """
    chunk_size = _chunk_size_arg(chunk_size)
    return _rwkv7("chunk", r, w, k, v, a, b, scale, initial_state, output_final_state, cu_seqlens, check_inputs,
                  chunk_size)


def chunk_dplr_delta_rule(q, k, v, a, b, gk, scale=None, initial_state=None, output_final_state=False,
                          cu_seqlens=None, chunk_size=64, check_inputs=True):
    """fla's generalized (DPLR) delta rule, chunked: chunk_rwkv7 with fla's chunk_dplr_delta_rule argument order
    (q = r, gk = w) and default scale K ** -0.5. Shapes and results as chunk_rwkv7."""
    return chunk_rwkv7(q, gk, k, v, a, b, scale=scale, initial_state=initial_state,
                       output_final_state=output_final_state, cu_seqlens=cu_seqlens, chunk_size=chunk_size,
                       check_inputs=check_inputs)


def rwkv7_reference(r, w, k, v, a, b, scale=None, initial_state=None, output_final_state=True, cu_seqlens=None):
    """The same recurrence in double precision (slow); same arguments and results as recurrent_rwkv7."""
    return _rwkv7("reference", r, w, k, v, a, b, scale, initial_state, output_final_state, cu_seqlens, True)


# The (and mamba_ssm's ops module's) short name for the same function.
selective_scan = selective_scan_fn
