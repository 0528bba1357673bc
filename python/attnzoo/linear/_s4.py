"""S4D and DSS: diagonal state-space layers with a fixed complex state matrix (state-spaces' SSMKernelDiag), in
its two computations: the convolution kernel (Vandermonde product, then an FFT convolution over whole sequences)
and the recurrence (decode).

Per channel h and mode n, with dtA = dt A:
    h_t[n] = dA h_{t-1}[n] + dB u_t[h],     y_t[h] = 2 Re(sum_n C[h, n] h_t[n]) + D[h] u_t[h]
i.e. y = K * u + D u with K[h, l] = 2 Re(sum_n C dB dA^l). discretization:
    "zoh"       dA = exp(dtA),                  dB = B (exp(dtA) - 1) / A
    "bilinear"  dA = (1 + dtA/2) / (1 - dtA/2), dB = B dt / (1 - dtA/2)
    "dss"       DSS's softmax form: dA = exp(dtA), dB = B (exp(dtA) - 1) / (A (exp(dtA L) - 1)) / 2 with
                L = dss_length (state-spaces' disc="dss": the kernel normalized over L, output Re(...) without the
                factor 2, its reciprocal regularized by 1e-7 as there). DSS's "exp" variant is "zoh" / 2.
Layouts: u [B, T, H] (float32 / bfloat16 / float16, numpy or torch); dt [H] (> 0, state-spaces' exp(log_dt));
A, B, C [H, N] complex (or [H, N, 2] float (real, imaginary) pairs), Re(A) < 0; D [H]. N counts complex modes,
state-spaces' d_state / 2. States [N_seq, H, N, 2] float32: each complex state as a (real, imaginary) pair
(torch.view_as_complex reads it as [N_seq, H, N] complex64). cu_seqlens: int32 [N_seq + 1] packed offsets (B = 1).
"""
import numpy as np

from .. import _core
from .._arrays import _is_torch, as_i32_vector, as_input, as_output, empty_like_input, shape_of
from ._common import check_layouts, contiguous, empty_f32, float32_state, num_seqs, scan

__all__ = ["s4d_conv", "s4d_recurrent", "s4d_reference", "s4d_step", "s4d_kernel"]

_LAYOUTS = {"u": "batch seqlen H", "dt": "H", "A": "H N 2", "B": "H N 2", "C": "H N 2", "D": "H",
            "initial_state": "seqs H N 2"}
_STEP = {"state": "batch H N 2", "u": "batch H", "dt": "H", "A": "H N 2", "B": "H N 2", "C": "H N 2", "D": "H"}


def _pairs(x):
    """A complex array as float32 (real, imaginary) pairs in a trailing dimension; real arrays pass through."""
    if x is None:
        return None
    if _is_torch(x):
        import torch
        if x.is_complex():
            return torch.view_as_real(x.to(torch.complex64).resolve_conj())  # as_input warns on requires_grad
        return x
    a = np.asarray(x)
    if np.iscomplexobj(a):
        return np.ascontiguousarray(a, dtype=np.complex64).view(np.float32).reshape(a.shape + (2,))
    return x


def _params(dt, A, B, C, D):
    pairs = [(dt, "dt"), (_pairs(A), "A"), (_pairs(B), "B"), (_pairs(C), "C"), (D, "D")]
    return [None if x is None else as_input(x, n) for x, n in pairs]


def _dss_length(discretization, dss_length, default):
    if discretization != "dss":
        return 0
    if dss_length is None:
        if default is None:
            raise ValueError("dss_length: the dss discretization needs the length its kernel is normalized over "
                             "(it defaults to T only for unpacked sequences)")
        return int(default)
    return int(dss_length)


def _s4d(form, u, dt, A, B, C, D, discretization, dss_length, initial_state, output_final_state, cu_seqlens,
         check_inputs):
    cu = as_i32_vector(cu_seqlens, "cu_seqlens")
    u = as_input(u, "u")
    dt, A, B, C, D = _params(dt, A, B, C, D)
    held = None if initial_state is None else as_input(_pairs(initial_state), "initial_state")
    dims = check_layouts([(n, x, _LAYOUTS[n]) for x, n in ((u, "u"), (dt, "dt"), (A, "A"), (B, "B"), (C, "C"),
                                                          (D, "D"))])
    if held is not None:
        check_layouts([("initial_state", held, _LAYOUTS["initial_state"])],
                      {**dims, "seqs": num_seqs(dims["batch"], cu)})
    u, dt, A, B, C, D = (scan(contiguous(x), n, check_inputs)
                         for x, n in ((u, "u"), (dt, "dt"), (A, "A"), (B, "B"), (C, "C"), (D, "D")))
    held = scan(float32_state(held, "initial_state"), "initial_state", check_inputs)
    Bsz, T, H = shape_of(u)
    out = empty_like_input(u, (Bsz, T, H))
    final = empty_f32(u, (num_seqs(Bsz, cu), H, shape_of(A)[1], 2)) if output_final_state else None
    length = _dss_length(discretization, dss_length, T if cu is None else None)
    _core.s4d(form, u, dt, A, B, C, D, str(discretization), length, held, out, final, cu)
    return out, final


def s4d_conv(u, dt, A, B, C, D=None, discretization="zoh", dss_length=None, initial_state=None,
             output_final_state=False, cu_seqlens=None, check_inputs=True):
    """S4D / DSS over whole sequences, as a convolution: the kernel K by the Vandermonde product, then y = K * u by
    FFT (sequences of more than 128 tokens) or directly, plus D u. initial_state's contribution and the final state
    are Vandermonde products too. dss_length defaults to T (unpacked input only).
    Returns (y [B, T, H] in u's dtype, final_state [N_seq, H, N, 2] float32 or None)."""
    return _s4d("conv", u, dt, A, B, C, D, discretization, dss_length, initial_state, output_final_state,
                cu_seqlens, check_inputs)


def s4d_recurrent(u, dt, A, B, C, D=None, discretization="zoh", dss_length=None, initial_state=None,
                  output_final_state=False, cu_seqlens=None, check_inputs=True):
    """The same layer token by token (the state carried in float64 inside the call); same arguments and results as
    s4d_conv."""
    return _s4d("recurrent", u, dt, A, B, C, D, discretization, dss_length, initial_state, output_final_state,
                cu_seqlens, check_inputs)


def s4d_reference(u, dt, A, B, C, D=None, discretization="zoh", dss_length=None, initial_state=None,
                  output_final_state=False, cu_seqlens=None):
    """The plain recurrence in double precision (slow); same arguments and results as s4d_conv."""
    return _s4d("reference", u, dt, A, B, C, D, discretization, dss_length, initial_state, output_final_state,
                cu_seqlens, True)


def s4d_step(state, u, dt, A, B, C, D=None, discretization="zoh", dss_length=None, check_inputs=True):
    """One decode step for a batch, updating `state` [Bn, H, N, 2] float32 (contiguous) in place; u [Bn, H].
    dss needs dss_length (the length the layer's kernel is normalized over). Returns y [Bn, H] in u's dtype."""
    state = as_output(state, "state")
    u = as_input(u, "u")
    dt, A, B, C, D = _params(dt, A, B, C, D)
    check_layouts([(n, x, _STEP[n]) for x, n in ((state, "state"), (u, "u"), (dt, "dt"), (A, "A"), (B, "B"),
                                                 (C, "C"), (D, "D"))])
    u, dt, A, B, C, D = (scan(contiguous(x), n, check_inputs)
                         for x, n in ((u, "u"), (dt, "dt"), (A, "A"), (B, "B"), (C, "C"), (D, "D")))
    y = empty_like_input(u, shape_of(u))
    _core.s4d_step(False, state, u, dt, A, B, C, D, str(discretization), _dss_length(discretization, dss_length, None),
                   y)
    return y


def s4d_kernel(dt, A, B, C, length, discretization="zoh", dss_length=None, reference=False):
    """The convolution kernel K [H, length] float32 (numpy, or torch when dt is a torch tensor):
    K[h, l] = 2 Re(sum_n C dB dA^l). reference=True evaluates the definition in double precision.
    dss_length defaults to `length`."""
    if int(length) < 0:
        raise ValueError(f"length: must be >= 0, got {length}")
    dt, A, B, C, _ = _params(dt, A, B, C, None)
    check_layouts([(n, x, _LAYOUTS[n]) for x, n in ((dt, "dt"), (A, "A"), (B, "B"), (C, "C"))])
    dt, A, B, C = (scan(contiguous(x), n) for x, n in ((dt, "dt"), (A, "A"), (B, "B"), (C, "C")))
    K = empty_f32(dt, (shape_of(dt)[0], int(length)))
    _core.s4d_kernel(bool(reference), dt, A, B, C, str(discretization),
                     _dss_length(discretization, dss_length, int(length)), K)
    return K
