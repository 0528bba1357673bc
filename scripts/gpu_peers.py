"""The GPU peers beside our CUDA table, in the same run on the same GPU (scripts/gpu_check.sh calls this).

Reads the JSON of `attnzoo bench kernels --device cuda --json`, times PyTorch's SDPA backends (flash = FA2,
cuDNN, memory-efficient) on every one of its prefill shapes and (flash, cuDNN) on its decode shapes with CUDA
events, and the bf16 GEMM rate of cuBLAS (torch.matmul, 8192^3) as the device's measured matrix peak; prints
markdown tables of ratios (prefill against the GEMM peak, decode against the device's copy bandwidth) and
writes them with the raw figures as JSON. torch has no paged decode: its rows read a contiguous bf16 cache of
the same size, which favours it.

The linear family (issue 26) is timed beside fla's Triton kernels, found on sys.path or in the bundle's fla/
(gpu_bundle.sh carries the pure-Python package from .venv): the one-token decode rows beside fla's fused
recurrent GDN / KDA / GLA / simple GLA / retention / RWKV-7 and its causal_conv1d_update, Mamba-2 and Mamba beside
mamba_ssm's selective_state_update where it is installed, else torch's eager reference math; the chunked prefill
rows beside fla's chunk_gated_delta_rule / chunk_kda / chunk_simple_gla / chunk_gla / chunk_rwkv7 (and our RWKV-7
recurrent prefill row beside its fused_recurrent_rwkv7), and Mamba-2 SSD beside mamba_ssm's
mamba_chunk_scan_combined or else fla's chunk_simple_gla (SSD is simple GLA with q = C, k = B, v = dt x,
g = A dt). Every peer is guarded: a missing function, a failure or a timeout is reported in its row,
never fatal. Triton compiles (and autotunes) each kernel on its first call, so the step is time-bounded:
--budget-s for the whole run (peers past it are skipped and say so), at most PEER_LIMIT_S per peer, and the JSON
and markdown are rewritten after every section, so what was measured survives a kill.

    python3 scripts/gpu_peers.py ours.json OUT_DIR [--budget-s SECONDS]
"""
import argparse
import contextlib
import json
import signal
import statistics
import sys
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


# The device every tensor is made on, and the GEMM's size: python/tests/test_gpu_peers.py runs the whole script on
# the CPU with these lowered and time_cuda replaced, so its logic is tested before the GPU sees it.
DEVICE = "cuda"
GEMM_N = 8192


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


def gemm_tflops(n=None):
    n = n or GEMM_N
    a = torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16)
    return 2 * n**3 / time_cuda(lambda: a @ b) * 1e-12


def linear_seconds(dims):
    """torch's y = x W^T (F.linear, cuBLAS) at a projection GEMM row's shape, bf16 as our rows run it."""
    x = torch.randn(dims["M"], dims["K"], device=DEVICE, dtype=torch.bfloat16)
    w = torch.randn(dims["N"], dims["K"], device=DEVICE, dtype=torch.bfloat16)
    return time_cuda(lambda: torch.nn.functional.linear(x, w))


def sdpa_seconds(case, backend):
    B, T, Hq, Hkv, D = (case[k] for k in ("B", "T", "Hq", "Hkv", "D"))
    # [B, T, H, D] as our kernels take it, viewed as SDPA's [B, H, T, D].
    q = torch.randn(B, T, Hq, D, device=DEVICE, dtype=torch.bfloat16).transpose(1, 2)
    k = torch.randn(B, T, Hkv, D, device=DEVICE, dtype=torch.bfloat16).transpose(1, 2)
    v = torch.randn(B, T, Hkv, D, device=DEVICE, dtype=torch.bfloat16).transpose(1, 2)
    try:
        with sdpa_kernel(backend):
            return time_cuda(lambda: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=case["causal"], enable_gqa=True))
    except RuntimeError as e:  # a backend that does not take the shape says so instead of timing
        print(f"  {backend.name}: {str(e).splitlines()[0]}", file=sys.stderr)
        return None


def sdpa_decode_seconds(case, backend):
    B, T, Hq, Hkv, D = (case[k] for k in ("B", "context", "Hq", "Hkv", "D"))
    q = torch.randn(B, 1, Hq, D, device=DEVICE, dtype=torch.bfloat16).transpose(1, 2)
    k = torch.randn(B, T, Hkv, D, device=DEVICE, dtype=torch.bfloat16).transpose(1, 2)
    v = torch.randn(B, T, Hkv, D, device=DEVICE, dtype=torch.bfloat16).transpose(1, 2)
    try:
        with sdpa_kernel(backend):
            return time_cuda(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    except RuntimeError as e:
        print(f"  {backend.name}: {str(e).splitlines()[0]}", file=sys.stderr)
        return None
    finally:
        del q, k, v
        if DEVICE == "cuda":
            torch.cuda.empty_cache()


PEER_LIMIT_S = 60  # one peer's compile, autotune and timing; a Triton autotune of a chunk kernel takes tens of s


class PeerTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds):
    """Raises PeerTimeout in this (main) thread after `seconds`: a hung compile or a slow autotune ends its row
    instead of the run."""
    def on_alarm(signum, frame):
        raise PeerTimeout(f"stopped after {seconds:.0f} s (time limit)")
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.1))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Budget:
    def __init__(self, seconds):
        self.deadline = time.monotonic() + seconds

    def left(self):
        return self.deadline - time.monotonic()


def first_line(e):
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}"


def run_peer(budget, label, make):
    """(seconds, note) of one peer: make() builds the inputs and returns the call to time (or raises
    ImportError when the library is missing). Never raises."""
    left = budget.left()
    if left < 5:
        return None, "skipped: the peers' time budget is spent"
    try:
        with time_limit(min(PEER_LIMIT_S, left)):
            fn = make()
            s = time_cuda(fn)
        return s, None
    except Exception as e:  # noqa: BLE001 (a missing function, a failure, a timeout: the row says which)
        print(f"  {label}: {first_line(e)}", file=sys.stderr)
        return None, first_line(e)
    finally:
        if DEVICE == "cuda":
            torch.cuda.empty_cache()


def bf16(*shape):
    return torch.randn(*shape, device=DEVICE, dtype=torch.bfloat16)


def f32(value, *shape):
    return torch.full(shape, value, device=DEVICE, dtype=torch.float32)


def attention_like_inputs(d, T=1, channel_gate=False):
    """fla's decode / prefill inputs for the attention-like families: q, k [B, T, H, K], v [B, T, H, V], log
    decay -0.05 per head or per key channel (as our rows use), beta 0.5, f32 state [B, H, K, V]."""
    B, H, K, V = d["B"], d["H"], d["K"], d["V"]
    g = f32(-0.05, B, T, H, K) if channel_gate else f32(-0.05, B, T, H)
    beta = torch.full((B, T, H), 0.5, device=DEVICE, dtype=torch.bfloat16)
    return bf16(B, T, H, K), bf16(B, T, H, K), bf16(B, T, H, V), g, beta, torch.zeros(B, H, K, V, device=DEVICE)


def mamba_ssm_state_update():
    from mamba_ssm.ops.triton.selective_state_update import selective_state_update
    return selective_state_update


def decode_peer(kernel, d):
    """(peer name, make) for one of our state_decode rows."""
    if kernel.endswith("_pool"):  # our pool-addressed step beside the peer's dense one: the same states moved
        name, make = decode_peer(kernel[:-len("_pool")], {k: v for k, v in d.items() if k != "slots"})
        return f"{name} (dense)", make
    if kernel in ("gated_delta_rule", "kda", "gla", "simple_gla", "retention"):
        def make():
            q, k, v, g, beta, h0 = attention_like_inputs(d, channel_gate=kernel in ("kda", "gla"))
            if kernel == "gated_delta_rule":
                from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as f
                return lambda: f(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                                 use_qk_l2norm_in_kernel=True)
            if kernel == "kda":
                from fla.ops.kda import fused_recurrent_kda as f
                return lambda: f(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                                 use_qk_l2norm_in_kernel=True)
            if kernel == "gla":
                from fla.ops.gla import fused_recurrent_gla as f
                return lambda: f(q, k, v, gk=g, initial_state=h0, output_final_state=True)
            if kernel == "simple_gla":
                from fla.ops.simple_gla import fused_recurrent_simple_gla as f
                return lambda: f(q, k, v, g=g, initial_state=h0, output_final_state=True)
            from fla.ops.retention import fused_recurrent_retention as f
            return lambda: f(q, k, v, initial_state=h0, output_final_state=True)
        return f"fla fused_recurrent_{kernel}", make
    if kernel == "conv":
        def make():
            from fla.modules.causal_conv1d import causal_conv1d_update as f
            B, D, W = d["B"], d["D"], d["W"]
            x, w, bias = bf16(B, D), bf16(D, W), bf16(D)
            cache = torch.zeros(B, D, W, device=DEVICE, dtype=torch.bfloat16)  # fla's cache keeps W inputs
            return lambda: f(x, cache, weight=w, bias=bias, activation="silu")
        return "fla causal_conv1d_update", make
    if kernel == "rwkv7":
        def make():
            from fla.ops.rwkv7 import fused_recurrent_rwkv7 as f
            B, H, K, V = d["B"], d["H"], d["K"], d["V"]
            # As our row: log decay -0.05, a = -1/8 and b = 1/8 on every channel (a bounded state), scale 1.
            r, k, v = bf16(B, 1, H, K), bf16(B, 1, H, K), bf16(B, 1, H, V)
            a = torch.full((B, 1, H, K), -0.125, device=DEVICE, dtype=torch.bfloat16)
            b = torch.full((B, 1, H, K), 0.125, device=DEVICE, dtype=torch.bfloat16)
            w, h0 = f32(-0.05, B, 1, H, K), torch.zeros(B, H, K, V, device=DEVICE)
            return lambda: f(r, w, k, v, a, b, scale=1.0, initial_state=h0, output_final_state=True)
        return "fla fused_recurrent_rwkv7", make
    if kernel in ("mamba2", "mamba"):
        try:
            ssu = mamba_ssm_state_update()
        except Exception:  # noqa: BLE001 (no mamba_ssm on the image: torch's eager math is the peer)
            return "torch eager (reference math)", lambda: ssm_decode_torch(kernel, d)
        return "mamba_ssm selective_state_update", lambda: ssm_decode_mamba_ssm(ssu, kernel, d)
    raise ValueError(f"no peer for {kernel}")


def ssm_decode_inputs(kernel, d):
    if kernel == "mamba2":
        B, H, P, N, G = d["B"], d["H"], d["P"], d["N"], d["G"]
        return dict(state=torch.zeros(B, H, P, N, device=DEVICE), x=bf16(B, H, P), dt=bf16(B, H),
                    A=f32(-1.0, H), B=bf16(B, G, N), C=bf16(B, G, N), D=f32(1.0, H), dt_bias=f32(-2.0, H))
    B, D, N = d["B"], d["D"], d["N"]
    return dict(state=torch.zeros(B, D, N, device=DEVICE), x=bf16(B, D), dt=bf16(B, D), A=f32(-1.0, D, N),
                B=bf16(B, N), C=bf16(B, N), D=f32(1.0, D), dt_bias=f32(-2.0, D), z=bf16(B, D))


def ssm_decode_torch(kernel, d):
    """The decode step as torch ops (what an engine without a fused kernel runs), state updated in place."""
    a = ssm_decode_inputs(kernel, d)
    state = a["state"]
    if kernel == "mamba2":
        group = d["H"] // d["G"]
        Bh = a["B"].float().repeat_interleave(group, dim=1)  # [B, H, N]
        Ch = a["C"].float().repeat_interleave(group, dim=1)

        def step():
            dt = torch.nn.functional.softplus(a["dt"].float() + a["dt_bias"])  # [B, H]
            x = a["x"].float()
            state.mul_(torch.exp(dt * a["A"])[..., None, None]).add_((dt[..., None] * x)[..., None] * Bh[:, :, None, :])
            return (state @ Ch[..., None])[..., 0] + a["D"][:, None] * x
        return step

    def step():
        dt = torch.nn.functional.softplus(a["dt"].float() + a["dt_bias"])  # [B, D]
        x = a["x"].float()
        state.mul_(torch.exp(dt[..., None] * a["A"])).add_((dt * x)[..., None] * a["B"].float()[:, None, :])
        y = (state * a["C"].float()[:, None, :]).sum(-1) + a["D"] * x
        return y * torch.nn.functional.silu(a["z"].float())
    return step


def ssm_decode_mamba_ssm(ssu, kernel, d):
    a = ssm_decode_inputs(kernel, d)
    if kernel == "mamba2":  # mamba_ssm's Mamba2 call: per-head parameters broadcast over P (and N) by strides
        H, P, N = d["H"], d["P"], d["N"]
        A = a["A"][:, None, None].expand(H, P, N)
        dt = a["dt"][:, :, None].expand(-1, -1, P)
        D = a["D"][:, None].expand(H, P)
        bias = a["dt_bias"][:, None].expand(H, P)
        return lambda: ssu(a["state"], a["x"], dt, A, a["B"], a["C"], D=D, dt_bias=bias, dt_softplus=True)
    return lambda: ssu(a["state"], a["x"], a["dt"], a["A"], a["B"], a["C"], D=a["D"], z=a["z"],
                       dt_bias=a["dt_bias"], dt_softplus=True)


def prefill_peer(kernel, d):
    """(peer name, make) for one of our chunk_prefill rows."""
    if kernel in ("gated_delta_rule", "kda"):
        def make():
            q, k, v, g, beta, _ = attention_like_inputs(d, T=d["T"], channel_gate=kernel == "kda")
            if kernel == "kda":
                from fla.ops.kda import chunk_kda as f
            else:
                from fla.ops.gated_delta_rule import chunk_gated_delta_rule as f
            return lambda: f(q, k, v, g=g, beta=beta, output_final_state=True, use_qk_l2norm_in_kernel=True)
        return f"fla chunk_{kernel}", make
    if kernel in ("simple_gla", "gla"):
        def make():
            q, k, v, g, _, _ = attention_like_inputs(d, T=d["T"], channel_gate=kernel == "gla")
            if kernel == "gla":
                from fla.ops.gla import chunk_gla as f
            else:
                from fla.ops.simple_gla import chunk_simple_gla as f
            return lambda: f(q, k, v, g=g, output_final_state=True)
        return f"fla chunk_{kernel}", make
    if kernel == "mamba2":
        B, T, H, P, N, G = (d[x] for x in ("B", "T", "H", "P", "N", "G"))
        try:
            from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
        except Exception:  # noqa: BLE001
            def make():
                from fla.ops.simple_gla import chunk_simple_gla
                # SSD as simple GLA, the inputs' preparation (softplus, products, head expansion) untimed.
                dt = torch.nn.functional.softplus(bf16(B, T, H).float() - 2.0)
                x = bf16(B, T, H, P)
                q = bf16(B, T, G, N).repeat_interleave(H // G, dim=2)
                k = bf16(B, T, G, N).repeat_interleave(H // G, dim=2)
                v = (x.float() * dt[..., None]).to(torch.bfloat16)
                g = -1.0 * dt
                return lambda: chunk_simple_gla(q, k, v, g=g, scale=1.0, output_final_state=True)
            return "fla chunk_simple_gla (SSD as simple GLA)", make

        def make():
            x, dt = bf16(B, T, H, P), bf16(B, T, H)
            Bm, Cm = bf16(B, T, G, N), bf16(B, T, G, N)
            A, D, bias = f32(-1.0, H), f32(1.0, H), f32(-2.0, H)
            return lambda: mamba_chunk_scan_combined(x, dt, A, Bm, Cm, chunk_size=256, D=D, dt_bias=bias,
                                                     dt_softplus=True, return_final_states=True)
        return "mamba_ssm mamba_chunk_scan_combined", make
    if kernel in ("rwkv7", "rwkv7_recurrent"):
        def make():
            B, T, H, K, V = d["B"], d["T"], d["H"], d["K"], d["V"]
            # As our rows: log decay -0.05, a = -1/8 and b = 1/8 on every channel, scale 1, the final state out.
            r, k, v = bf16(B, T, H, K), bf16(B, T, H, K), bf16(B, T, H, V)
            a = torch.full((B, T, H, K), -0.125, device=DEVICE, dtype=torch.bfloat16)
            b = torch.full((B, T, H, K), 0.125, device=DEVICE, dtype=torch.bfloat16)
            w = f32(-0.05, B, T, H, K)
            if kernel == "rwkv7":
                from fla.ops.rwkv7 import chunk_rwkv7 as f
            else:
                from fla.ops.rwkv7 import fused_recurrent_rwkv7 as f
            return lambda: f(r=r, w=w, k=k, v=v, a=a, b=b, scale=1.0, output_final_state=True)
        return "fla chunk_rwkv7" if kernel == "rwkv7" else "fla fused_recurrent_rwkv7", make
    raise ValueError(f"no peer for {kernel}")

def conv_prefill_peers(d):
    """(name, make) of every peer for a conv1d_prefill row (B x T tokens of D bf16 channels, width W, bias + SiLU):
    causal-conv1d's CUDA kernel (Mamba's) where the image has it, fla's Triton kernel from the bundle, and torch's
    own depthwise F.conv1d (cuDNN) with the SiLU after it, which every torch has."""
    B, T, D, W = d["B"], d["T"], d["D"], d["W"]

    def inputs():
        return bf16(B, T, D), bf16(D, W), bf16(D)

    def dao():
        from causal_conv1d import causal_conv1d_fn as f
        x, w, bias = inputs()
        xt = x.transpose(1, 2)  # [B, D, T] over [B, T, D] memory: its channel-last layout, no copy
        return lambda: f(xt, w, bias, activation="silu")

    def fla():
        from fla.modules.causal_conv1d import causal_conv1d as f
        x, w, bias = inputs()
        return lambda: f(x, weight=w, bias=bias, activation="silu")

    def torch_conv():
        x, w, bias = inputs()
        xt, w3 = x.transpose(1, 2), w[:, None, :]

        def run():
            y = torch.nn.functional.conv1d(xt, w3, bias, padding=W - 1, groups=D)[..., :T]
            return torch.nn.functional.silu(y)
        return run

    return [("causal-conv1d", dao), ("fla causal_conv1d", fla), ("torch conv1d", torch_conv)]


def guarded(budget, label, fn):
    """fn()'s value under the budget and the per-peer limit, or None (the reason printed)."""
    if budget.left() < 5:
        print(f"  {label}: skipped: the peers' time budget is spent", file=sys.stderr)
        return None
    try:
        with time_limit(min(PEER_LIMIT_S, budget.left())):
            return fn()
    except Exception as e:  # noqa: BLE001
        print(f"  {label}: {first_line(e)}", file=sys.stderr)
        return None


def fmt(x, spec=".0f"):
    return format(x, spec) if x else "-"


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def table_head(*columns):
    """The blank line, header row and rule that open one more markdown table."""
    return ["", "| " + " | ".join(columns) + " |", "| " + " | ".join(["---"] * len(columns)) + " |"]


def dims_text(r):
    """A row's shape for its table cell: "name=value" pairs."""
    return " ".join(f"{k}={v}" for k, v in r["dims"].items())


def not_available(error, cells=1):
    """The cells of a measurement our entry refused: its error, then "-" for the cells after it."""
    return f"not available: {error}" + " | -" * (cells - 1)


def markdown(ours, peak, rows, decode_rows, state_rows, linear_rows, chunk_rows, gemm_rows=(), conv_rows=()):
    peak_text = f"{peak:.0f} TFLOP/s" if peak else "not measured"
    device = torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE
    lines = [f"GPU: {device} (torch {torch.__version__}); cuBLAS bf16 GEMM {GEMM_N}^3: "
             f"{peak_text}; device copy (ours): {ours['copy_gbps']:.0f} GB/s"]
    lines += table_head("B", "T", "Hq/Hkv", "D", "mask", "kernel", "ours TFLOP/s", "torch flash", "cuDNN",
                        "ours / flash", "ours / cuDNN", "ours / GEMM peak")
    for r in rows:
        c, p = r["case"], r["peers"]
        kernel = c.get("kernel", "")
        if c.get("schedule", "none") != "none":
            kernel += " " + c["schedule"]
        lines.append(f"| {c['B']} | {c['T']} | {c['Hq']}/{c['Hkv']} | {c['D']} | {'causal' if c['causal'] else 'none'} "
                     f"| {kernel} | {r['ours_tflops']:.0f} | {fmt(p.get('flash'))} | {fmt(p.get('cudnn'))} | "
                     f"{ratio(r['ours_tflops'], p.get('flash'))} | {ratio(r['ours_tflops'], p.get('cudnn'))} | "
                     f"{ratio(r['ours_tflops'], peak)} |")
    if decode_rows:
        lines += table_head("B", "context", "Hq/Hkv", "D", "block", "cache", "ours GB/s", "torch flash", "cuDNN",
                            "ours / copy", "ours / cuDNN")
        for r in decode_rows:
            c, p = r["case"], r["peers"]
            lines.append(f"| {c['B']} | {c['context']} | {c['Hq']}/{c['Hkv']} | {c['D']} | {c['block_size']} | "
                         f"{c['kv_dtype']} | {r['ours_gbps']:.0f} | {fmt(p.get('flash'))} | {fmt(p.get('cudnn'))} | "
                         f"{r['ours_gbps'] / ours['copy_gbps']:.0%} | {ratio(r['ours_gbps'], p.get('cudnn'))} |")
    # Issue 26's decode targets: >= 3x the peer's time and >= 70% of the copy bandwidth.
    if state_rows or linear_rows:
        lines += table_head("decode (1 token)", "shape", "ours us", "peer", "peer us", "ours GB/s of state",
                            "ours / copy", "peer time / ours (target >= 3x)")
        for r in state_rows + linear_rows:
            if not r["ours_s"]:
                lines.append(f"| {r['kernel']} | {dims_text(r)} | {not_available(r['ours_error'])} | {r['peer']} | "
                             f"{fmt(r['peer_s'] and r['peer_s'] * 1e6)} | - | - | - |")
                continue
            peer_us = f"{r['peer_s'] * 1e6:.0f}" if r["peer_s"] else (r["peer_note"] or "-")
            lines.append(f"| {r['kernel']} | {dims_text(r)} | {r['ours_s'] * 1e6:.0f} | {r['peer']} | {peer_us} | "
                         f"{r['ours_gbps']:.0f} | {r['ours_gbps'] / ours['copy_gbps']:.0%} | "
                         f"{ratio(r['peer_s'], r['ours_s'])} |")
    # Issue 26's prefill target: >= 1.5x fla's chunk_* (its time over ours).
    if chunk_rows:
        lines += table_head("chunked prefill", "shape", "ours ms", "ours TFLOP/s", "ours Mtok/s", "peer", "peer ms",
                            "peer Mtok/s", "peer time / ours (target >= 1.5x)")
        for r in chunk_rows:
            peer_ms = f"{r['peer_s'] * 1e3:.2f}" if r["peer_s"] else (r["peer_note"] or "-")
            peer_tok = f"{r['tokens'] / r['peer_s'] * 1e-6:.2f}" if r["peer_s"] else "-"
            ours_text = (f"{r['ours_s'] * 1e3:.2f} | {r['ours_tflops']:.1f} | {r['tokens'] / r['ours_s'] * 1e-6:.2f}"
                         if r["ours_s"] else not_available(r["ours_error"], 3))
            lines.append(f"| {r['kernel']} | {dims_text(r)} | {ours_text} | {r['peer']} | {peer_ms} | {peer_tok} | "
                         f"{ratio(r['peer_s'], r['ours_s'])} |")
    # Issue 27's projections: our GEMM and our cuBLASLt call beside torch's at the same shape and the GEMM peak.
    if gemm_rows:
        lines += table_head("projection GEMM (bf16)", "shape", "ours TFLOP/s", "our cuBLASLt call", "torch F.linear",
                            "ours / torch", "ours / GEMM peak")
        for r in gemm_rows:
            ours_text = fmt(r["ours_tflops"]) if r["ours_tflops"] else not_available(r["ours_error"])
            lt_text = fmt(r["cublaslt_tflops"]) if r["cublaslt_tflops"] else not_available(r["cublaslt_error"])
            lines.append(f"| gemm | {dims_text(r)} | {ours_text} | {lt_text} | {fmt(r['torch_tflops'])} | "
                         f"{ratio(r['ours_tflops'], r['torch_tflops'])} | {ratio(r['ours_tflops'], peak)} |")
    # The short convolution's prefill: bandwidth-bound, so GB/s of x read + y written, beside each peer's.
    if conv_rows:
        lines += table_head("conv1d prefill (bf16, SiLU)", "shape", "ours ms", "ours GB/s", "ours / copy",
                            "causal-conv1d ms", "fla ms", "torch conv1d ms", "fastest peer time / ours")
        for r in conv_rows:
            peers = [r["peers"][name]["s"] for name in r["peers"] if r["peers"][name]["s"]]
            cols = " | ".join(f"{p['s'] * 1e3:.3f}" if p["s"] else (p["note"] or "-") for p in r["peers"].values())
            ours_text = (f"{r['ours_s'] * 1e3:.3f} | {r['ours_gbps']:.0f} | {r['ours_gbps'] / ours['copy_gbps']:.0%}"
                         if r["ours_s"] else not_available(r["ours_error"], 3))
            lines.append(f"| conv1d_prefill | {dims_text(r)} | {ours_text} | {cols} | "
                         f"{ratio(min(peers) if peers else None, r['ours_s'])} |")
    return "\n".join(lines)


def gemm_peer_rows(budget, ours):
    """One row per shape of ours' "gemm" rows (gemm_ours and gemm_cublaslt), torch's F.linear timed beside them."""
    by_shape = {}
    for case in ours.get("gemm", []):
        key = tuple(case["dims"].items())
        r = by_shape.setdefault(key, {"dims": case["dims"], "ours_tflops": None, "ours_error": None,
                                      "cublaslt_tflops": None, "cublaslt_error": None, "torch_tflops": None})
        which = "ours" if case["kernel"] == "gemm_ours" else "cublaslt"
        r[f"{which}_tflops"], r[f"{which}_error"] = case["tflops"], case["error"]
    for r in by_shape.values():
        flops = 2 * r["dims"]["M"] * r["dims"]["N"] * r["dims"]["K"]
        s = guarded(budget, f"torch linear {r['dims']}", lambda: linear_seconds(r["dims"]))
        r["torch_tflops"] = None if s is None else flops / s * 1e-12
    return list(by_shape.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ours", help="attnzoo bench kernels --device cuda --json")
    parser.add_argument("out_dir")
    parser.add_argument("--budget-s", type=float, default=170, help="the whole run's time limit (default 170)")
    args = parser.parse_args()
    with open(args.ours) as f:
        ours = json.load(f)
    budget = Budget(args.budget_s)
    peak = None
    rows, decode_rows, state_rows, linear_rows, chunk_rows, gemm_rows, conv_rows = [], [], [], [], [], [], []

    def save():
        table = markdown(ours, peak, rows, decode_rows, state_rows, linear_rows, chunk_rows, gemm_rows, conv_rows)
        with open(f"{args.out_dir}/gpu_peers.md", "w") as f:
            f.write(table + "\n")
        with open(f"{args.out_dir}/gpu_peers.json", "w") as f:
            json.dump({"gemm_tflops": peak, "ours": ours, "rows": rows, "decode_rows": decode_rows,
                       "gated_delta_decode_rows": state_rows, "state_decode_rows": linear_rows,
                       "chunk_prefill_rows": chunk_rows, "gemm_rows": gemm_rows, "conv_prefill_rows": conv_rows,
                       "budget_s": args.budget_s},
                      f, indent=1)
        return table

    peak = guarded(budget, "cuBLAS GEMM", gemm_tflops)
    gemm_rows = gemm_peer_rows(budget, ours)
    save()

    # Issue 26's rows before the softmax ones: SDPA's peers on these shapes were measured on the H200 before
    # (cuda.md), fla's mostly not, and a short budget should go to what is unknown.
    for case in ours.get("gated_delta_decode", []):
        d = {k: case[k] for k in ("B", "H", "K", "V")}
        name, make = decode_peer("gated_delta_rule", d)
        s, note = run_peer(budget, f"{name} {d}", make)
        state_rows.append({"case": case, "kernel": "gated_delta_rule", "dims": d, "ours_s": case["median_s"],
                           "ours_error": None, "ours_gbps": case["gbps"], "peer": name, "peer_s": s, "peer_note": note,
                           "fla_s": s, "fla_gbps": None if s is None else case["state_bytes"] / s * 1e-9})
    for case in ours.get("state_decode", []):
        name, make = decode_peer(case["kernel"], case["dims"])
        s, note = run_peer(budget, f"{name} {case['dims']}", make)
        linear_rows.append({"kernel": case["kernel"], "dims": case["dims"], "ours_s": case["median_s"],
                            "ours_error": case["error"], "ours_gbps": case["gbps"], "peer": name, "peer_s": s,
                            "peer_note": note, "peer_gbps": None if s is None else case["state_bytes"] / s * 1e-9})
    save()
    for case in ours.get("chunk_prefill", []):
        name, make = prefill_peer(case["kernel"], case["dims"])
        s, note = run_peer(budget, f"{name} {case['dims']}", make)
        chunk_rows.append({"kernel": case["kernel"], "dims": case["dims"], "tokens": case["tokens"],
                           "ours_s": case["median_s"], "ours_error": case["error"], "ours_tflops": case["tflops"],
                           "peer": name, "peer_s": s, "peer_note": note,
                           "peer_tflops": None if s is None else case["flops"] / s * 1e-12})
        save()
    for case in ours.get("conv_prefill", []):
        row = {"dims": case["dims"], "bytes": case["bytes"], "ours_s": case["median_s"], "ours_error": case["error"],
               "ours_gbps": case["gbps"], "peers": {}}
        for name, make in conv_prefill_peers(case["dims"]):
            s, note = run_peer(budget, f"{name} {case['dims']}", make)
            row["peers"][name] = {"s": s, "note": note, "gbps": None if s is None else case["bytes"] / s * 1e-9}
        conv_rows.append(row)
        save()

    torch_prefill = {}
    for case in ours["prefill"]:
        flops = case["tflops"] * case["median_s"]  # TFLOP of the case, as our table counted it
        row = {"case": case, "ours_tflops": case["tflops"], "peers": {}}
        # A shape our table times under several schedules is timed once for the peers.
        key = (case["B"], case["T"], case["Hq"], case["Hkv"], case["D"], case["causal"])
        if key not in torch_prefill:
            torch_prefill[key] = {}
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                                  ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
                s = guarded(budget, f"SDPA {name}", lambda: sdpa_seconds(case, backend))
                torch_prefill[key][name] = None if s is None else flops / s
        row["peers"] = torch_prefill[key]
        rows.append(row)
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    save()

    torch_decode = {}
    for case in ours.get("decode", []):
        key = (case["B"], case["context"], case["Hq"], case["Hkv"], case["D"])
        if key not in torch_decode:  # torch's figure does not depend on our block size or cache format
            bf16_bytes = 2 * case["B"] * case["context"] * case["Hkv"] * case["D"] * 2
            torch_decode[key] = {}
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                s = guarded(budget, f"SDPA decode {name}", lambda: sdpa_decode_seconds(case, backend))
                torch_decode[key][name] = None if s is None else bf16_bytes / s * 1e-9
        decode_rows.append({"case": case, "ours_gbps": case["gbps"], "peers": torch_decode[key]})
    print(save())


if __name__ == "__main__":
    main()
