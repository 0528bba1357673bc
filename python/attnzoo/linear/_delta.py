"""The delta-rule family: DeltaNet, Gated DeltaNet and Kimi Delta Attention (KDA), in fla's API.

All three are one recurrence over a [K, V] state per (sequence, value head):

    S_t = D_t S_{t-1} + beta_t k_t (v_t - (D_t S_{t-1})^T k_t)^T,        o_t = S_t^T (scale * q_t)

with D_t = I (delta rule), exp(g_t) I (gated delta rule, g [B, T, HV]) or diag(exp(g_t)) (KDA, g [B, T, HV, K]).

Shapes (fla's layout): q, k [B, T, H, K]; v [B, T, HV, V] with HV a multiple of H (grouped value heads: value
head hv reads q/k head hv // (HV // H)); beta [B, T, HV]; g log decays (natural log, finite, <= 0). With
`cu_seqlens` (int [N + 1] token offsets) the batch is N packed sequences and B must be 1. States are
[N, HV, K, V] float32 (N = B without cu_seqlens).

dtypes: q, k, v, g, beta float32, bfloat16 or float16 (computed in float32); o has q's dtype.
Arrays: numpy in -> numpy out, torch in -> torch out on the same device. CUDA torch tensors run the recurrent_*
forms and the chunk_* forms on the GPU (on the caller's current stream; cu_seqlens is read on the host, a CUDA
one is copied there; the chunked CUDA form takes K, V <= 128 and chunk_size 16, 32 or 64, and rounds the operands
of its products to bfloat16); *_reference refuse them by name.
Errors: ValueError naming the argument for bad shapes, head counts, non-finite inputs, positive gates or an
unsupported chunk size; TypeError for unsupported dtypes.

Every function returns (o, final_state), final_state None unless output_final_state.
chunk_*: the chunked (WY / UT) form for prefill, chunk_size 16, 32, 64 or 128.
recurrent_* (alias fused_recurrent_*): one token at a time, for decode. Two keywords make a decode step cost one
read and one write of the state (as vLLM's fla decode ops do):
    inplace_final_state=True   initial_state (float32, contiguous, required) is updated in place and returned
                               as the final state: no [N, HV, K, V] allocation, no separate write target.
                               (fla's fused_recurrent_kda_fwd has the same argument.)
    check_inputs=False         skip the NaN / Inf / gate-sign scans of the inputs and of initial_state (an
                               O(state) read per call); shapes and dtypes are still checked.
*_reference: the plain recurrence in double precision (slow; for tests).
"""
from .. import _core
from .._arrays import as_i32_vector, as_input, cuda_stream_of, empty_like_input, shape_of
from ._common import check_layouts, contiguous, empty_f32, float32_state, in_place_state, num_seqs, optional_input

__all__ = [
    "chunk_delta_rule", "recurrent_delta_rule", "fused_recurrent_delta_rule", "delta_rule_reference",
    "chunk_gated_delta_rule", "recurrent_gated_delta_rule", "fused_recurrent_gated_delta_rule",
    "gated_delta_rule_reference",
    "chunk_kda", "recurrent_kda", "fused_recurrent_kda", "kda_reference",
]


def _run(entry, q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel, cu_seqlens,
         chunk_size, inplace_final_state=False, check_inputs=True):
    """Layouts first (no copy yet), then contiguous copies; values (NaN / Inf, positive gates) are scanned by the
    kernel entry after its own checks, in one fast pass cheaper than a framework-side isfinite()."""
    # CUDA tensors pass through: the recurrent entries run them there, the others refuse them by name.
    q, k, v = as_input(q, "q", cuda=True), as_input(k, "k", cuda=True), as_input(v, "v", cuda=True)  # required
    g, beta = optional_input(g, "g", cuda=True), optional_input(beta, "beta", cuda=True)
    caller_state = initial_state
    if inplace_final_state:
        initial_state = in_place_state(initial_state, cuda=True)
    else:
        initial_state = optional_input(initial_state, "initial_state", cuda=True)
    cu_seqlens = as_i32_vector(cu_seqlens, "cu_seqlens")
    if cu_seqlens is not None and len(shape_of(cu_seqlens)) != 1:
        raise ValueError(f"cu_seqlens: must be 1-D, got shape {shape_of(cu_seqlens)}")
    dims = check_layouts([("q", q, "B T H K"), ("k", k, "B T H K"), ("v", v, "B T HV V"), ("beta", beta, "B T HV"),
                          ("g", g, "B T HV | B T HV K")])
    N = num_seqs(dims["B"], cu_seqlens)
    check_layouts([("initial_state", initial_state, "N HV K V")], {**dims, "N": N})
    q, k, v, g, beta = (contiguous(x) for x in (q, k, v, g, beta))
    if not inplace_final_state:
        initial_state = float32_state(initial_state, "initial_state")
    B, T, H, K = shape_of(q)
    HV, V = shape_of(v)[2:]
    o = empty_like_input(q, (B, T, HV, V))
    if inplace_final_state:
        final_state = initial_state
    else:
        final_state = empty_f32(q, (N, HV, K, V)) if output_final_state else None
    entry(q, k, v, g, beta, o, initial_state, final_state, None if scale is None else float(scale), cu_seqlens,
          bool(use_qk_l2norm_in_kernel), int(chunk_size), bool(check_inputs), cuda_stream_of(q))
    return o, (caller_state if inplace_final_state else final_state)


# --- DeltaNet -------------------------------------------------------------------------------------------------

def chunk_delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False,
                     use_qk_l2norm_in_kernel=False, cu_seqlens=None, chunk_size=64):
    """DeltaNet, chunked (prefill): S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T, o_t = S_t^T (scale q_t).

    q, k: [B, T, H, K]; v: [B, T, HV, V]; beta: [B, T, HV] (None means 1). scale: default K ** -0.5.
    initial_state: [N, HV, K, V] or None. use_qk_l2norm_in_kernel: q, k <- x / sqrt(|x|^2 + 1e-6) first.
    cu_seqlens: int [N + 1] offsets of packed sequences (B == 1). chunk_size: 16, 32, 64 or 128.
    Returns (o [B, T, HV, V] in q's dtype, final_state [N, HV, K, V] float32 or None).
    """
    return _run(_core.chunk_delta_rule, q, k, v, None, beta, scale, initial_state, output_final_state,
                use_qk_l2norm_in_kernel, cu_seqlens, chunk_size)


def recurrent_delta_rule(q, k, v, beta=None, scale=None, initial_state=None, output_final_state=False,
                         use_qk_l2norm_in_kernel=False, cu_seqlens=None, inplace_final_state=False,
                         check_inputs=True):
    """DeltaNet, one token at a time (decode). Same arguments and results as chunk_delta_rule (no chunk_size),
    plus inplace_final_state (update initial_state in place and return it as the final state) and check_inputs
    (False skips the value scans); see the module docstring."""
    return _run(_core.recurrent_delta_rule, q, k, v, None, beta, scale, initial_state, output_final_state,
                use_qk_l2norm_in_kernel, cu_seqlens, 64, inplace_final_state, check_inputs)


fused_recurrent_delta_rule = recurrent_delta_rule


def delta_rule_reference(q, k, v, beta=None, scale=None, initial_state=None, output_final_state=False,
                         use_qk_l2norm_in_kernel=False, cu_seqlens=None):
    """DeltaNet as the plain recurrence in double precision (slow). Arguments as recurrent_delta_rule."""
    return _run(_core.delta_rule_reference, q, k, v, None, beta, scale, initial_state, output_final_state,
                use_qk_l2norm_in_kernel, cu_seqlens, 64)


# --- Gated DeltaNet -------------------------------------------------------------------------------------------

def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           use_qk_l2norm_in_kernel=False, cu_seqlens=None, chunk_size=64):
    """Gated DeltaNet (Qwen3-Next), chunked (prefill).

    S_t = exp(g_t) S_{t-1} + beta_t k_t (v_t - exp(g_t) S_{t-1}^T k_t)^T, o_t = S_t^T (scale q_t).
    q, k: [B, T, H, K]; v: [B, T, HV, V]; g: [B, T, HV] log decays (<= 0); beta: [B, T, HV] (None means 1;
    values up to 2 allow negative eigenvalues). scale: default K ** -0.5. initial_state: [N, HV, K, V] or None.
    use_qk_l2norm_in_kernel: q, k <- x / sqrt(|x|^2 + 1e-6) first (as fla and Qwen3-Next).
    cu_seqlens: int [N + 1] offsets of packed sequences (B == 1). chunk_size: 16, 32, 64 or 128.
    Returns (o [B, T, HV, V] in q's dtype, final_state [N, HV, K, V] float32 or None).
    """
    return _run(_core.chunk_gated_delta_rule, q, k, v, g, beta, scale, initial_state, output_final_state,
                use_qk_l2norm_in_kernel, cu_seqlens, chunk_size)


def recurrent_gated_delta_rule(q, k, v, g, beta=None, scale=None, initial_state=None, output_final_state=False,
                               use_qk_l2norm_in_kernel=False, cu_seqlens=None, inplace_final_state=False,
                               check_inputs=True):
    """Gated DeltaNet, one token at a time (decode). Arguments as chunk_gated_delta_rule (no chunk_size), plus:

    inplace_final_state: initial_state ([N, HV, K, V] float32, contiguous) is updated in place and returned as
        the final state (whatever output_final_state says); ValueError / TypeError if it would need a copy.
    check_inputs: False skips the NaN / Inf / gate-sign scans of the inputs and of initial_state (shapes and
        dtypes are still checked); for decode loops whose values are known to be finite.
    """
    return _run(_core.recurrent_gated_delta_rule, q, k, v, g, beta, scale, initial_state, output_final_state,
                use_qk_l2norm_in_kernel, cu_seqlens, 64, inplace_final_state, check_inputs)


def fused_recurrent_gated_delta_rule(q, k, v, g=None, gk=None, gv=None, beta=None, scale=None, initial_state=None,
                                     output_final_state=False, use_qk_l2norm_in_kernel=False, cu_seqlens=None,
                                     inplace_final_state=False, check_inputs=True):
    """fla's fused_recurrent_gated_delta_rule, argument for argument: g [B, T, HV] per-head log decay, or
    gk [B, T, HV, K] per-key-channel log decay (then this is KDA); gv (per-value-channel decay) and g together
    with gk are not supported. Otherwise as recurrent_gated_delta_rule (inplace_final_state, check_inputs
    included)."""
    if gv is not None:
        raise ValueError("gv: per-value-channel decay is not supported")
    extra = dict(inplace_final_state=inplace_final_state, check_inputs=check_inputs)
    if gk is not None:
        if g is not None:
            raise ValueError("gk: give either g (per head) or gk (per key channel), not both")
        return recurrent_kda(q, k, v, gk, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel,
                             cu_seqlens, **extra)
    if g is None:
        return recurrent_delta_rule(q, k, v, beta, scale, initial_state, output_final_state,
                                    use_qk_l2norm_in_kernel, cu_seqlens, **extra)
    return recurrent_gated_delta_rule(q, k, v, g, beta, scale, initial_state, output_final_state,
                                      use_qk_l2norm_in_kernel, cu_seqlens, **extra)


def gated_delta_rule_reference(q, k, v, g, beta=None, scale=None, initial_state=None, output_final_state=False,
                               use_qk_l2norm_in_kernel=False, cu_seqlens=None):
    """Gated DeltaNet as the plain recurrence in double precision (slow). Arguments as recurrent_gated_delta_rule."""
    return _run(_core.gated_delta_rule_reference, q, k, v, g, beta, scale, initial_state, output_final_state,
                use_qk_l2norm_in_kernel, cu_seqlens, 64)


# --- Kimi Delta Attention -------------------------------------------------------------------------------------

def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, cu_seqlens=None, chunk_size=64):
    """Kimi Delta Attention, chunked (prefill): the gated delta rule with one decay per key channel.

    S_t = diag(exp(g_t)) S_{t-1} + beta_t k_t (v_t - (diag(exp(g_t)) S_{t-1})^T k_t)^T, o_t = S_t^T (scale q_t).
    q, k: [B, T, H, K]; v: [B, T, HV, V]; g: [B, T, HV, K] log decays (<= 0, already activated: fla's
    use_gate_in_kernel is not offered); beta: [B, T, HV] (None means 1). Other arguments and the results as
    chunk_gated_delta_rule.
    """
    return _run(_core.chunk_kda, q, k, v, g, beta, scale, initial_state, output_final_state,
                use_qk_l2norm_in_kernel, cu_seqlens, chunk_size)


def recurrent_kda(q, k, v, g, beta=None, scale=None, initial_state=None, output_final_state=False,
                  use_qk_l2norm_in_kernel=False, cu_seqlens=None, inplace_final_state=False, check_inputs=True):
    """Kimi Delta Attention, one token at a time (decode). Arguments as chunk_kda (no chunk_size), plus
    inplace_final_state and check_inputs as in recurrent_gated_delta_rule."""
    return _run(_core.recurrent_kda, q, k, v, g, beta, scale, initial_state, output_final_state,
                use_qk_l2norm_in_kernel, cu_seqlens, 64, inplace_final_state, check_inputs)


def fused_recurrent_kda(q, k, v, g, beta=None, A_log=None, dt_bias=None, scale=None, initial_state=None,
                        output_final_state=False, use_qk_l2norm_in_kernel=False, cu_seqlens=None,
                        inplace_final_state=False, check_inputs=True):
    """fla's fused_recurrent_kda, argument for argument. The in-kernel gate activation (A_log, dt_bias) is not
    supported: pass the activated log decays as g. Otherwise as recurrent_kda (inplace_final_state is the name
    fla's fused_recurrent_kda_fwd uses)."""
    if A_log is not None or dt_bias is not None:
        raise ValueError("A_log: the in-kernel gate activation is not supported; pass activated log decays as g")
    return recurrent_kda(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel,
                         cu_seqlens, inplace_final_state=inplace_final_state, check_inputs=check_inputs)


def kda_reference(q, k, v, g, beta=None, scale=None, initial_state=None, output_final_state=False,
                  use_qk_l2norm_in_kernel=False, cu_seqlens=None):
    """Kimi Delta Attention as the plain recurrence in double precision (slow). Arguments as recurrent_kda."""
    return _run(_core.kda_reference, q, k, v, g, beta, scale, initial_state, output_final_state,
                use_qk_l2norm_in_kernel, cu_seqlens, 64)
