"""The GPU runners' own kernels from `attnzoo bench kernels --write-cases` against independent references in torch
(check_layers_vs_torch.py hands it the manifest's rwkv7_* / grouped_bias / gpt_oss_swiglu / head_rows / moe_group
cases), all in float64 from the case's inputs:

- rwkv7_shift_mix: fla's token shift (the previous token, a sequence's first from its cached shift row, zeros for a
  pad) and fused_addcmul_rwkv7's lerps x + (prev - x) * mix; bf16 out within half an ulp + f32 rounding of
  |x| + |prev - x| |mix|; the shift rows after: each sequence's last token where it had one, every other float
  as before, exactly. With norm_eps (the block's LayerNorm fused in), x is F.layer_norm(x) * w + b first, and the
  f32 LayerNorm's rounding widens both bounds by 1e-5 x the terms' size (the rows it shifts in included).
- rwkv7_activate: fla's RWKV-7 formulas: identity, tanh and sigmoid (the LoRAs' middles), the decay
  -exp(-1/2) * sigmoid(x), the channel mix's relu(x)^2 ("sqrelu"); within the output's half ulp + 1e-5 relative.
- rwkv7_prepare_keys: a = sigmoid(a); kk = l2norm(k * k_k) per head (fla's fused x rsqrt(sum x^2 + 1e-6), or
  F.normalize); k = k.addcmul(k * (a - 1), k_a); the recurrence's a = -kk and b = kk * a; v = lerp(v, v_first,
  sigmoid(v_gate)) on later layers, v_first = v on the first; within 1e-5 x (1 + |exact|).
- rwkv7_output: F.group_norm per head (eps head_dim x norm_eps) + ((r * k * r_k).sum(-1) * v), times g, as fla's
  RWKV7Attention's gate_output_correction; bf16 out within half an ulp + 1e-5 x the terms' size.
- grouped_bias: y + bias[e] on expert e's rows [offsets[e], offsets[e + 1]) (an empty expert among them).
- gpt_oss_swiglu: transformers' GptOssExperts: gate.clamp(max=limit), up.clamp(-limit, limit),
  (up + 1) * gate * sigmoid(alpha * gate); f32 within 1e-5 x (1 + |exact|).
- head_rows: dst[dst_rows[r], :, col0 : col0 + cols] = src[src_rows[r], :, :cols] (one source head broadcast),
  zeros to col0 + width, every other element as before: exactly.
- moe_group: torch's stable argsort of the flattened expert ids (the grouped order), the offsets and the row
  tiles from the counts, dest its inverse: exactly.
"""
import numpy as np
import torch

import check_step_vs_torch as step

RUNNER_KINDS = ("rwkv7_shift_mix", "rwkv7_activate", "rwkv7_prepare_keys", "rwkv7_output", "grouped_bias",
                "gpt_oss_swiglu", "head_rows", "moe_group")
HALF_ULP = {"bfloat16": 2.0 ** -8, "float32": 2.0 ** -24}
F32_TOLERANCE = 1e-5
DECAY_SCALE = -0.6065306597126334  # -exp(-1/2)


def f64(load, what, device):
    return torch.from_numpy(np.ascontiguousarray(load(what)).astype(np.float64)).to(device)


def values(load, what, dtype, device):
    if dtype == "bfloat16":
        return step.bf16_as_float(load(what), device)
    return f64(load, what, device)


def within(ours, exact, bound):
    err = (ours - exact).abs()
    return float(err.max()), bool((err <= bound).all())


def check_shift_mix(case, load, device):
    x, mixes = f64(load, "x", device), f64(load, "mixes", device)
    before = f64(load, "shift_before", device)
    slots, cu = load("slots").tolist(), load("cu_seqlens").tolist()
    C, off = case["C"], case["offset"]
    norm = "norm_eps" in case
    if norm:  # RWKV-7's block LayerNorm (fla's attn_norm / ffn_norm, nn.LayerNorm)
        x = torch.nn.functional.layer_norm(x, (C,), f64(load, "norm_weight", device), f64(load, "norm_bias", device),
                                           case["norm_eps"])
    prev = torch.zeros_like(x)
    after = before.clone()
    for s, slot in enumerate(slots):
        b, e = cu[s], cu[s + 1]
        if b == e:
            continue
        prev[b] = before[slot, off:off + C] if slot >= 0 else 0.0  # fla's cached shift state; a pad's zeros
        prev[b + 1:e] = x[b:e - 1]
        if slot >= 0:
            after[slot, off:off + C] = x[e - 1]
    delta = prev - x
    exact = x[None] + delta[None] * mixes[:, None, :]  # fused_addcmul_rwkv7: [M, T, C]
    size = x.abs()[None] + delta.abs()[None] * mixes.abs()[:, None, :]
    f32_norm = 1e-5 if norm else 0.0
    err, ok = within(values(load, "out", "bfloat16", device), exact,
                     HALF_ULP["bfloat16"] * (1 + 1e-5) * exact.abs() + (2e-6 + f32_norm) * size + 1e-30)
    shift = f64(load, "shift", device)
    shift_ok = bool(((shift - after).abs() <= f32_norm * (1 + after.abs())).all())
    return dict(max_err=err, shift_ok=shift_ok, tolerance="half a bf16 ulp + f32 rounding; shift rows exact",
                ok=ok and shift_ok)


def check_activate(case, load, device):
    x = f64(load, "x", device)
    act = case["act"]
    exact = {"none": x, "tanh": torch.tanh(x), "sigmoid": torch.sigmoid(x),
             "decay": DECAY_SCALE * torch.sigmoid(x), "relu2": torch.relu(x) ** 2}[act]
    dtype = case["out_dtype"]
    err, ok = within(values(load, "y", dtype, device), exact,
                     (HALF_ULP[dtype] * (1 + 1e-5) + F32_TOLERANCE) * exact.abs() + 1e-7)
    return dict(max_err=err, tolerance=f"half a {dtype} ulp + {F32_TOLERANCE:g} relative", ok=ok)


def check_prepare_keys(case, load, device):
    H = case["H"]
    k, a, k_k, k_a, v = (f64(load, w, device) for w in ("k", "a", "k_k", "k_a", "v"))
    T, HK = k.shape
    a = torch.sigmoid(a)
    kk = (k * k_k).view(T, H, -1)
    if case["fused_l2norm"]:
        kk = kk * torch.rsqrt((kk * kk).sum(-1, keepdim=True) + 1e-6)
    else:
        kk = torch.nn.functional.normalize(kk, p=2.0, dim=-1)
    kk = kk.reshape(T, HK)
    want = {"k_out": k.addcmul(k * (a - 1), k_a), "a_rec": -kk, "b_out": kk * a}
    if case["first_layer"]:
        want.update(v_out=v, v_first_out=v)
    else:
        v_first, v_gate = f64(load, "v_first", device), f64(load, "v_gate", device)
        want.update(v_out=torch.lerp(v, v_first, torch.sigmoid(v_gate)), v_first_out=v_first)
    errs, ok = [], True
    for what, exact in want.items():
        e, good = within(f64(load, what, device), exact, F32_TOLERANCE * (1 + exact.abs()))
        errs.append(e)
        ok = ok and good
    return dict(max_err=max(errs), tolerance=f"{F32_TOLERANCE:g} x (1 + abs(exact))", ok=ok)


def check_output(case, load, device):
    H, eps = case["H"], case["eps"]
    o, w, b, r, k, r_k, v, g = (f64(load, x, device)
                                for x in ("o", "norm_weight", "norm_bias", "r", "k", "r_k", "v", "g"))
    T, HV = o.shape
    normed = torch.nn.functional.group_norm(o, H, w, b, eps)
    bonus = ((r * k * r_k).view(T, H, -1).sum(-1, keepdim=True) * v.view(T, H, -1)).view(T, HV)
    exact = (normed + bonus) * g
    size = (normed.abs() + (r * k * r_k).abs().view(T, H, -1).sum(-1, keepdim=True).expand(T, H, HV // H)
            .reshape(T, HV) * v.abs() + 1) * g.abs()
    err, ok = within(values(load, "out", "bfloat16", device), exact,
                     HALF_ULP["bfloat16"] * (1 + 1e-5) * exact.abs() + F32_TOLERANCE * size)
    return dict(max_err=err, tolerance="half a bf16 ulp + 1e-5 x the terms' size", ok=ok)


def check_grouped_bias(case, load, device):
    y, bias = f64(load, "y", device), f64(load, "bias", device)
    offsets = load("offsets").tolist()
    rows_of = torch.cat([torch.full((offsets[e + 1] - offsets[e],), e, dtype=torch.long)
                         for e in range(len(offsets) - 1)]).to(device)
    exact = y + bias[rows_of]
    err, ok = within(f64(load, "out", device), exact, 1e-6 * (1 + exact.abs()))
    return dict(max_err=err, tolerance="1e-06 x (1 + abs(exact))", ok=ok)


def check_swiglu(case, load, device):
    y = f64(load, "y", device)
    I = y.shape[1] // 2
    alpha, limit = case["alpha"], case["limit"]
    gate = y[:, :I].clamp(max=limit)  # transformers' GptOssExperts
    up = y[:, I:].clamp(min=-limit, max=limit)
    exact = (up + 1) * (gate * torch.sigmoid(gate * alpha))
    err, ok = within(f64(load, "out", device), exact, F32_TOLERANCE * (1 + exact.abs()))
    return dict(max_err=err, tolerance=f"{F32_TOLERANCE:g} x (1 + abs(exact))", ok=ok)


def check_head_rows(case, load, device):
    src = step.bf16_as_float(load("src"), device)
    dst = step.bf16_as_float(load("dst_before"), device).clone()
    cols, col0, width = case["cols"], case["col0"], case["width"]
    rows = len(load("src_rows")) if case["src_rows"] else src.shape[0]
    src_rows = load("src_rows").tolist() if case["src_rows"] else list(range(rows))
    dst_rows = load("dst_rows").tolist() if case["dst_rows"] else list(range(rows))
    for s, d in zip(src_rows, dst_rows):
        dst[d, :, col0:col0 + cols] = src[s, :, :cols]  # one source head: broadcast to every head
        dst[d, :, col0 + cols:col0 + width] = 0.0
    ours = step.bf16_as_float(load("dst"), device)
    err = (ours - dst).abs()
    return dict(max_err=float(err.max()), tolerance="exact", ok=bool((err == 0).all()))


def check_moe_group(case, load, device):
    ids = torch.from_numpy(load("experts").astype(np.int64)).to(device).reshape(-1)
    E, tile_rows = case["E"], case["tile_rows"]
    source = torch.sort(ids, stable=True).indices  # grouped row r holds entry source[r]
    counts = torch.bincount(ids, minlength=E)
    offsets = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    tiles = torch.cat([counts.new_zeros(1), ((counts + tile_rows - 1) // tile_rows).cumsum(0)])
    dest = torch.empty_like(source)
    dest[source] = torch.arange(ids.numel(), device=device)
    bad = [what for what, exact in (("offsets", offsets), ("tiles", tiles), ("source", source), ("dest", dest))
           if not torch.equal(torch.from_numpy(load(what).astype(np.int64)).to(device), exact)]
    return dict(max_err=float(len(bad)), wrong=bad, tolerance="exact (a stable sort by expert)", ok=not bad)


CHECKS = {"rwkv7_shift_mix": check_shift_mix, "rwkv7_activate": check_activate,
          "rwkv7_prepare_keys": check_prepare_keys, "rwkv7_output": check_output,
          "grouped_bias": check_grouped_bias, "gpt_oss_swiglu": check_swiglu, "head_rows": check_head_rows,
          "moe_group": check_moe_group}
