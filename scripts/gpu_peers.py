"""The GPU peers beside our CUDA table, in the same run on the same GPU (scripts/gpu_check.sh calls this).

Reads the JSON of `attnzoo bench kernels --device cuda --json`, times PyTorch's SDPA backends (flash = FA2,
cuDNN, memory-efficient) on every one of its prefill shapes and (flash, cuDNN) on its decode shapes with CUDA
events, and the bf16 GEMM rate of cuBLAS (torch.matmul, 8192^3) as the device's measured matrix peak; prints
markdown tables of ratios (prefill against the GEMM peak, decode against the device's copy bandwidth) and
writes them with the raw figures as JSON. torch has no paged decode: its rows read a contiguous bf16 cache of
the same size, which favours it. Gated DeltaNet's one-token decode is timed beside fla's
fused_recurrent_gated_delta_rule (its Triton kernel), found on sys.path or in the bundle's fla/ (gpu_bundle.sh
carries the pure-Python package from .venv).

    python3 scripts/gpu_peers.py ours.json OUT_DIR
"""
import json
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_cuda(fn, warmup=3, reps=20):
    for _ in range(warmup):
        fn()
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    marks[0].record()
    for i in range(reps):
        fn()
        marks[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(marks[i].elapsed_time(marks[i + 1]) * 1e-3 for i in range(reps))


def gemm_tflops(n=8192):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return 2 * n**3 / time_cuda(lambda: a @ b) * 1e-12


def sdpa_seconds(case, backend):
    B, T, Hq, Hkv, D = (case[k] for k in ("B", "T", "Hq", "Hkv", "D"))
    # [B, T, H, D] as our kernels take it, viewed as SDPA's [B, H, T, D].
    q = torch.randn(B, T, Hq, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    k = torch.randn(B, T, Hkv, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    v = torch.randn(B, T, Hkv, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    try:
        with sdpa_kernel(backend):
            return time_cuda(lambda: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=case["causal"], enable_gqa=True))
    except RuntimeError as e:  # a backend that does not take the shape says so instead of timing
        print(f"  {backend.name}: {str(e).splitlines()[0]}", file=sys.stderr)
        return None


def sdpa_decode_seconds(case, backend):
    B, T, Hq, Hkv, D = (case[k] for k in ("B", "context", "Hq", "Hkv", "D"))
    q = torch.randn(B, 1, Hq, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    k = torch.randn(B, T, Hkv, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    v = torch.randn(B, T, Hkv, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    try:
        with sdpa_kernel(backend):
            return time_cuda(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    except RuntimeError as e:
        print(f"  {backend.name}: {str(e).splitlines()[0]}", file=sys.stderr)
        return None
    finally:
        del q, k, v
        torch.cuda.empty_cache()


def fla_gated_delta_decode_seconds(case):
    try:
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
    except Exception as e:  # noqa: BLE001 (any import failure: the row says why and has no peer)
        print(f"  fla: {type(e).__name__}: {e}", file=sys.stderr)
        return None
    B, H, K, V = (case[k] for k in ("B", "H", "K", "V"))
    q = torch.randn(B, 1, H, K, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, 1, H, K, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(B, 1, H, V, device="cuda", dtype=torch.bfloat16)
    g = torch.full((B, 1, H), -0.05, device="cuda", dtype=torch.float32)
    beta = torch.full((B, 1, H), 0.5, device="cuda", dtype=torch.bfloat16)
    h0 = torch.zeros(B, H, K, V, device="cuda", dtype=torch.float32)
    try:
        return time_cuda(lambda: fused_recurrent_gated_delta_rule(
            q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True))
    except Exception as e:  # noqa: BLE001
        print(f"  fla fused_recurrent_gated_delta_rule: {type(e).__name__}: {str(e).splitlines()[0]}", file=sys.stderr)
        return None


def main():
    ours_path, out_dir = sys.argv[1], sys.argv[2]
    with open(ours_path) as f:
        ours = json.load(f)
    peak = gemm_tflops()
    rows = []
    for case in ours["prefill"]:
        flops = case["tflops"] * case["median_s"]  # TFLOP of the case, as our table counted it
        row = {"case": case, "ours_tflops": case["tflops"], "peers": {}}
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                              ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
            s = sdpa_seconds(case, backend)
            row["peers"][name] = None if s is None else flops / s
        rows.append(row)
        torch.cuda.empty_cache()

    decode_rows, torch_decode = [], {}
    for case in ours.get("decode", []):
        key = (case["B"], case["context"], case["Hq"], case["Hkv"], case["D"])
        if key not in torch_decode:  # torch's figure does not depend on our block size or cache format
            bf16_bytes = 2 * case["B"] * case["context"] * case["Hkv"] * case["D"] * 2
            torch_decode[key] = {}
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                s = sdpa_decode_seconds(case, backend)
                torch_decode[key][name] = None if s is None else bf16_bytes / s * 1e-9
        decode_rows.append({"case": case, "ours_gbps": case["gbps"], "peers": torch_decode[key]})

    state_rows = []
    for case in ours.get("gated_delta_decode", []):
        s = fla_gated_delta_decode_seconds(case)
        state_rows.append({"case": case, "ours_gbps": case["gbps"], "ours_s": case["median_s"], "fla_s": s,
                           "fla_gbps": None if s is None else case["state_bytes"] / s * 1e-9})

    def ratio(a, b):
        return f"{a / b:.2f}x" if a and b else "-"

    lines = [f"GPU: {torch.cuda.get_device_name()} (torch {torch.__version__}); cuBLAS bf16 GEMM 8192^3: "
             f"{peak:.0f} TFLOP/s; device copy (ours): {ours['copy_gbps']:.0f} GB/s", "",
             "| B | T | Hq/Hkv | D | mask | ours TFLOP/s | torch flash | cuDNN | ours / flash | ours / cuDNN | ours / GEMM peak |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        c, p = r["case"], r["peers"]
        fmt = lambda x: f"{x:.0f}" if x else "-"
        lines.append(f"| {c['B']} | {c['T']} | {c['Hq']}/{c['Hkv']} | {c['D']} | {'causal' if c['causal'] else 'none'} "
                     f"| {r['ours_tflops']:.0f} | {fmt(p['flash'])} | {fmt(p['cudnn'])} | {ratio(r['ours_tflops'], p['flash'])} "
                     f"| {ratio(r['ours_tflops'], p['cudnn'])} | {r['ours_tflops'] / peak:.0%} |")
    if decode_rows:
        lines += ["", "| B | context | Hq/Hkv | D | block | cache | ours GB/s | torch flash | cuDNN | ours / copy | ours / cuDNN |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in decode_rows:
            c, p = r["case"], r["peers"]
            fmt = lambda x: f"{x:.0f}" if x else "-"
            lines.append(f"| {c['B']} | {c['context']} | {c['Hq']}/{c['Hkv']} | {c['D']} | {c['block_size']} | "
                         f"{c['kv_dtype']} | {r['ours_gbps']:.0f} | {fmt(p['flash'])} | {fmt(p['cudnn'])} | "
                         f"{r['ours_gbps'] / ours['copy_gbps']:.0%} | {ratio(r['ours_gbps'], p['cudnn'])} |")
    if state_rows:
        lines += ["", "| gated delta decode B | H | K | V | ours us | fla us | ours GB/s | fla GB/s | ours / copy | fla time / ours |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in state_rows:
            c = r["case"]
            fla_us = f"{r['fla_s'] * 1e6:.0f}" if r["fla_s"] else "-"
            fla_gbps = f"{r['fla_gbps']:.0f}" if r["fla_gbps"] else "-"
            lines.append(f"| {c['B']} | {c['H']} | {c['K']} | {c['V']} | {r['ours_s'] * 1e6:.0f} | {fla_us} | "
                         f"{r['ours_gbps']:.0f} | {fla_gbps} | {r['ours_gbps'] / ours['copy_gbps']:.0%} | "
                         f"{ratio(r['fla_s'], r['ours_s'])} |")
    table = "\n".join(lines)
    print(table)
    with open(f"{out_dir}/gpu_peers.md", "w") as f:
        f.write(table + "\n")
    with open(f"{out_dir}/gpu_peers.json", "w") as f:
        json.dump({"gemm_tflops": peak, "ours": ours, "rows": rows, "decode_rows": decode_rows,
                   "gated_delta_decode_rows": state_rows}, f, indent=1)


if __name__ == "__main__":
    main()
