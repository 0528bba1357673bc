"""The linear-attention and state-space family, mirroring flash-linear-attention's API.

Layout q, k [B, T, H, K], v [B, T, HV, V]; gates in natural-log space; recurrent state [N, HV, K, V];
`cu_seqlens` (int32 [N+1]) packs variable-length sequences with B = 1. Every family has
chunk_x(...) for prefill and recurrent_x(...) (alias fused_recurrent_x) for decode, both returning
(o, final_state or None).
"""
from . import _delta, _gla, _s4, _ssm
from ._delta import *  # noqa: F401,F403  delta rule, gated delta rule, KDA
from ._gla import *  # noqa: F401,F403  linear attention, retention, simple GLA, GLA, causal conv1d
from ._ssm import *  # noqa: F401,F403  Mamba, Mamba-2, RWKV-7, RWKV-4
from ._s4 import *  # noqa: F401,F403  S4D, DSS

__all__ = _gla.__all__ + _delta.__all__ + _ssm.__all__ + _s4.__all__
