"""The linear family's cases of `attnzoo bench kernels --write-cases` against PyTorch (check_vs_torch.py calls
this for the manifest's "linear" cases; it needs torch and numpy only).

Each case (Gated DeltaNet, KDA or GLA: a decode batch or ragged packed sequences, an initial state, mild or strong
decays; RWKV-7's recurrence and chunked form and the causal conv1d prefill, by their own float64 forms below) is recomputed with the plain recurrence written out here in float64 torch on the cases' device, in fla's
layout and conventions (q, k [B, T, H, K]; v [B, T, HV, V]; states [N, HV, K, V]; l2norm x / sqrt(|x|^2 + 1e-6)):

    S_t = D_t S_{t-1} + beta_t k_t (v_t - (D_t S_{t-1})^T k_t)^T     (delta family; GLA: S_t = D_t S_{t-1} + k_t v_t^T)
    o_t = S_t^T (scale q_t)

with D_t = exp(g_t) (one per head) or diag(exp(g_t)) (one per key channel). Our output and final state must sit
within the tolerance of it. Where fla imports (the GPU image, with the bundle's fla and triton), its naive
recurrences and, on a GPU, its fused / chunked kernels run on the same inputs, and their distance from the same
exact answer is printed beside ours for scale; they never decide the verdict.
"""
import contextlib
import importlib.util
import os
import signal
import time

import torch

# |ours - exact| <= tol * (1 + |exact|), outputs and final states alike. The inputs are the same rounded values on
# both sides, so the error is our arithmetic: f32 recurrences lose ~1e-6 per step; the chunked form may round its
# tile products to bf16 on tensor cores (fla's chunk kernels do), hence its looser bound.
TOLERANCE = {"recurrent": 2e-3, "chunk": 3e-2}

# fla's Triton kernels compile on first use: this check's share of the GPU run's budget for them, all cases
# together, and the most one call may take. Past either, the column says so and the verdict is unchanged.
FLA_KERNEL_BUDGET_S = 60
FLA_KERNEL_CALL_S = 45
_fla_kernel_spent = [0.0]


@contextlib.contextmanager
def _time_limit(seconds):
    def on_alarm(signum, frame):
        raise TimeoutError(f"stopped after {seconds:.0f} s (time limit)")
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.1))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def l2norm(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def exact_recurrence(case, q, k, v, g, beta, h0):
    """One sequence in float64: q, k [T, H, K]; v [T, HV, V]; g [T, HV] or [T, HV, K]; beta [T, HV] or None;
    h0 [HV, K, V]. Returns o [T, HV, V] and the final state."""
    q, k, v, g, h0 = (x.double() for x in (q, k, v, g, h0))
    group = case["HV"] // case["H"]
    q, k = q.repeat_interleave(group, dim=1), k.repeat_interleave(group, dim=1)
    if case["l2norm"]:
        q, k = l2norm(q), l2norm(k)
    S = h0.clone()
    out = torch.empty(q.shape[0], case["HV"], case["V"], dtype=torch.float64, device=q.device)
    for t in range(q.shape[0]):
        decay = torch.exp(g[t])
        S = S * (decay[:, :, None] if case["gate"] == "channel" else decay[:, None, None])
        if case["delta"]:
            u = beta[t].double()[:, None] * (v[t] - torch.bmm(k[t][:, None, :], S)[:, 0])
        else:
            u = v[t]
        S = S + k[t][:, :, None] * u[:, None, :]
        out[t] = case["scale"] * torch.bmm(q[t][:, None, :], S)[:, 0]
    return out, S


def sequences(case):
    """(token slice of the flattened [B * T] rows, sequence index) for every sequence of the case."""
    cu = case["cu_seqlens"]
    if cu is not None:
        return [(slice(cu[n], cu[n + 1]), n) for n in range(len(cu) - 1)]
    T = case["T"]
    return [(slice(b * T, (b + 1) * T), b) for b in range(case["B"])]


def _naive_by_path():
    """fla's naive recurrences (plain torch) loaded from their files: importing the fla package needs triton,
    which a CPU machine may lack, and these three files do not."""
    spec = importlib.util.find_spec("fla")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'fla'")
    root = os.path.join(list(spec.submodule_search_locations)[0], "ops")

    def load(family, name):
        path = os.path.join(root, family, "naive.py")
        module_spec = importlib.util.spec_from_file_location(f"_fla_naive_{family}", path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        return getattr(module, name)

    return dict(gdn_naive=load("gated_delta_rule", "naive_recurrent_gated_delta_rule"),
                kda_naive=load("kda", "naive_recurrent_kda"), gla_naive=load("gla", "naive_recurrent_gla"))


def fla_import():
    """fla's functions for the cases' entries: all of them where fla imports; else its naive recurrences alone
    (with "kernels" saying why not the rest); else the reason there are none (a string)."""
    try:
        if importlib.util.find_spec("triton") is None:  # fla's package imports it (and first transformers: slow)
            raise ModuleNotFoundError("No module named 'triton'")
        from fla.ops.gated_delta_rule import (chunk_gated_delta_rule, fused_recurrent_gated_delta_rule,
                                              naive_recurrent_gated_delta_rule)
        from fla.ops.gla import chunk_gla, fused_recurrent_gla
        from fla.ops.gla.naive import naive_recurrent_gla
        from fla.ops.kda import fused_recurrent_kda
        from fla.ops.kda.naive import naive_recurrent_kda
    except Exception as e:  # noqa: BLE001 (no fla, no triton, a version without a name: the column says why)
        why = _first_line(e)
        try:
            return dict(_naive_by_path(), kernels=why)
        except Exception as e2:  # noqa: BLE001
            return f"{why}; naive files: {_first_line(e2)}"
    return dict(chunk_gated_delta_rule=chunk_gated_delta_rule, chunk_gla=chunk_gla,
                gdn_fused=fused_recurrent_gated_delta_rule,
                gdn_naive=naive_recurrent_gated_delta_rule, gla_fused=fused_recurrent_gla,
                gla_naive=naive_recurrent_gla,
                kda_fused=fused_recurrent_kda, kda_naive=naive_recurrent_kda, kernels=None)


def fla_naive(fla, case, q, k, v, g, beta, h0):
    """fla's naive recurrence on one sequence ([1, T, ...] tensors), output [T, HV, V] (float32 inside)."""
    if case["l2norm"]:  # the naive forms take normalised keys; the same float64 normalisation as the exact one
        q, k = l2norm(q.double()).float(), l2norm(k.double()).float()
    entry = case["entry"]
    if entry in ("recurrent_gated_delta_rule", "chunk_gated_delta_rule"):
        if case["HV"] != case["H"]:
            return None  # the naive GDN has one head count
        o, _ = fla["gdn_naive"](q.float(), k.float(), v.float(), beta.float(), g.float(), scale=case["scale"],
                                initial_state=h0.float(), output_final_state=True)
    elif entry == "recurrent_kda":
        o, _ = fla["kda_naive"](q.float(), k.float(), v.float(), g.float(), beta.float(), scale=case["scale"],
                                initial_state=h0.float(), output_final_state=True)
    else:
        o, _ = fla["gla_naive"](q.float(), k.float(), v.float(), g.float(), initial_state=h0.float(),
                                output_final_state=True)
    return o[0]


def fla_kernel(fla, case, q, k, v, g, beta, h0):
    """fla's Triton kernel for the case's entry over the whole case (cu_seqlens as fla takes them), output
    [B * T, HV, V]; GPU only."""
    kw = dict(initial_state=h0, output_final_state=True)
    if case["cu_seqlens"] is not None:
        kw["cu_seqlens"] = torch.tensor(case["cu_seqlens"], dtype=torch.long, device=q.device)
    entry = case["entry"]
    if entry == "recurrent_gated_delta_rule":
        o, _ = fla["gdn_fused"](q, k, v, g=g, beta=beta, scale=case["scale"], use_qk_l2norm_in_kernel=True, **kw)
    elif entry == "chunk_gated_delta_rule":
        o, _ = fla["chunk_gated_delta_rule"](q, k, v, g=g, beta=beta, scale=case["scale"],
                                             use_qk_l2norm_in_kernel=True, **kw)
    elif entry == "recurrent_kda":
        o, _ = fla["kda_fused"](q, k, v, g=g, beta=beta, scale=case["scale"], use_qk_l2norm_in_kernel=True, **kw)
    elif entry == "chunk_gla":
        o, _ = fla["chunk_gla"](q, k, v, g=g, scale=case["scale"], **kw)
    else:
        o, _ = fla["gla_fused"](q, k, v, gk=g, scale=case["scale"], **kw)
    return o.reshape(-1, case["HV"], case["V"])


def _first_line(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def exact_rwkv7(case, r, w, k, v, a, b, h0):
    """RWKV-7's recurrence on one sequence in float64 (fla's dplr convention): r, w, k, a, b [T, H, K]; v [T, H, V];
    S_t = diag(exp(w_t)) S_{t-1} + b_t (a_t^T S_{t-1}) + k_t v_t^T, o_t = S_t^T (scale r_t)."""
    r, w, k, v, a, b, S = (x.double() for x in (r, w, k, v, a, b, h0))
    out = torch.empty(r.shape[0], case["H"], case["V"], dtype=torch.float64, device=r.device)
    for t in range(r.shape[0]):
        sa = torch.bmm(a[t][:, None, :], S)[:, 0]  # a^T S_{t-1}: [H, V]
        S = S * torch.exp(w[t])[:, :, None] + b[t][:, :, None] * sa[:, None, :] + k[t][:, :, None] * v[t][:, None, :]
        out[t] = case["scale"] * torch.bmm(r[t][:, None, :], S)[:, 0]
    return out, S


def exact_conv(case, x, weight, bias, h0):
    """The causal depthwise convolution on one sequence in float64: x [T, D], weight [D, W], h0 [D, W - 1] the
    inputs before it (oldest first); y[t] = silu(bias + sum_w weight[:, w] x[t - (W - 1) + w]), and the last W - 1
    inputs as the final state."""
    W = case["W"]
    padded = torch.cat([h0.double().T, x.double()], dim=0)  # [W - 1 + T, D]
    T = x.shape[0]
    y = bias.double()[None].expand(T, -1).clone()
    for j in range(W):
        y = y + weight.double()[:, j][None] * padded[j:j + T]
    if case["activation"] == "silu":
        y = y * torch.sigmoid(y)
    return y, padded[-(W - 1):].T


def check_rwkv7_or_conv(case, load, to_torch, device, row):
    """RWKV-7's and the convolution's rows: our output and final state against the float64 forms above (no fla
    column: fla's RWKV-7 / conv kernels are timed in gpu_peers.py, not compared here)."""
    dt = case["dtype"]
    h0 = to_torch(load("initial_state"), "float32", device)
    ours_state = to_torch(load("final_state"), "float32", device).double()
    tol = TOLERANCE["chunk" if case["entry"].startswith("chunk") else "recurrent"]
    worst = {"out": 0.0, "state": 0.0}
    excess = 0.0
    if case["entry"] in ("recurrent_rwkv7", "chunk_rwkv7"):
        names = ("r", "w", "k", "v", "a", "b")
        flat = [to_torch(load(n), dt, device).reshape(-1, case["H"], case["K"] if n != "v" else case["V"])
                for n in names]
        ours = to_torch(load("out"), case["out_dtype"], device).double().reshape(-1, case["H"], case["V"])
        seqs = sequences(case)
    else:
        x = to_torch(load("x"), dt, device).reshape(-1, case["D"])
        weight, bias = to_torch(load("weight"), dt, device), to_torch(load("bias"), dt, device)
        ours = to_torch(load("out"), case["out_dtype"], device).double().reshape(-1, case["D"])
        cu = case["cu_seqlens"]
        seqs = [(slice(cu[n], cu[n + 1]), n) for n in range(len(cu) - 1)]
    for rows, n in seqs:
        if case["entry"] in ("recurrent_rwkv7", "chunk_rwkv7"):
            exact, state = exact_rwkv7(case, *(t[rows] for t in flat), h0[n])
        else:
            exact, state = exact_conv(case, x[rows], weight, bias, h0[n])
        for what, got, want in (("out", ours[rows], exact), ("state", ours_state[n], state)):
            err = (got - want).abs()
            worst[what] = max(worst[what], float(err.max()) if err.numel() else 0.0)
            if err.numel():
                excess = max(excess, float((err / (tol * (1 + want.abs()))).max()))
    note = "n/a (no fla column for this entry)"
    row.update(max_err=worst["out"], state_max_err=worst["state"], fla_naive_max_err=None, fla_naive_note=note,
               fla_kernel_max_err=None, fla_kernel_note=note, tolerance=tol, ok=bool(excess <= 1.0))
    return row


def check_case(case, load, to_torch, device, fla):
    """The case's row: our worst errors (output, final state) against the exact recurrence, fla's beside them."""
    row = {"name": case["name"], "entry": case["entry"], "status": case["status"]}
    if case["status"] != "ok":
        row["error"] = case.get("error", "")
        row["ok"] = False
        return row
    if case["entry"] in ("recurrent_rwkv7", "chunk_rwkv7", "causal_conv1d"):
        return check_rwkv7_or_conv(case, load, to_torch, device, row)
    dt = case["dtype"]
    q, k, v = (to_torch(load(n), dt, device) for n in ("q", "k", "v"))
    g = to_torch(load("g"), "float32", device)
    beta = to_torch(load("beta"), dt, device) if case["delta"] else None
    h0 = to_torch(load("initial_state"), "float32", device)
    ours = to_torch(load("out"), case["out_dtype"], device).double().reshape(-1, case["HV"], case["V"])
    ours_state = to_torch(load("final_state"), "float32", device).double()
    flat = [x.reshape(-1, *x.shape[2:]) if x is not None else None for x in (q, k, v, g, beta)]
    tol = TOLERANCE["chunk" if case["entry"].startswith("chunk") else "recurrent"]
    worst = {"out": 0.0, "state": 0.0}
    excess = 0.0
    exact_all = torch.empty_like(ours)
    naive_err, naive_note = (None, fla) if isinstance(fla, str) else (0.0, None)
    for rows, n in sequences(case):
        qs, ks, vs, gs = (x[rows] for x in flat[:4])
        bs = flat[4][rows] if case["delta"] else None
        exact, state = exact_recurrence(case, qs, ks, vs, gs, bs, h0[n])
        exact_all[rows] = exact
        for what, got, want in (("out", ours[rows], exact), ("state", ours_state[n], state)):
            err = (got - want).abs()
            worst[what] = max(worst[what], float(err.max()))
            excess = max(excess, float((err / (tol * (1 + want.abs()))).max()))
        if naive_err is not None:
            try:
                o = fla_naive(fla, case, *(x[None] for x in (qs, ks, vs, gs)), bs[None] if bs is not None else None,
                              h0[n][None])
                if o is None:
                    naive_err, naive_note = None, "n/a (grouped value heads)"
                else:
                    naive_err = max(naive_err, float((o.double() - exact).abs().max()))
            except Exception as e:  # noqa: BLE001
                naive_err, naive_note = None, _first_line(e)
    if isinstance(fla, str):
        kernel_err, kernel_note = None, fla
    elif fla["kernels"] is not None:
        kernel_err, kernel_note = None, fla["kernels"]
    else:
        kernel_err, kernel_note = None, "n/a (needs a GPU)"
    if not isinstance(fla, str) and fla["kernels"] is None and device.type == "cuda":
        left = FLA_KERNEL_BUDGET_S - _fla_kernel_spent[0]
        t0 = time.monotonic()
        try:
            if left < 1:
                raise TimeoutError("skipped: the fla kernels' time budget is spent")
            with _time_limit(min(FLA_KERNEL_CALL_S, left)):
                o = fla_kernel(fla, case, q, k, v, g, beta, h0)
                kernel_err, kernel_note = float((o.double() - exact_all).abs().max()), None
        except Exception as e:  # noqa: BLE001
            kernel_note = _first_line(e)
        _fla_kernel_spent[0] += time.monotonic() - t0
    row.update(max_err=worst["out"], state_max_err=worst["state"], fla_naive_max_err=naive_err,
               fla_naive_note=naive_note, fla_kernel_max_err=kernel_err, fla_kernel_note=kernel_note, tolerance=tol,
               ok=bool(excess <= 1.0))
    return row


def print_rows(rows):
    if not rows:
        return
    print()
    print("linear family: our output / final state vs the float64 recurrence; fla's naive recurrence (float32) and "
          "its Triton kernel on the same inputs, for scale")
    print("| case | entry | status | out max abs err | state max abs err | fla naive | fla kernel | tolerance | ok |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if r["status"] != "ok":
            print(f"| {r['name']} | {r['entry']} | {r['status']}: {r['error']} | | | | | | NO |")
            continue
        naive = f"{r['fla_naive_max_err']:.2e}" if r["fla_naive_max_err"] is not None else r["fla_naive_note"]
        kernel = f"{r['fla_kernel_max_err']:.2e}" if r["fla_kernel_max_err"] is not None else r["fla_kernel_note"]
        print(f"| {r['name']} | {r['entry']} | ok | {r['max_err']:.2e} | {r['state_max_err']:.2e} | {naive} | {kernel} "
              f"| {r['tolerance']:g} x (1 + abs(exact)) | {'yes' if r['ok'] else 'NO'} |")
