#!/usr/bin/env python3
"""Our softmax and linear-family kernels' outputs against PyTorch on the device they ran on.

Reads what `attnzoo bench kernels --write-cases DIR --device D` wrote (manifest.json and .npy inputs and outputs),
recomputes every softmax case with attention written out in float64 torch on the same device, and beside it
torch's own scaled_dot_product_attention in the inputs' precision (an explicit mask and bias where the case needs
them), so the table shows how far our kernel and torch's each sit from the exact answer. The linear cases (Gated
DeltaNet, KDA, GLA, RWKV-7, the causal conv1d) go to check_linear_vs_torch.py beside this file: the float64
recurrence, and fla's functions where fla imports; a model step's kernels (quantized GEMV, paged KV write, embedding
gather, grouped routing, sampling) to check_step_vs_torch.py: gguf-py's block decoders, DeepSeek's routing code,
the sampler's filters; the GPU runner's newer kernels (MoE, GGUF blocks to bf16, the delta gates, the element-wise
and copy kernels) to check_layers_vs_torch.py: the MoE densely per token, gguf-py, transformers' / fla's formulas.
Needs torch and numpy (and gguf-py, which the GPU bundle carries), so it runs on the GPU
machine's image where our Python module cannot be carried.

    python3 scripts/check_vs_torch.py DIR [--json FILE]

Exit status 1 when a case is off by more than its tolerance or was refused by our entry; 0 otherwise.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_linear_vs_torch as linear  # noqa: E402 (beside this script, in the repo and in the GPU bundle)
import check_step_vs_torch as step  # noqa: E402
import check_layers_vs_torch as layers  # noqa: E402

# |ours - exact| <= tol * (1 + |exact|) per element. Inputs are the same rounded values on both sides, so the
# error is ours alone: f32 accumulation, the probabilities rounded to the input precision before the value
# product (what a tensor-core kernel does), and the output's own rounding (bf16: 2^-9 relative).
TOLERANCE = {"bfloat16": 2e-2, "float16": 5e-3, "float32": 5e-3}


def to_torch(array, dtype_name, device):
    """An .npy array as the manifest's dtype (bf16 and e4m3 travel as raw bits)."""
    if dtype_name == "bfloat16":
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16).to(device)
    if dtype_name == "float8_e4m3fn":
        return torch.from_numpy(array.copy()).view(torch.float8_e4m3fn).to(device)
    return torch.from_numpy(array.copy()).to(device)


def exact_attention(q, k, v, case, scale=None):
    """One sequence in float64: q [Tq, Hq, D], k / v [Tk, Hkv, D]; queries bottom-right aligned."""
    Tq, Hq, D = q.shape
    Tk, Hkv = k.shape[0], k.shape[1]
    q, k, v = q.double(), k.double(), v.double()
    k = k.repeat_interleave(Hq // Hkv, dim=1)
    v = v.repeat_interleave(Hq // Hkv, dim=1)
    s = torch.einsum("ihd,jhd->hij", q, k) * (D ** -0.5 if scale is None else scale)
    if case["softcap"] > 0:
        s = case["softcap"] * torch.tanh(s / case["softcap"])
    qpos = torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq)
    kpos = torch.arange(Tk, device=q.device)[None, :]
    if case["alibi_slopes"] is not None:
        slopes = torch.tensor(case["alibi_slopes"], dtype=torch.float64, device=q.device)
        s = s - slopes[:, None, None] * (qpos - kpos).abs().double()
    visible = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device)
    if case["causal"]:
        visible &= kpos <= qpos
    if case["window"] > 0:
        visible &= kpos > qpos - case["window"]
    s = s.masked_fill(~visible, float("-inf"))
    if case["sinks"] is not None:
        sink = torch.tensor(case["sinks"], dtype=torch.float64, device=q.device)[:, None, None].expand(Hq, Tq, 1)
        s = torch.cat([s, sink], dim=-1)
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(s - m)
    denom = p.sum(dim=-1, keepdim=True)
    if case["sinks"] is not None:
        p = p[..., :-1]
    p = torch.where(denom > 0, p / torch.where(denom > 0, denom, torch.ones_like(denom)), torch.zeros_like(p))
    return torch.einsum("hij,jhd->ihd", p, v), visible


def sdpa_attention(q, k, v, case, visible):
    """torch's fused attention in the inputs' precision, or None where it cannot express the case."""
    if case["softcap"] > 0 or case["sinks"] is not None or not bool(visible.any(dim=-1).all()):
        return None
    Tq, Hq, _ = q.shape
    Tk, Hkv = k.shape[0], k.shape[1]
    dtype = q.dtype if q.dtype in (torch.bfloat16, torch.float16) else torch.float32
    qh, kh, vh = (x.to(dtype).transpose(0, 1)[None] for x in (q, k, v))
    kh = kh.repeat_interleave(Hq // Hkv, dim=1)
    vh = vh.repeat_interleave(Hq // Hkv, dim=1)
    if case["alibi_slopes"] is None and not case["causal"] and case["window"] == 0:
        out = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh)
    elif case["alibi_slopes"] is None and case["causal"] and case["window"] == 0 and Tq == Tk:
        out = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
    else:
        bias = torch.zeros(Hq, Tq, Tk, dtype=torch.float32, device=q.device)
        if case["alibi_slopes"] is not None:
            qpos = torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq)
            kpos = torch.arange(Tk, device=q.device)[None, :]
            slopes = torch.tensor(case["alibi_slopes"], dtype=torch.float32, device=q.device)
            bias = bias - slopes[:, None, None] * (qpos - kpos).abs().float()
        bias = bias.masked_fill(~visible, float("-inf")).to(dtype)
        out = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=bias[None])
    return out[0].transpose(0, 1)


def prefill_sequences(case, load, device):
    q, k, v = (to_torch(load(name), case["dtype"], device) for name in ("q", "k", "v"))
    cu_q, cu_k = case["cu_seqlens_q"], case["cu_seqlens_k"]
    for s in range(len(cu_q) - 1):
        yield (slice(cu_q[s], cu_q[s + 1]), q[cu_q[s]:cu_q[s + 1]], k[cu_k[s]:cu_k[s + 1]], v[cu_k[s]:cu_k[s + 1]])


def decode_sequences(case, load, device):
    q = to_torch(load("q"), case["dtype"], device)
    table = load("block_table")
    B, Tq = q.shape[0], q.shape[1]
    bs = case["block_size"]
    caches = []
    for which in ("k", "v"):
        cache = to_torch(load(which + "_cache"), case["kv_dtype"], device).float()
        if case["kv_dtype"] in ("int8", "float8_e4m3fn"):
            cache = cache * to_torch(load(which + "_scale"), "float32", device)[..., None]
        caches.append(cache)
    for b in range(B):
        n = case["cache_seqlens"][b]
        j = np.arange(n)
        blocks = torch.from_numpy(table[b, j // bs].astype(np.int64)).to(device)
        slots = torch.from_numpy((j % bs).astype(np.int64)).to(device)
        yield ((b, slice(0, Tq)), q[b], caches[0][blocks, slots], caches[1][blocks, slots])


def check_case(case, directory, device):
    row = {"name": case["name"], "status": case["status"]}
    if case["status"] != "ok":
        row["error"] = case.get("error", "")
        row["ok"] = False
        return row

    def load(what):
        return np.load(os.path.join(directory, f"{case['name']}_{what}.npy"))

    ours = to_torch(load("out"), case["out_dtype"], device).double()
    sequences = prefill_sequences if case["kind"] == "prefill" else decode_sequences
    worst, worst_sdpa, worst_excess = 0.0, None, 0.0
    tol = TOLERANCE[case["dtype"]]
    for where, q, k, v in sequences(case, load, device):
        exact, visible = exact_attention(q, k, v, case)
        got = ours[where]
        err = (got - exact).abs()
        worst = max(worst, float(err.max()))
        worst_excess = max(worst_excess, float((err / (tol * (1 + exact.abs()))).max()))
        theirs = sdpa_attention(q, k, v, case, visible)
        if theirs is not None:
            e = float((theirs.double() - exact).abs().max())
            worst_sdpa = e if worst_sdpa is None else max(worst_sdpa, e)
    row.update(max_err=worst, sdpa_max_err=worst_sdpa, tolerance=tol, ok=bool(worst_excess <= 1.0))
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="what `attnzoo bench kernels --write-cases DIR` wrote")
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args()
    with open(os.path.join(args.dir, "manifest.json")) as f:
        manifest = json.load(f)
    device = torch.device(manifest["device"])
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit(f"check_vs_torch: the cases ran on {manifest['device']}, and this torch sees no CUDA device")
    softmax_cases = [c for c in manifest["cases"] if c["kind"] in ("prefill", "decode")]
    linear_cases = [c for c in manifest["cases"] if c["kind"] == "linear"]
    step_cases = [c for c in manifest["cases"] if c["kind"] in step.STEP_KINDS]
    layer_cases = [c for c in manifest["cases"] if c["kind"] in layers.LAYER_KINDS]
    known = softmax_cases + linear_cases + step_cases + layer_cases
    unknown = [c["name"] for c in manifest["cases"] if c not in known]
    if unknown:
        sys.exit(f"check_vs_torch: no check for the cases {', '.join(unknown)} (a newer attnzoo than this script?)")
    rows = [check_case(case, args.dir, device) for case in softmax_cases]
    fla = linear.fla_import() if linear_cases else None
    linear_rows = []
    for case in linear_cases:
        def load(what, case=case):
            return np.load(os.path.join(args.dir, f"{case['name']}_{what}.npy"))
        linear_rows.append(linear.check_case(case, load, to_torch, device, fla))
    step_rows = []
    for case in step_cases:
        def load(what, case=case):
            return np.load(os.path.join(args.dir, f"{case['name']}_{what}.npy"))
        step_rows.append(step.check_case(case, load, device))
    layer_rows = []
    for case in layer_cases:
        def load(what, case=case):
            return np.load(os.path.join(args.dir, f"{case['name']}_{what}.npy"))
        layer_rows.append(layers.check_case(case, load, device))
    print(f"our kernels on {manifest['device']} vs float64 torch there (torch {torch.__version__}); "
          "SDPA: torch's fused attention in the inputs' precision, for scale")
    print("| case | status | max abs err | SDPA's max abs err | tolerance | ok |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if r["status"] != "ok":
            print(f"| {r['name']} | {r['status']}: {r['error']} | | | | no |")
            continue
        sdpa = "n/a" if r["sdpa_max_err"] is None else f"{r['sdpa_max_err']:.2e}"
        print(f"| {r['name']} | ok | {r['max_err']:.2e} | {sdpa} | {r['tolerance']:g} x (1 + abs(exact)) | "
              f"{'yes' if r['ok'] else 'NO'} |")
    linear.print_rows(linear_rows)
    step.print_rows(step_rows)
    layers.print_rows(layer_rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": manifest["device"], "torch": torch.__version__, "rows": rows,
                       "linear_rows": linear_rows, "step_rows": step_rows,
                       "layer_rows": layer_rows, "fla": fla if isinstance(fla, str) or fla is None else (fla["kernels"] or "imported")},
                      f, indent=1)
    failed = [r["name"] for r in rows + linear_rows + step_rows + layer_rows if not r["ok"]]
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
