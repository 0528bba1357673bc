"""State-space layers and short convolutions: Mamba's selective scan, Mamba-2's SSD, RWKV-4's WKV, causal conv1d
and S4D / DSS, each in its fast forms against the layer's math restated in torch (float64 / complex128 loops over
time, as mamba_ssm's selective_scan_ref, transformers' torch_forward paths and state-spaces' SSMKernelDiag
compute it)."""
from . import check, compare, require

AREA = "state-space"
REF = "torch recurrence (float64)"


@check(AREA, ["Mamba"])
def mamba(ctx):
    torch = require("torch")
    import attnzoo.linear as L
    g = torch.Generator().manual_seed(1)
    Bt, D, N, T = 1, 8, 4, 40 if ctx.quick else 400
    u, delta, z = (torch.randn(Bt, D, T, generator=g) for _ in range(3))
    A = -torch.rand(D, N, generator=g) - 0.2
    Bm, Cm = torch.randn(Bt, N, T, generator=g), torch.randn(Bt, N, T, generator=g)
    Dv, bias = torch.randn(D, generator=g), torch.randn(D, generator=g) * 0.1
    got, last = L.selective_scan_fn(u, delta, A, Bm, Cm, Dv, z, delta_bias=bias, delta_softplus=True,
                                    return_last_state=True)
    dt = torch.nn.functional.softplus(delta.double() + bias.double()[:, None])
    h = torch.zeros(Bt, D, N, dtype=torch.float64)
    ys = []
    for t in range(T):
        h = torch.exp(dt[:, :, t, None] * A.double()) * h + dt[:, :, t, None] * Bm.double()[:, None, :, t] * \
            u.double()[:, :, t, None]
        ys.append((h * Cm.double()[:, None, :, t]).sum(-1))
    y = (torch.stack(ys, -1) + Dv.double()[:, None] * u.double()) * torch.nn.functional.silu(z.double())
    return [compare(AREA, "Mamba", f"selective_scan_fn (softplus, D, z gate), T={T}: output", REF, got, y, 1e-5),
            compare(AREA, "Mamba", "selective_scan_fn: last state", REF, last, h, 1e-5)]


@check(AREA, ["Mamba-2"])
def mamba2(ctx):
    torch = require("torch")
    import attnzoo.linear as L
    g = torch.Generator().manual_seed(2)
    Bt, T, H, P, G, N = 1, 70 if ctx.quick else 400, 4, 8, 2, 8
    x = torch.randn(Bt, T, H, P, generator=g)
    dt = torch.randn(Bt, T, H, generator=g)
    A = -torch.rand(H, generator=g) - 0.2
    Bm, Cm = torch.randn(Bt, T, G, N, generator=g), torch.randn(Bt, T, G, N, generator=g)
    Dv, bias = torch.randn(H, generator=g), torch.randn(H, generator=g) * 0.1
    h0 = torch.randn(Bt, H, P, N, generator=g)
    dtp = torch.nn.functional.softplus(dt.double() + bias.double())
    rep = lambda m: m.double().repeat_interleave(H // G, dim=2)  # noqa: E731  head h reads group h // (H / G)
    Bh, Ch = rep(Bm), rep(Cm)
    h, ys = h0.double().clone(), []
    for t in range(T):
        h = torch.exp(A.double() * dtp[:, t])[..., None, None] * h + \
            (dtp[:, t, :, None] * x.double()[:, t])[..., None] * Bh[:, t, :, None, :]
        ys.append((h * Ch[:, t, :, None, :]).sum(-1) + Dv.double()[:, None] * x.double()[:, t])
    y = torch.stack(ys, 1)
    rows = []
    for f in (L.mamba2_chunk_scan, L.mamba2_recurrent):
        o, s = f(x, dt, A, Bm, Cm, Dv, dt_bias=bias, dt_softplus=True, initial_state=h0, output_final_state=True)
        rows.append(compare(AREA, "Mamba-2", f"{f.__name__} (G=2, softplus, D, h0), T={T}: output", REF, o, y, 1e-5))
        rows.append(compare(AREA, "Mamba-2", f"{f.__name__}: final state", REF, s, h, 1e-5))
    return rows


@check(AREA, ["RWKV-4"])
def rwkv4(ctx):
    torch = require("torch")
    import attnzoo.linear as L
    g = torch.Generator().manual_seed(3)
    T, C = 40 if ctx.quick else 400, 16
    w, u = torch.randn(C, generator=g), torch.randn(C, generator=g)
    k, v = torch.randn(1, T, C, generator=g), torch.randn(1, T, C, generator=g)
    got, _ = L.rwkv4_wkv(w, u, k, v)
    decay = torch.exp(-torch.exp(w.double()))  # the plain (unstabilised) definition: fine in float64 at this size
    num, den, ys = torch.zeros(C, dtype=torch.float64), torch.zeros(C, dtype=torch.float64), []
    for t in range(T):
        kt, vt = k.double()[0, t], v.double()[0, t]
        bonus = torch.exp(u.double() + kt)
        ys.append((num + bonus * vt) / (den + bonus))
        num, den = decay * num + torch.exp(kt) * vt, decay * den + torch.exp(kt)
    return [compare(AREA, "RWKV-4", f"rwkv4_wkv (running-maximum form), T={T}",
                    "torch: the plain WKV sum (float64)", got, torch.stack(ys)[None], 1e-5)]


@check(AREA, ["causal conv1d"])
def conv1d(ctx):
    torch = require("torch")
    import attnzoo.linear as L
    g = torch.Generator().manual_seed(4)
    T, D, W = 33 if ctx.quick else 300, 12, 4
    x, w, b = torch.randn(1, T, D, generator=g), torch.randn(D, W, generator=g), torch.randn(D, generator=g)
    got, _ = L.causal_conv1d(x, w, b, activation="silu")
    want = torch.nn.functional.silu(torch.nn.functional.conv1d(
        x.double().transpose(1, 2), w.double()[:, None], b.double(), padding=W - 1, groups=D)[..., :T].transpose(1, 2))
    return [compare(AREA, "causal conv1d", f"causal_conv1d (width {W}, bias, silu), T={T}",
                    "torch.nn.functional.conv1d (groups=D, left padding)", got, want, 1e-5)]


@check(AREA, ["S4D / DSS"])
def s4d(ctx):
    torch = require("torch")
    import attnzoo.linear as L
    g = torch.Generator().manual_seed(5)
    T, H, N = 200 if ctx.quick else 1000, 4, 8  # T > 128: the FFT path of s4d_conv
    u = torch.randn(1, T, H, generator=g)
    dt = torch.exp(torch.rand(H, generator=g) * -4 - 1)
    A = torch.complex(-0.5 * torch.ones(H, N), torch.pi * torch.arange(N).repeat(H, 1).float()).to(torch.complex128)
    B = torch.complex(torch.randn(H, N, generator=g), torch.randn(H, N, generator=g)).to(torch.complex128)
    C = torch.complex(torch.randn(H, N, generator=g), torch.randn(H, N, generator=g)).to(torch.complex128)
    Dv = torch.randn(H, generator=g)
    dtA = dt.double()[:, None] * A
    rows = []
    for disc in ("zoh", "bilinear"):
        if disc == "zoh":
            dA, dB = torch.exp(dtA), B * (torch.exp(dtA) - 1) / A
        else:
            dA, dB = (1 + dtA / 2) / (1 - dtA / 2), B * dt.double()[:, None] / (1 - dtA / 2)
        powers = dA[..., None] ** torch.arange(T, dtype=torch.float64)  # [H, N, T]
        K = 2 * torch.einsum("hn,hnl->hl", C * dB, powers).real  # state-spaces' Vandermonde kernel
        ud = u.double()[0].T  # [H, T]
        y = torch.stack([torch.stack([(K[h, :t + 1].flip(0) * ud[h, :t + 1]).sum() for t in range(T)])
                         for h in range(H)]).T + Dv.double() * u.double()[0]
        for f in (L.s4d_conv, L.s4d_recurrent):
            o, _ = f(u, dt, A.to(torch.complex64), B.to(torch.complex64), C.to(torch.complex64), Dv,
                     discretization=disc)
            rows.append(compare(AREA, "S4D / DSS", f"{f.__name__} ({disc}), T={T}, H={H}, N={N}",
                                "torch: SSMKernelDiag's kernel (complex128), direct convolution", o, y[None], 1e-5))
    return rows
