"""A model step's kernels from `attnzoo bench kernels --write-cases` against independent references in torch and
numpy (check_vs_torch.py calls this for the manifest's gemv / kv_write / embedding / grouped_routing / sampling
cases; it needs torch and numpy, and gguf-py's block decoders, which the GPU bundle carries from .venv).

- gemv: y = x w^T with w decoded from its GGUF bytes by gguf-py (llama.cpp's own Python decoders), in float64.
  Our f32 sums may round differently: |ours - exact| <= 2e-5 x (|x| |w|^T) per element, the size of f32
  accumulation over K terms, far below one wrong weight's (a quant step times its x, ~1e-3 of that sum).
- embedding: the looked-up rows of the gguf-py-decoded table times the scale; the kernel promises the CPU's f32
  operations, so only an ulp is allowed (1e-6 relative).
- kv_write: the cache after the write against the cache before: every slot not in slot_mapping (and every token
  with slot -1) untouched byte for byte; a bf16 cache holds the new rows exactly; an int8 / fp8 row's scale is its
  amax / 127 or / 448 (kv_quant.cc) and its dequantized values within half a quantization step of the input (int8:
  scale / 2; e4m3: 2^-4 relative, or half its smallest subnormal step).
- grouped_routing: DeepSeek's routing as its reference code writes it (scores, group scores, masked top-k with
  torch.topk; weights normalized and scaled): expert ids in the same order exactly, weights within 1e-5.
- sampling: greedy rows the argmax exactly; seeded rows a token inside the row's top-k / top-p set, computed here
  from the logits (a rounding margin of 1e-5 on the nucleus' mass).
"""
import importlib
import importlib.util
import sys
import types

import numpy as np
import torch

STEP_KINDS = ("gemv", "kv_write", "embedding", "grouped_routing", "sampling")
GEMV_TOLERANCE = 2e-5
EMBEDDING_TOLERANCE = 1e-6
ROUTING_TOLERANCE = 1e-5
KV_QUANT_MAX = {"int8": 127.0, "float8_e4m3fn": 448.0}


def gguf_blocks():
    """gguf-py's quants and constants modules, loaded without the package's __init__ (which imports yaml for its
    metadata helpers, absent from the GPU image); raises ModuleNotFoundError when gguf is not installed."""
    spec = importlib.util.find_spec("gguf")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'gguf' (gguf-py's block decoders: pip install gguf)")
    if "_gguf_blocks" not in sys.modules:
        package = types.ModuleType("_gguf_blocks")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["_gguf_blocks"] = package
    return importlib.import_module("_gguf_blocks.quants"), importlib.import_module("_gguf_blocks.constants")


def dequantize(blocks, fmt):
    """[rows, row_bytes] uint8 GGUF blocks of `fmt` ("Q4_K") as float64 [rows, cols], by gguf-py."""
    quants, constants = gguf_blocks()
    return quants.dequantize(blocks, constants.GGMLQuantizationType[fmt]).astype(np.float64)


def check_gemv(case, load, device):
    w = torch.from_numpy(dequantize(load("w"), case["format"])).to(device)
    x = torch.from_numpy(load("x")).to(device).double()
    ours = torch.from_numpy(load("out")).to(device).double()
    exact = x @ w.T
    bound = GEMV_TOLERANCE * (x.abs() @ w.abs().T) + 1e-6
    err = (ours - exact).abs()
    return dict(max_err=float(err.max()), tolerance=f"{GEMV_TOLERANCE:g} x (abs(x) abs(w)^T)",
                ok=bool((err <= bound).all()))


def check_embedding(case, load, device):
    table = torch.from_numpy(dequantize(load("table"), case["format"])).to(device)
    ids = torch.from_numpy(load("ids").astype(np.int64)).to(device)
    exact = table[ids] * np.float32(case["scale"])
    ours = torch.from_numpy(load("out")).to(device).double()
    err = (ours - exact).abs()
    return dict(max_err=float(err.max()), tolerance=f"{EMBEDDING_TOLERANCE:g} x (1 + abs(exact))",
                ok=bool((err <= EMBEDDING_TOLERANCE * (1 + exact.abs())).all()))


def bf16_as_float(array, device):
    return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16).to(device).double()


def cache_values(array, kv_dtype, device):
    if kv_dtype == "bfloat16":
        return bf16_as_float(array, device)
    if kv_dtype == "float8_e4m3fn":
        return torch.from_numpy(array.copy()).view(torch.float8_e4m3fn).to(device).double()
    return torch.from_numpy(array.astype(np.float64)).to(device)


def check_kv_write(case, load, device):
    kv_dtype, quantized = case["kv_dtype"], case["kv_dtype"] in KV_QUANT_MAX
    slots = load("slot_mapping").astype(np.int64)
    worst, ok = 0.0, True
    for which in ("k", "v"):
        new = bf16_as_float(load(which), device)  # [T, H, D]
        before, after = load(f"{which}_cache_before"), load(f"{which}_cache")
        H, D = before.shape[2], before.shape[3]
        before_rows, after_rows = before.reshape(-1, H, D), after.reshape(-1, H, D)
        written = np.zeros(before_rows.shape[0], dtype=bool)
        written[slots[slots >= 0]] = True
        ok &= bool((before_rows[~written].view(np.uint8) == after_rows[~written].view(np.uint8)).all())
        if quantized:
            scale_before = load(f"{which}_scale_before").reshape(-1, H)
            scale = load(f"{which}_scale").reshape(-1, H)
            ok &= bool((scale_before[~written] == scale[~written]).all())
        t = np.nonzero(slots >= 0)[0]
        x = new[torch.from_numpy(t).to(device)]  # [n, H, D]: the rows that went to their slots
        stored = cache_values(after_rows[slots[t]], kv_dtype, device)
        if not quantized:
            err = (stored - x).abs()
            worst = max(worst, float(err.max()))
            ok &= bool((err == 0).all())  # bf16 rows into a bf16 cache: copied
            continue
        s = torch.from_numpy(scale[slots[t]].astype(np.float64)).to(device)  # [n, H]
        want = (x.abs().amax(-1) / KV_QUANT_MAX[kv_dtype]).float().double()  # f32 amax / max, as kv_quant.cc
        ok &= bool(((s - want).abs() <= 1e-6 * want).all())
        deq = stored * s[..., None]
        err = (deq - x).abs()
        worst = max(worst, float(err.max()))
        if kv_dtype == "int8":
            bound = 0.5 * s[..., None] * (1 + 1e-5) + 1e-30
        else:  # e4m3: 3 mantissa bits (half an ulp 2^-4 relative); subnormal steps of 2^-9 below 2^-6
            bound = torch.maximum(x.abs() * 2.0 ** -4, s[..., None] * 2.0 ** -10) * (1 + 1e-5) + 1e-30
        ok &= bool((err <= bound).all())
    tolerance = "exact" if not quantized else "half a quantization step; scale = amax / " + (
        "127" if kv_dtype == "int8" else "448")
    return dict(max_err=worst, tolerance=tolerance + "; other slots untouched", ok=ok)


def deepseek_routing(case, logits, bias):
    """DeepSeek's MoEGate (V2 / V3 modeling code) in float64: the chosen ids [T, top_k] and their weights."""
    T, E = logits.shape
    G = case["n_group"]
    scores = logits.sigmoid() if case["scoring"] == "sigmoid" else logits.softmax(dim=-1)
    choice = scores + bias[None]
    grouped = choice.view(T, G, E // G)
    if case["group_score"] == "max":
        group_scores = grouped.amax(dim=-1)
    else:
        group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)
    group_idx = group_scores.topk(case["topk_group"], dim=-1, sorted=False).indices
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1.0)
    expert_mask = group_mask[:, :, None].expand(T, G, E // G).reshape(T, E)
    masked = choice.masked_fill(expert_mask == 0, float("-inf"))
    ids = masked.topk(case["top_k"], dim=-1, sorted=True).indices
    weights = scores.gather(1, ids)
    if case["norm_topk_prob"]:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return ids, weights * case["routed_scaling_factor"]


def check_grouped_routing(case, load, device):
    logits = torch.from_numpy(load("logits")).to(device).double()
    bias = torch.from_numpy(load("bias")).to(device).double()
    ids, weights = deepseek_routing(case, logits, bias)
    ours_ids = torch.from_numpy(load("experts").astype(np.int64)).to(device)
    ours_w = torch.from_numpy(load("weights")).to(device).double()
    same_ids = bool((ours_ids == ids).all())
    err = float((ours_w - weights).abs().max())
    return dict(max_err=err, ids_equal=same_ids, tolerance=f"ids exact, weights {ROUTING_TOLERANCE:g} x (1 + w)",
                ok=same_ids and bool(((ours_w - weights).abs() <= ROUTING_TOLERANCE * (1 + weights.abs())).all()))


def allowed_tokens(logits, temperature, top_k, top_p):
    """The tokens a seeded draw may return: HF's top-k (ties with the k-th kept) then the smallest prefix of the
    remaining sorted distribution with mass >= top_p, a margin of 1e-5 on that mass for rounding."""
    x = logits.double() / temperature
    keep = torch.ones_like(x, dtype=torch.bool)
    if 0 < top_k < x.numel():
        keep &= x >= x.topk(top_k).values[-1]
    if top_p < 1:
        order = torch.argsort(x.masked_fill(~keep, float("-inf")), descending=True)
        p = torch.exp(x[order] - x.max()).masked_fill(~keep[order], 0.0)
        before = torch.cumsum(p, 0) - p  # mass strictly ahead of each token
        nucleus = torch.zeros_like(keep)
        nucleus[order] = (before < top_p * p.sum() * (1 + 1e-5)) & keep[order]
        nucleus[order[0]] = True
        keep &= nucleus
    return keep


def check_sampling(case, load, device):
    logits = torch.from_numpy(load("logits")).to(device)
    ids = load("ids")
    bad = []
    for b, row in enumerate(case["rows"]):
        token = int(ids[b])
        if row["temperature"] == 0:
            good = token == int(torch.argmax(logits[b]))
        else:
            good = 0 <= token < logits.shape[1] and bool(
                allowed_tokens(logits[b], row["temperature"], row["top_k"], row["top_p"])[token])
        if not good:
            bad.append(b)
    return dict(max_err=float(len(bad)), bad_rows=bad, tolerance="greedy: the argmax; seeded: inside top-k / top-p",
                ok=not bad)


CHECKS = {"gemv": check_gemv, "embedding": check_embedding, "kv_write": check_kv_write,
          "grouped_routing": check_grouped_routing, "sampling": check_sampling}


# `checks`: kind -> check(case, load, device), the row's fields (check_layers_vs_torch.py passes its own).
def check_case(case, load, device, checks=CHECKS):
    row = {"name": case["name"], "kind": case["kind"], "status": case["status"]}
    if case["status"] != "ok":
        row.update(error=case.get("error", ""), ok=False)
        return row
    try:
        row.update(checks[case["kind"]](case, load, device))
    except ModuleNotFoundError as e:  # no gguf-py: no reference, and a case without one is not a pass
        row.update(status=f"no reference ({e})", ok=False)
    return row


def print_rows(rows, title="a model step's kernels vs independent references (gguf-py's block decoders, "
                            "DeepSeek's routing code, the sampler's filters in torch)"):
    if not rows:
        return
    print()
    print(title)
    print("| case | kind | status | max abs err | tolerance | ok |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if r["status"] != "ok":
            print(f"| {r['name']} | {r['kind']} | {r['status']}: {r.get('error', '')} | | | NO |")
            continue
        print(f"| {r['name']} | {r['kind']} | ok | {r['max_err']:.2e} | {r['tolerance']} | "
              f"{'yes' if r['ok'] else 'NO'} |")
