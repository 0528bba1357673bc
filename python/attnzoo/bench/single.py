"""Kernel-table rows for kernels that have one form (no chunked-vs-recurrent pair): MLA prefill and absorbed
decode, Mamba's selective scan (at Mamba-130M and Falcon-Mamba-7B widths), RWKV-4, RWKV-7 (recurrent), the causal
short convolution, the prefill projection GEMM with f32 products (OpenBLAS) and with bf16 products (matmul
precision "medium"), the decode GEMV over GGUF block-quantized weights (Q4_0, Q4_K, Q5_K, IQ4_XS, Q8_0) next to
bf16 weights, rated in weight bytes read, and the searching weight quantizers (Q2_K, Q3_K, Q4_K, IQ4_NL, IQ4_XS)
side by side.

Each is a bench.BenchCase, so it is timed, rated and printed like the softmax rows: compute-bound kernels report
GFLOP/s of useful work against the FMA peak, memory-bound ones GB/s of bytes read against the bandwidth. A
PyTorch peer runs on the same tensors where one is a few lines and cheap to time (MLA in both forms, the
convolution); the scans have no such peer (a per-token Python loop would time the interpreter).
"""


def _shapes(scale):
    if scale == "full":
        return {"mla": dict(H=16, r=512, dn=128, dr=64, dv=128, T=1024, S=4096),
                "mamba": dict(D=1536, N=16, L=1024), "falcon_mamba": dict(D=8192, N=16, L=1024),
                "rwkv4": dict(C=2048, T=1024),
                "rwkv7": dict(H=32, K=64, T=256), "conv": dict(D=4096, W=4, T=4096),
                "gemm": dict(T=512, N=4096, K=2048), "qgemv": dict(K=1024)}
    if scale == "quick":
        return {"mla": dict(H=16, r=512, dn=128, dr=64, dv=128, T=256, S=4096),
                "mamba": dict(D=1536, N=16, L=256), "falcon_mamba": dict(D=8192, N=16, L=256),
                "rwkv4": dict(C=2048, T=256),
                "rwkv7": dict(H=32, K=64, T=64), "conv": dict(D=4096, W=4, T=1024),
                "gemm": dict(T=256, N=2048, K=1024), "qgemv": dict(K=1024)}
    return {"mla": dict(H=2, r=32, dn=16, dr=8, dv=16, T=32, S=64), "mamba": dict(D=32, N=8, L=32),
            "falcon_mamba": dict(D=48, N=16, L=32),
            "rwkv4": dict(C=64, T=32), "rwkv7": dict(H=2, K=16, T=16), "conv": dict(D=64, W=4, T=64),
            "gemm": dict(T=16, N=64, K=32), "qgemv": dict(K=256)}


def _mla_weights(s, seed):
    from .harness import randn
    H, r, dn, dv = s["H"], s["r"], s["dn"], s["dv"]
    w = randn((H * (dn + dv), r), "float32", seed)
    return w * (r ** -0.5)


def _mla_torch_parts(w, s):
    H, r, dn, dv = s["H"], s["r"], s["dn"], s["dv"]
    W = w.view(H, dn + dv, r)
    return W[:, :dn], W[:, dn:]


def _mla_prefill_case(cfg):
    from .harness import BenchCase, Prepared, torch_module, randn
    from ..mla import mla_prefill
    s = cfg["mla"]
    H, r, dn, dr, dv, T = s["H"], s["r"], s["dn"], s["dr"], s["dv"], s["T"]
    dims = dict(kv_lora_rank=r, qk_nope_head_dim=dn, qk_rope_head_dim=dr, v_head_dim=dv)

    def setup():
        q, kv, w = randn((1, T, H, dn + dr), "float32", 11), randn((1, T, r + dr), "float32", 12), _mla_weights(s, 13)
        out = q.new_empty((1, T, H, dv)) if hasattr(q, "new_empty") else None
        ours = lambda: mla_prefill(q, kv, w, **dims, out=out, check_inputs=False)
        torch = torch_module()
        if torch is None:
            return Prepared(ours)
        import torch.nn.functional as F
        W_UK, W_UV = _mla_torch_parts(w, s)

        def peer():  # the naive form in torch: expand K and V per head, then SDPA
            c, kpe = kv[..., :r], kv[..., r:]
            k = torch.cat([torch.einsum("btr,hdr->bthd", c, W_UK), kpe[:, :, None].expand(1, T, H, dr)], -1)
            v = torch.einsum("btr,hdr->bthd", c, W_UV)
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=True).transpose(1, 2)
        return Prepared(ours, peer)

    pairs = T * (T + 1) // 2
    flops = 2.0 * T * H * (dn + dv) * r + 2.0 * pairs * H * (dn + dr + dv)
    return BenchCase("mla", "prefill f32 (naive form)", f"T={T} H={H} r={r} nope={dn} rope={dr} v={dv}", setup,
                     flops=flops)


def _mla_decode_case(cfg):
    from .harness import BenchCase, Prepared, torch_module, randn
    from ..mla import mla_decode
    s = cfg["mla"]
    H, r, dn, dr, dv, S = s["H"], s["r"], s["dn"], s["dr"], s["dv"], s["S"]
    dims = dict(kv_lora_rank=r, qk_nope_head_dim=dn, qk_rope_head_dim=dr, v_head_dim=dv)

    def setup():
        import numpy as np
        q, cache, w = randn((1, 1, H, dn + dr), "float32", 21), randn((1, S, r + dr), "float32", 22), \
            _mla_weights(s, 23)
        seqlens = np.array([S], np.int32)
        ours = lambda: mla_decode(q, cache, seqlens, w, **dims)
        torch = torch_module()
        if torch is None:
            return Prepared(ours)
        W_UK, W_UV = _mla_torch_parts(w, s)
        scale = (dn + dr) ** -0.5

        def peer():  # the absorbed form in torch: scores against the latent cache itself
            c, kpe = cache[..., :r], cache[..., r:]
            q_lat = torch.einsum("bthd,hdr->bthr", q[..., :dn], W_UK)
            scores = (torch.einsum("bthr,bsr->bhts", q_lat, c) + torch.einsum("bthd,bsd->bhts", q[..., dn:], kpe))
            p = torch.softmax(scores * scale, -1)
            return torch.einsum("bthr,hdr->bthd", torch.einsum("bhts,bsr->bthr", p, c), W_UV)
        return Prepared(ours, peer)

    read = 4.0 * (S * (r + dr) + H * (dn + dv) * r)  # the latent cache and w_kv_b, f32
    return BenchCase("mla", "absorbed decode f32", f"context={S} H={H} r={r} rope={dr} (cache + w_kv_b read)",
                     setup, bytes=read)


def _selective_scan_case(cfg, model):
    """The scan at a model's width: "mamba" (Mamba-130M: d_inner 1536) or "falcon_mamba" (Falcon-Mamba-7B:
    d_inner 8192), both with d_state 16."""
    from .harness import BenchCase, Prepared, randn
    from ..linear import selective_scan_fn
    s = cfg[model]
    D, N, L = s["D"], s["N"], s["L"]

    def setup():
        u, delta = randn((1, D, L), "float32", 31), randn((1, D, L), "float32", 32)
        A = -abs(randn((D, N), "float32", 33)) - 0.5
        B, C = randn((1, N, L), "float32", 34), randn((1, N, L), "float32", 35)
        Dskip, bias = randn((D,), "float32", 36), randn((D,), "float32", 37) * 0.1 - 2.0
        return Prepared(lambda: selective_scan_fn(u, delta, A, B, C, Dskip, delta_bias=bias, delta_softplus=True,
                                                  check_inputs=False))

    # per (token, channel, state): h = exp(dt A) h + dt B u (2 FMAs) and y += C h (1 FMA); exp not counted
    name = {"mamba": "Mamba-130M", "falcon_mamba": "Falcon-Mamba-7B"}[model]
    return BenchCase("mamba", f"selective scan f32 ({name})", f"L={L} D={D} N={N}", setup, flops=6.0 * L * D * N)


def _rwkv4_case(cfg):
    from .harness import BenchCase, Prepared, randn
    from ..linear import rwkv4_wkv
    s = cfg["rwkv4"]
    C, T = s["C"], s["T"]

    def setup():
        w, u = randn((C,), "float32", 41), randn((C,), "float32", 42)
        k, v = randn((1, T, C), "float32", 43), randn((1, T, C), "float32", 44)
        return Prepared(lambda: rwkv4_wkv(w, u, k, v, check_inputs=False))

    return BenchCase("rwkv4", "wkv f32", f"T={T} C={C} (k, v read)", setup, bytes=2.0 * T * C * 4)


def _rwkv7_case(cfg):
    from .harness import BenchCase, Prepared, torch_module, randn
    from ..linear import recurrent_rwkv7
    s = cfg["rwkv7"]
    H, K, T = s["H"], s["K"], s["T"]

    def setup():
        r, k, v = (randn((1, T, H, K), "float32", seed) for seed in (51, 52, 53))
        w = -abs(randn((1, T, H, K), "float32", 54)) * 0.5
        kk = randn((1, T, H, K), "float32", 55)
        torch = torch_module()
        if torch is not None:
            kk = torch.nn.functional.normalize(kk, dim=-1)
        else:
            import numpy as np
            kk = kk / np.linalg.norm(kk, axis=-1, keepdims=True)
        a, b = -kk, kk * 0.5
        return Prepared(lambda: recurrent_rwkv7(r, w, k, v, a, b, output_final_state=False, check_inputs=False))

    # per (token, head, k, v): a^T S, the decay-plus-rank-1 update (2 FMAs) and S^T r: 4 FMAs
    return BenchCase("rwkv7", "recurrent f32", f"T={T} H={H} K=V={K}", setup, flops=8.0 * T * H * K * K)


def _causal_conv_case(cfg):
    from .harness import BenchCase, Prepared, torch_module, randn
    from ..linear import causal_conv1d
    s = cfg["conv"]
    D, W, T = s["D"], s["W"], s["T"]

    def setup():
        x, weight, bias = randn((1, T, D), "float32", 61), randn((D, W), "float32", 62), \
            randn((D,), "float32", 63)
        ours = lambda: causal_conv1d(x, weight, bias, activation="silu", check_inputs=False)[0]
        torch = torch_module()
        if torch is None:
            return Prepared(ours)
        import torch.nn.functional as F
        # what a torch user writes: channels-first depthwise conv1d with left padding, then SiLU
        peer = lambda: F.silu(F.conv1d(x.transpose(1, 2), weight[:, None, :], bias, padding=W - 1,
                                       groups=D)[..., :T]).transpose(1, 2)
        return Prepared(ours, peer)

    return BenchCase("causal conv1d", f"width {W} silu f32", f"T={T} D={D} (x read)", setup, bytes=4.0 * T * D)


def _gemm_case(cfg, products):
    """y = x w^T as a bf16 model's prefill projection runs it: bf16 weights, f32 activations; "f32" products widen
    the weights (exact, OpenBLAS), "bf16" products round the activations too (AMX tiles where they run, else
    vdpbf16ps, rated against that engine's peak). The torch peer is the same product in torch: f32 matmul, or
    bf16 matmul for bf16 products."""
    from .harness import BenchCase, Prepared, bf16_peak_name, torch_module, randn
    from .. import _core
    s = cfg["gemm"]
    T, N, K = s["T"], s["N"], s["K"]

    def setup():
        x, w = randn((T, K), "float32", 71), randn((N, K), "bfloat16", 72)
        y = x.new_empty((T, N))
        backend = "openblas" if products == "f32" else "bf16_dot"

        def ours():
            _core.linear_gemm(w, x, y, backend)
            return y
        torch = torch_module()
        if products == "f32":
            wf = w.float()
            peer = lambda: torch.matmul(x, wf.T)
        else:
            xb = x.bfloat16()
            peer = lambda: torch.matmul(xb, w.T).float()  # f32 out, as ours (the comparison needs it too)
        return Prepared(ours, peer)

    return BenchCase("projection gemm", f"bf16 weights, {products} products", f"T={T} N={N} K={K}", setup,
                     flops=2.0 * T * N * K, peak="" if products == "f32" else bf16_peak_name())


# The decode GEMV rows' weight formats (gguf_blocks.py holds their GGUF ids and block layouts).
QGEMV_TYPES = ("Q4_0", "Q4_K", "Q5_K", "IQ4_XS", "Q8_0", "BF16")


def _qgemv_case(cfg, qtype, wide):
    """One decode token through a projection (y = x w^T, T=1) as a model runs it: bf16 weights on the dense GEMV,
    block formats on the quantized GEMV (8-bit activations, integer dots). Memory-bound: weight bytes read."""
    from .harness import BenchCase, Prepared
    from .gguf_blocks import random_weights, type_id, weight_bytes
    from .. import _core
    import numpy as np
    K = cfg["qgemv"]["K"]
    N = 3 * K if wide else K
    qid = type_id(qtype)

    def setup():
        # Prepared once, as a model's loader prepares them (rows regrouped or aligned where this CPU wants it):
        # the timed body is the product alone, not that load-time copy.
        weights = _core.QuantWeights(random_weights(qtype, N, K, 81), qid, N, K)
        x = np.random.default_rng(82).standard_normal((1, K), dtype=np.float32)
        y = np.empty((1, N), np.float32)

        def ours():
            weights.matmul(x, y)
            return y
        return Prepared(ours)

    return BenchCase("quantized gemv", f"{qtype} weights N={'3K' if wide else 'K'}", f"T=1 N={N} K={K} (weights read)",
                     setup, bytes=float(weight_bytes(qtype, N, K)))


# The weight quantizers that search their scales (what `attnzoo quantize` runs per tensor), side by side.
QUANTIZE_TYPES = ("Q2_K", "Q3_K", "Q4_K", "IQ4_NL", "IQ4_XS")


def _quantize_case(cfg, qtype):
    """f32 weights [3K, K] to GGUF blocks with llama.cpp's scale search (Q2_K: 17 candidate scale / minimum pairs
    per sub-block of 16, then 4-bit sub-block scales; Q3_K: levels refined one at a time per sub-block of 16, then
    6-bit scales; Q4_K: 22 candidate pairs per sub-block of 32, then 6-bit scales; IQ4: 16 candidate scales per
    block of 32 over the non-linear grid), rows over the thread pool. Rated by the f32 bytes read: the search is far
    from memory-bound (a model is quantized once), so the fraction shows its cost over one pass through the weights
    and the rows compare the formats' searches on the same matrix."""
    from .harness import BenchCase, Prepared
    from .gguf_blocks import type_id, weight_bytes
    from .. import _core
    import numpy as np
    K = cfg["qgemv"]["K"]
    N = 3 * K
    qid = type_id(qtype)

    def setup():
        x = np.random.default_rng(83).standard_normal((N, K), dtype=np.float32)
        out = np.empty(weight_bytes(qtype, N, K), np.uint8)

        def ours():
            _core.quantize(x, qid, None, out)
            return out
        return Prepared(ours)

    return BenchCase("weight quantization", f"{qtype} scale search", f"N={N} K={K} f32 (bytes read)", setup,
                     bytes=4.0 * N * K)


def single_form_cases(config):
    """The BenchCases of this file at the config's scale ("full", "quick" or "tiny")."""
    from .. import _core
    from .harness import torch_module
    cfg = _shapes(config["scale"])
    cases = [_mla_prefill_case(cfg), _mla_decode_case(cfg), _selective_scan_case(cfg, "mamba"),
             _selective_scan_case(cfg, "falcon_mamba"), _rwkv4_case(cfg),
             _rwkv7_case(cfg), _causal_conv_case(cfg)]
    cases += [_qgemv_case(cfg, q, wide) for wide in (False, True) for q in QGEMV_TYPES]
    cases += [_quantize_case(cfg, q) for q in QUANTIZE_TYPES]
    if torch_module() is not None:  # bf16 weights come from torch (numpy has no bfloat16)
        cases.append(_gemm_case(cfg, "f32"))
        if _core.active_target() == "avx512_bf16":
            cases.append(_gemm_case(cfg, "bf16"))
    return cases
