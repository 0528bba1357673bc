"""The linear-attention family (linear attention, retention, simple GLA, GLA, DeltaNet, Gated DeltaNet, KDA,
RWKV-7) against flash-linear-attention's naive PyTorch references: both the chunked (prefill) and the recurrent
(decode) form of each against fla's plain recurrence, with initial states."""
import importlib.util
import pathlib

from . import Missing, check, compare, require

AREA = "linear family"
REF = "fla naive recurrence"


def fla_naive(family, subdir=None):
    """fla/ops/<family>/naive.py loaded from its file: the fla.ops package imports triton, these files do not."""
    fla = require("fla", "fla (flash-linear-attention)")
    path = pathlib.Path(fla.__file__).parent / "ops" / (subdir or family) / "naive.py"
    if not path.exists():
        raise Missing(f"this fla has no {path.relative_to(pathlib.Path(fla.__file__).parent)}")
    spec = importlib.util.spec_from_file_location(f"attnzoo_conformance_fla_{family}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _inputs(torch, T, H=2, K=32, V=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, T, H, d, generator=g) for d in (K, K, V))
    return g, q, k, v


def _forms(rows, family, T, fns, want_o, want_s, tol=1e-4):
    for name, fn in fns:
        o, s = fn()
        rows.append(compare(AREA, family, f"{name}: output, T={T}", REF, o, want_o, tol))
        rows.append(compare(AREA, family, f"{name}: final state", REF, s, want_s, tol))


@check(AREA, ["linear attention", "retention", "simple GLA", "GLA"])
def gla_family(ctx):
    torch = require("torch")
    import attnzoo.linear as L
    T = 70 if ctx.quick else 500
    rows = []
    g, q, k, v = _inputs(torch, T)
    h0 = torch.randn(1, 2, 32, 32, generator=g)
    la = fla_naive("linear_attn").naive_recurrent_linear_attn
    want_o, want_s = la(q, k, v, initial_state=h0, output_final_state=True)
    _forms(rows, "linear attention", T, [(f.__name__, lambda f=f: f(q, k, v, initial_state=h0, output_final_state=True,
                                                                       normalize=False))
                                         for f in (L.chunk_linear_attn, L.fused_recurrent_linear_attn)], want_o, want_s)
    want = fla_naive("retention").naive_retention(*(x.transpose(1, 2) for x in (q, k, v))).transpose(1, 2)
    for f in (L.chunk_retention, L.fused_recurrent_retention, L.parallel_retention):
        rows.append(compare(AREA, "retention", f"{f.__name__}: output, T={T}", "fla naive_retention", f(q, k, v)[0],
                            want, 1e-4))
    gate = torch.nn.functional.logsigmoid(torch.randn(1, T, 2, generator=g)) / 4
    want_o, want_s = fla_naive("simple_gla").naive_recurrent_simple_gla(q, k, v, gate, initial_state=h0,
                                                                        output_final_state=True)
    _forms(rows, "simple GLA", T, [(f.__name__, lambda f=f: f(q, k, v, gate, initial_state=h0, output_final_state=True))
                                   for f in (L.chunk_simple_gla, L.fused_recurrent_simple_gla)], want_o, want_s)
    gk = torch.nn.functional.logsigmoid(torch.randn(1, T, 2, 32, generator=g)) / 4
    want_o, want_s = fla_naive("gla").naive_recurrent_gla(q, k, v, gk, initial_state=h0, output_final_state=True)
    _forms(rows, "GLA", T, [(f.__name__, lambda f=f: f(q, k, v, gk, initial_state=h0, output_final_state=True))
                            for f in (L.chunk_gla, L.fused_recurrent_gla)], want_o, want_s)
    return rows


@check(AREA, ["DeltaNet", "Gated DeltaNet", "KDA"])
def delta_family(ctx):
    torch = require("torch")
    import attnzoo.linear as L
    T = 70 if ctx.quick else 500
    rows = []
    g, q, k, v = _inputs(torch, T)
    k = torch.nn.functional.normalize(k, dim=-1)
    q = torch.nn.functional.normalize(q, dim=-1)
    beta = torch.sigmoid(torch.randn(1, T, 2, generator=g))
    h0 = torch.randn(1, 2, 32, 32, generator=g) * 0.5
    t = lambda x: x.transpose(1, 2).contiguous()  # noqa: E731  fla's delta_rule naive wants [B, H, T, K]
    want_o, want_s = fla_naive("delta_rule").delta_rule_recurrence(t(q), t(k), t(v), t(beta), initial_state=h0.clone(),
                                                                   output_final_state=True)
    _forms(rows, "DeltaNet", T, [(f.__name__, lambda f=f: f(q, k, v, beta, initial_state=h0, output_final_state=True))
                                 for f in (L.chunk_delta_rule, L.fused_recurrent_delta_rule)], t(want_o), want_s)
    gate = torch.nn.functional.logsigmoid(torch.randn(1, T, 2, generator=g)) / 4
    naive = fla_naive("gated_delta_rule").naive_recurrent_gated_delta_rule
    want_o, want_s = naive(q, k, v, beta, gate, initial_state=h0.clone(), output_final_state=True)
    _forms(rows, "Gated DeltaNet", T, [(f.__name__, lambda f=f: f(q, k, v, gate, beta, initial_state=h0,
                                                                   output_final_state=True))
                                       for f in (L.chunk_gated_delta_rule, L.recurrent_gated_delta_rule)],
           want_o, want_s)
    gk = torch.nn.functional.logsigmoid(torch.randn(1, T, 2, 32, generator=g)) / 4
    want_o, want_s = fla_naive("kda").naive_recurrent_kda(q, k, v, gk, beta, initial_state=h0.clone(),
                                                          output_final_state=True)
    _forms(rows, "KDA", T, [(f.__name__, lambda f=f: f(q, k, v, gk, beta, initial_state=h0, output_final_state=True))
                            for f in (L.chunk_kda, L.recurrent_kda)], want_o, want_s)
    return rows


@check(AREA, ["RWKV-7"])
def rwkv7(ctx):
    torch = require("torch")
    import attnzoo.linear as L
    naive = fla_naive("rwkv7", "generalized_delta_rule/dplr")
    T, H, K = 70 if ctx.quick else 500, 2, 32
    g = torch.Generator().manual_seed(7)
    r = torch.randn(1, T, H, K, generator=g)
    w = -torch.exp(torch.randn(1, T, H, K, generator=g)) - 0.01
    k = torch.randn(1, T, H, K, generator=g) / K ** 0.5
    v = torch.randn(1, T, H, K, generator=g)
    kk = torch.nn.functional.normalize(torch.randn(1, T, H, K, generator=g), dim=-1)
    a, b = -kk, kk * torch.sigmoid(torch.randn(1, T, H, K, generator=g))
    h0 = torch.randn(1, H, K, K, generator=g)
    tr = lambda x: x.transpose(1, 2)  # noqa: E731
    # fla's naive scales q by K ** -0.5 itself: undo it so that scale 1 applies, as RWKV-7 uses.
    want_o, want_s = naive.dplr_recurrence(tr(r) * K ** 0.5, tr(k), tr(v), tr(a), tr(b), tr(w), initial_state=h0,
                                           output_final_state=True)
    rows = []
    _forms(rows, "RWKV-7", T, [(f.__name__, lambda f=f: f(r, w, k, v, a, b, scale=1.0, initial_state=h0,
                                                           output_final_state=True))
                               for f in (L.fused_recurrent_rwkv7, L.chunk_rwkv7)], tr(want_o), want_s)
    return rows
