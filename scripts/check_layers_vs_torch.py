"""The GPU runner's newer kernels from `attnzoo bench kernels --write-cases` against independent references in
torch (check_vs_torch.py calls this for the manifest's moe / dequant / delta_gates / elementwise cases, and the
runners' own kernels through check_runner_vs_torch.py; it needs torch and numpy, and gguf-py's block decoders for
the dequant cases, which the GPU bundle carries from .venv).

- moe: the feed-forward computed densely per token in float64, as transformers' Qwen2-MoE / Qwen3-MoE blocks
  write it: logits = h router^T, p = softmax(logits), the top_k of p (renormalized with norm_topk_prob), out = x +
  sum_j w_j down(silu(gate h) * up h) (+ sigmoid(shared_gate) * shared). Our ids must be torch's top-k up to
  near-ties (each chosen probability within 1e-6 of torch's in that slot), our weights within 1e-5, and our output
  within 4e-3 x sum_j w_j (|act_j| |W_down|^T) + 1e-5 x (1 + |x| + |shared|): the grouped GEMM reads the f32
  activations as bf16 (2^-9 relative each), the rest is f32 accumulation; one wrong expert or weight is
  O(sum / top_k) off.
- dequant: the bf16 expansion against gguf-py's decoding (llama.cpp's own Python decoders) of the same bytes:
  within a bf16 rounding (2^-8 relative, the half ulp of round-to-nearest) of its float value; the share equal to
  gguf-py's value rounded to nearest-even bf16 is reported beside it (f32 operations in another order may round
  a value on a tie boundary the other way).
- delta_gates: Gated DeltaNet's g = -exp(A_log) * softplus(a + dt_bias) and beta = sigmoid(b) as transformers'
  Qwen3-Next writes them (F.softplus, threshold 20), per value head; KDA's the same per head and key channel, A per
  head, as fla's kda gate; float64, within 1e-5 x (1 + |exact|) (f32 exp / log1p).
- elementwise: mul, a * sigmoid(gate), a + alpha b, the logits' scale and softcap (f32 in, bf16 out), Llama 4's
  query temperature (q x (1 + beta log1p(floor(pos / interval)))), the transpose and the indexed row copies, in
  float64 torch: 16-bit outputs within half an ulp (2^-8 relative, 2^-11 for f16) plus f32 rounding, f32 outputs
  within 1e-6 x (1 + |exact|), the copies exactly.
"""
import numpy as np
import torch

import check_runner_vs_torch as runner
import check_step_vs_torch as step

LAYER_KINDS = ("moe", "dequant", "delta_gates", "elementwise") + runner.RUNNER_KINDS
MOE_ACT_ROUNDING = 4e-3
MOE_F32 = 1e-5
MOE_NEAR_TIE = 1e-6
GATES_TOLERANCE = 1e-5
HALF_ULP = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11, "float32": 0.0}
F32_TOLERANCE = 1e-6


def as_float(array, dtype, device):
    """An .npy array holding `dtype`'s values (bf16 as raw bits) as float64 torch on `device`."""
    if dtype == "bfloat16":
        return step.bf16_as_float(array, device)
    if dtype == "float16":
        return torch.from_numpy(array.astype(np.float64)).to(device)
    return torch.from_numpy(np.ascontiguousarray(array).astype(np.float64)).to(device)


def check_moe(case, load, device):
    T, E, k, H, I = case["T"], case["E"], case["top_k"], case["H"], case["I"]
    h = step.bf16_as_float(load("h"), device)
    router = torch.from_numpy(load("router").astype(np.float64)).to(device)
    w_gate_up = step.bf16_as_float(load("w_gate_up"), device)  # [E, 2I, H]: gate rows, then up rows
    w_down = step.bf16_as_float(load("w_down"), device)  # [E, H, I]
    x = torch.from_numpy(load("x").astype(np.float64)).to(device)
    p = torch.softmax(h @ router.T, dim=-1)
    top = p.topk(k, dim=-1, sorted=True)
    ours_ids = torch.from_numpy(load("experts").astype(np.int64)).to(device)
    ours_w = torch.from_numpy(load("weights").astype(np.float64)).to(device)
    in_range = bool(((ours_ids >= 0) & (ours_ids < E)).all())
    ids = ours_ids.clamp(0, E - 1)
    chosen = p.gather(1, ids)  # torch's probability of each expert we chose, slot by slot
    distinct = all(len(set(row)) == k for row in ids.tolist())
    ids_ok = in_range and distinct and bool(((chosen - top.values).abs() <= MOE_NEAR_TIE).all())
    want_w = chosen / chosen.sum(dim=-1, keepdim=True) if case["normalize"] else chosen
    weights_err = float((ours_w - want_w).abs().max())
    weights_ok = bool(((ours_w - want_w).abs() <= 1e-5 * (1 + want_w.abs())).all())
    # Dense per token over the experts we chose (checked above against torch's own top-k).
    gate = torch.einsum("tjih,th->tji", w_gate_up[ids, :I], h)
    up = torch.einsum("tjih,th->tji", w_gate_up[ids, I:], h)
    act = torch.nn.functional.silu(gate) * up  # [T, k, I]
    routed = torch.einsum("tj,tjhi,tji->th", want_w, w_down[ids], act)
    scale = torch.einsum("tj,tjhi,tji->th", want_w.abs(), w_down[ids].abs(), act.abs())
    exact, floor = x + routed, 1 + x.abs()
    if case["shared"]:
        shared = torch.from_numpy(load("shared").astype(np.float64)).to(device)
        gate_logit = torch.from_numpy(load("shared_gate").astype(np.float64)).to(device)
        exact = exact + torch.sigmoid(gate_logit) * shared
        floor = floor + shared.abs()
    ours = torch.from_numpy(load("out").astype(np.float64)).to(device)
    err = (ours - exact).abs()
    out_ok = bool((err <= MOE_ACT_ROUNDING * scale + MOE_F32 * floor).all())
    return dict(max_err=float(err.max()), ids_equal=bool((ours_ids == top.indices).all()), ids_ok=ids_ok,
                weights_err=weights_err,
                tolerance=f"ids = torch's top-k (near-ties {MOE_NEAR_TIE:g}); weights 1e-5; out {MOE_ACT_ROUNDING:g} x "
                          "sum w |act| |W_down|^T",
                ok=ids_ok and weights_ok and out_ok)


def check_dequant(case, load, device):
    exact = torch.from_numpy(step.dequantize(load("w"), case["format"])).to(device)
    ours = step.bf16_as_float(load("out"), device)
    err = (ours - exact).abs()
    bound = HALF_ULP["bfloat16"] * exact.abs() * (1 + 1e-6) + 1e-30
    rounded = exact.float().to(torch.bfloat16).double()  # what "bit for bit the reference rounded" promises
    return dict(max_err=float(err.max()), bf16_equal_fraction=float((ours == rounded).double().mean()),
                tolerance="a bf16 rounding of gguf-py's value", ok=bool((err <= bound).all()))


def check_delta_gates(case, load, device):
    f = lambda what: torch.from_numpy(load(what).astype(np.float64)).to(device)  # noqa: E731
    a, b, A_log, dt_bias = f("a"), f("b"), f("A_log"), f("dt_bias")
    if case["family"] == "gated_deltanet":  # transformers' Qwen3-Next: one decay per value head
        g = -A_log.exp() * torch.nn.functional.softplus(a + dt_bias)
    else:  # fla's KDA gate: per head and key channel, A per head over its K channels
        K = case["K"]
        T, HK = a.shape
        g = (-A_log.exp()[:, None] * torch.nn.functional.softplus((a + dt_bias).view(T, HK // K, K))).view(T, HK)
    beta = torch.sigmoid(b)
    err_g, err_b = (f("g") - g).abs(), (f("beta") - beta).abs()
    ok = bool((err_g <= GATES_TOLERANCE * (1 + g.abs())).all() and (err_b <= GATES_TOLERANCE * (1 + beta.abs())).all())
    return dict(max_err=max(float(err_g.max()), float(err_b.max())),
                tolerance=f"{GATES_TOLERANCE:g} x (1 + abs(exact))", ok=ok)


def elementwise_exact(case, load, device):
    op, dtype = case["op"], case["dtype"]
    a = lambda what: as_float(load(what), dtype, device)  # noqa: E731
    if op == "mul":
        return a("a") * a("b")
    if op == "sigmoid_gate":
        return a("a") * torch.sigmoid(a("gate"))
    if op == "add_scaled":
        return a("a") + case["alpha"] * a("b")
    if op == "scale_softcap":
        y = as_float(load("x"), "float32", device) * case["scale"]
        return case["cap"] * torch.tanh(y / case["cap"]) if case["cap"] > 0 else y
    if op == "query_temperature":
        pos = torch.from_numpy(load("positions").astype(np.float64)).to(device)
        factor = 1 + case["beta"] * torch.log1p(torch.floor(pos / case["interval"]))
        return a("q") * factor[:, None]
    if op == "transpose":
        return a("src").T
    if op == "row_copy":  # dst[dst_rows[r]] = src[src_rows[r]] over dst's rows before the copy
        src, dst = a("src"), a("dst_before").clone()
        src_rows = torch.from_numpy(load("src_rows").astype(np.int64)).to(device)
        dst_rows = torch.from_numpy(load("dst_rows").astype(np.int64)).to(device)
        dst[dst_rows] = src[src_rows]
        return dst
    raise KeyError(op)


def check_elementwise(case, load, device):
    exact = elementwise_exact(case, load, device)
    ours = as_float(load("out"), case["out_dtype"], device)
    err = (ours - exact).abs()
    if case["op"] in ("transpose", "row_copy"):
        return dict(max_err=float(err.max()), tolerance="exact", ok=bool((err == 0).all()))
    half_ulp = HALF_ULP[case["out_dtype"]]
    bound = (half_ulp * (1 + 1e-5) + F32_TOLERANCE) * exact.abs() + F32_TOLERANCE
    return dict(max_err=float(err.max()), tolerance=f"half an {case['out_dtype']} ulp + {F32_TOLERANCE:g} x (1 + abs)",
                ok=bool((err <= bound).all()))


CHECKS = {"moe": check_moe, "dequant": check_dequant, "delta_gates": check_delta_gates,
          "elementwise": check_elementwise, **runner.CHECKS}


def check_case(case, load, device):
    return step.check_case(case, load, device, CHECKS)


def print_rows(rows):
    step.print_rows(rows, "the GPU runner's newer kernels vs independent references (the MoE densely per token, "
                          "gguf-py's block decoders, transformers' / fla's gate formulas, torch's element-wise ops, "
                          "fla's RWKV-7 and transformers' gpt-oss formulas, torch's indexing and stable sort)")
