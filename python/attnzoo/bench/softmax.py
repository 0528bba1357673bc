"""Softmax attention rows of the kernel table: prefill (dense, windowed, block-sparse, paged), decode, and LSH
attention against dense attention as T grows."""
from .. import _core
from .harness import BenchCase, length_text, Goal, Prepared, empty_like, faster_than, fraction_of_peak_at_least, randn, \
    time_within_of, torch_module, torch_ratio_at_least

# --- softmax prefill ---------------------------------------------------------------------------------------

def _torch_visibility(T, window, block_mask):
    """The boolean [T, T] mask torch needs for the cases it has no flag for (True = attend)."""
    torch = torch_module()
    i = torch.arange(T).unsqueeze(1)
    j = torch.arange(T).unsqueeze(0)
    visible = j <= i
    if window:
        visible &= j > i - window
    if block_mask is not None:
        b = block_mask.block
        blocks = torch.from_numpy(block_mask.blocks().astype(bool))
        visible &= blocks.repeat_interleave(b, 0).repeat_interleave(b, 1)[:T, :T]
    return visible


def _prefill_case(cfg, name, dtype, window=None, block_mask=None, goals=(), extra=""):
    from ..softmax import attention
    T, Hq, Hkv, D = cfg["T"], cfg["Hq"], cfg["Hkv"], cfg["D"]
    pairs = _core.count_visible_pairs(T, T, True, window or 0, block_mask)

    def setup():
        q, k, v = (randn((1, T, H, D), dtype, seed) for H, seed in ((Hq, 1), (Hkv, 2), (Hkv, 3)))
        out = empty_like(q)
        ours = lambda: attention(q, k, v, causal=True, window=window, block_mask=block_mask, out=out,
                                 check_inputs=False)
        torch = torch_module()
        if torch is None:
            return Prepared(ours)
        import torch.nn.functional as F
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if window is None and block_mask is None:
            peer = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, enable_gqa=True)
        else:
            mask = _torch_visibility(T, window, block_mask)
            peer = lambda: F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, enable_gqa=True)
        return Prepared(ours, lambda: peer().transpose(1, 2))

    return BenchCase("softmax prefill", name, f"T={T} Hq={Hq} Hkv={Hkv} D={D}{extra}", setup,
                     flops=4.0 * pairs * Hq * D, goals=list(goals))


def _prefill_paged_case(cfg, P):
    """Causal bf16 prefill reading K/V from a paged cache (shuffled blocks of P tokens) through the block table."""
    from ..softmax import attention
    T, Hq, Hkv, D = cfg["T"], cfg["Hq"], cfg["Hkv"], cfg["D"]
    pairs = _core.count_visible_pairs(T, T, True, 0, None)

    def setup():
        torch = torch_module()
        if torch is None:
            raise RuntimeError("bf16 caches need PyTorch")
        q, k, v = (randn((1, T, H, D), "bfloat16", seed) for H, seed in ((Hq, 1), (Hkv, 2), (Hkv, 3)))
        (k_pages, table), (v_pages, _) = _to_pages(k, P), _to_pages(v, P)
        seqused = torch.tensor([T], dtype=torch.int32)
        out = empty_like(q)
        ours = lambda: attention(q, k_pages, v_pages, block_table=table, seqused_k=seqused, out=out,
                                 check_inputs=False)
        import torch.nn.functional as F

        def peer():
            kg = _gather_pages(k_pages, table, T).transpose(1, 2)
            vg = _gather_pages(v_pages, table, T).transpose(1, 2)
            return F.scaled_dot_product_attention(q.transpose(1, 2), kg, vg, is_causal=True,
                                                  enable_gqa=True).transpose(1, 2)
        return Prepared(ours, peer)

    return BenchCase("softmax prefill", "paged bf16", f"T={T} Hq={Hq} Hkv={Hkv} D={D} page={P}", setup,
                     flops=4.0 * pairs * Hq * D, goals=[time_within_of("softmax prefill causal bf16", 0.05)])


def softmax_prefill_cases(config):
    cfg = config["prefill"]
    sp = cfg["block_sparse"]
    from ..softmax import block_mask
    mask = block_mask(cfg["T"], block=sp["block"], local_blocks=sp["local_blocks"],
                      global_tokens=sp["global_tokens"], stride=sp["stride"], random_blocks=sp["random_blocks"],
                      seed=sp["seed"])
    return [
        _prefill_case(cfg, "causal f32", "float32",
                      goals=[fraction_of_peak_at_least(0.45), torch_ratio_at_least(1.5)]),
        # bf16 products (AMX tiles, or vdpbf16ps where preferred) should beat both our f32 and torch's bf16 SDPA.
        _prefill_case(cfg, "causal bf16", "bfloat16",
                      goals=[faster_than("softmax prefill causal f32", 1.0), torch_ratio_at_least(1.0)]),
        _prefill_paged_case(cfg, config["decode"]["page_block"]),
        _prefill_case(cfg, "sliding window bf16", "bfloat16", window=cfg["window"],
                      extra=f" window={cfg['window']}"),
        _prefill_case(cfg, "block-sparse bf16", "bfloat16", block_mask=mask,
                      extra=f" block={sp['block']} density={mask.density():.0%}"),
    ]


# --- softmax decode ----------------------------------------------------------------------------------------

def _decode_call(q, k_cache, v_cache, cache_seqlens, out, block_table=None):
    """One place that knows attention_decode's calling convention (flash_attn_with_kvcache's)."""
    from ..decode import attention_decode
    return attention_decode(q, k_cache, v_cache, cache_seqlens, block_table=block_table, out=out,
                            check_inputs=False)


def _to_pages(x, P, seed=7):
    """[1, S, H, D] -> pages [n, P, H, D] in a shuffled order (as a long-running server's allocator leaves them)
    and the block table [1, n]."""
    torch = torch_module()
    S, rest = x.shape[1], tuple(x.shape[2:])
    n = -(-S // P)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    pages = torch.empty((n, P) + rest, dtype=x.dtype)
    pages[perm] = torch.cat([x, torch.zeros((1, n * P - S) + rest, dtype=x.dtype)], 1).reshape((n, P) + rest)
    return pages, perm.to(torch.int32).reshape(1, n)


def _gather_pages(pages, table, S):
    """What a torch user does with a paged cache before attending: [1, S, H, D]."""
    return pages[table[0]].reshape((1, -1) + tuple(pages.shape[2:]))[:, :S]


def _decode_inputs(S, Hq, Hkv, D):
    """One bf16 query token, bf16 K / V of S tokens, cache_seqlens and an output buffer (torch tensors)."""
    torch = torch_module()
    if torch is None:
        raise RuntimeError("bf16 caches need PyTorch")
    q = randn((1, 1, Hq, D), "bfloat16", 4)
    k, v = randn((1, S, Hkv, D), "bfloat16", 5), randn((1, S, Hkv, D), "bfloat16", 6)
    return q, k, v, torch.tensor([S], dtype=torch.int32), torch.empty_like(q)


def _decode_case(cfg, name, paged, goals, page_block=None):
    S, Hq, Hkv, D = cfg["context"], cfg["Hq"], cfg["Hkv"], cfg["D"]
    P = page_block or cfg["page_block"]
    kv_bytes = 2.0 * S * Hkv * D * 2  # K and V, bf16

    def setup():
        q, k, v, seqlens, out = _decode_inputs(S, Hq, Hkv, D)
        import torch.nn.functional as F
        qt = q.transpose(1, 2)
        if not paged:
            ours = lambda: _decode_call(q, k, v, seqlens, out)
            kt, vt = k.transpose(1, 2), v.transpose(1, 2)
            peer = lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True).transpose(1, 2)
            return Prepared(ours, peer)
        (k_pages, table), (v_pages, _) = _to_pages(k, P), _to_pages(v, P)
        ours = lambda: _decode_call(q, k_pages, v_pages, seqlens, out, block_table=table)

        def peer():
            kg = _gather_pages(k_pages, table, S).transpose(1, 2)
            vg = _gather_pages(v_pages, table, S).transpose(1, 2)
            return F.scaled_dot_product_attention(qt, kg, vg, enable_gqa=True).transpose(1, 2)
        return Prepared(ours, peer)

    shape = f"context={S} Hq={Hq} Hkv={Hkv} D={D}" + (f" page={P}" if paged else "")
    return BenchCase("softmax decode", name, shape, setup, bytes=kv_bytes, goals=goals)


QUANT_CONTEXT = 8192  # the quantized-cache rows and their bf16 baseline (smaller scales keep their own context)
# Sequences of QUANT_CONTEXT keys in those rows. A model's decode reads one layer's cache after another, each
# evicted by the other layers' before it comes round again, so its caches come from memory. One 8k sequence
# (Hkv=8, D=128) is 32 MiB in bf16 and 16 MiB in int8 / fp8: about the 32 MiB L3 of the VM these rows were
# tuned on, so the quantized caches would stay in L3 and the rows would compare L3 with memory speed. Four
# sequences (128 MiB bf16, 64 MiB quantized) put every row's cache beyond the LLC, baseline and quantized alike.
QUANT_BATCH = 4


def _decode_8k_case(cfg, kind, goals):
    """Paged decode at QUANT_CONTEXT over a bf16 cache (kind "bf16", the baseline) or an int8 / fp8 (e4m3) cache
    with per-row scales, as Model.load(kv_cache_dtype=) holds it; QUANT_BATCH sequences where the scale's
    context allows. torch has no quantized-cache attention: its side dequantizes the gathered pages, attends."""
    S, Hq, Hkv, D, P = min(cfg["context"], QUANT_CONTEXT), cfg["Hq"], cfg["Hkv"], cfg["D"], cfg["page_block"]
    B = QUANT_BATCH if cfg["context"] >= QUANT_CONTEXT else 1
    quantized = kind != "bf16"
    kv_bytes = 2.0 * B * S * Hkv * ((D + 4) if quantized else 2 * D)  # K and V (quantized: bytes and f32 scales)

    def setup():
        from ..kv_cache import write_kv_paged
        from ..decode import attention_decode
        import torch.nn.functional as F
        torch = torch_module()
        q, _, _, _, out = _decode_inputs(1, B * Hq, 1, D)
        q, out = q.reshape(B, 1, Hq, D), out.reshape(B, 1, Hq, D)
        # The B sequences' keys, one after another: their pages are shuffled together, then the table is split.
        _, k, v, _, _ = _decode_inputs(B * S, 1, Hkv, D)
        (k_pages, table), (v_pages, _) = _to_pages(k, P), _to_pages(v, P)
        n = k_pages.shape[0]
        seqlens = torch.full((B,), S, dtype=torch.int32)
        if B > 1 and S % P != 0:
            raise ValueError(f"context {S} is not a whole number of {P}-token pages")
        tables = table.reshape(B, n // B)
        if not quantized:
            kc, vc, scales = k_pages, v_pages, {}
        else:
            stored = torch.int8 if kind == "int8" else torch.uint8
            kc, vc = (torch.zeros((n, P, Hkv, D), dtype=stored) for _ in range(2))
            ks, vs = (torch.zeros((n, P, Hkv)) for _ in range(2))
            slots = torch.arange(n * P, dtype=torch.int64)
            write_kv_paged(k_pages.reshape(-1, Hkv, D), v_pages.reshape(-1, Hkv, D), slots, kc, vc, k_scale=ks,
                           v_scale=vs, kv_cache_dtype=kind)
            scales = dict(k_scale=ks, v_scale=vs, kv_cache_dtype=kind)
        ours = lambda: attention_decode(q, kc, vc, seqlens, block_table=tables, out=out, check_inputs=False,
                                        **scales)

        def dequantized(x, scale):
            values = x.view(torch.float8_e4m3fn).float() if kind == "fp8" else x.float()
            return (values * scale[..., None]).to(torch.bfloat16)

        def peer():
            kd = dequantized(kc, scales["k_scale"]) if quantized else kc
            vd = dequantized(vc, scales["v_scale"]) if quantized else vc
            kg = _gather_pages(kd, table, B * S).reshape(B, S, Hkv, D).transpose(1, 2)
            vg = _gather_pages(vd, table, B * S).reshape(B, S, Hkv, D).transpose(1, 2)
            return F.scaled_dot_product_attention(q.transpose(1, 2), kg, vg, enable_gqa=True).transpose(1, 2)
        return Prepared(ours, peer)

    shape = f"batch={B} context={S} Hq={Hq} Hkv={Hkv} D={D} page={P}"
    name = "paged bf16 8k" if kind == "bf16" else f"paged {kind}"
    return BenchCase("softmax decode", name, shape, setup, bytes=kv_bytes, goals=goals)


def softmax_decode_cases(config):
    cfg = config["decode"]
    contiguous = "softmax decode contiguous bf16"
    return [
        _decode_case(cfg, "contiguous bf16", False, [fraction_of_peak_at_least(0.70)]),
        _decode_case(cfg, "paged bf16", True,
                     [fraction_of_peak_at_least(0.70), time_within_of(contiguous, 0.10)]),
        # Odd block sizes: blocks straddle cache lines and key tiles.
        _decode_case(cfg, "paged bf16 block 7", True, [time_within_of(contiguous, 0.10)], page_block=7),
        _decode_case(cfg, "paged bf16 block 48", True, [time_within_of(contiguous, 0.10)], page_block=48),
        # Quantized caches read half the bytes of bf16: where decode is bound by memory they should be ~2x faster.
        _decode_8k_case(cfg, "bf16", []),
        _decode_8k_case(cfg, "int8", [faster_than("softmax decode paged bf16 8k", 1.6)]),
        _decode_8k_case(cfg, "fp8", [faster_than("softmax decode paged bf16 8k", 1.6)]),
    ]


# --- LSH attention (Reformer) against dense attention as T grows --------------------------------------------

def _lsh_shapes(scale):
    """num_buckets stays fixed (128: where transformers' automatic choice switches to factorized buckets at chunk
    length 64), so hashing costs O(T) as the tiles do, and the sort adds O(T) (counting sort)."""
    if scale == "tiny":
        return dict(Ts=(256, 512, 1024), H=1, D=32, chunk=32, num_hashes=2, num_buckets=8)
    return dict(Ts=(4096, 8192, 16384), H=1 if scale == "quick" else 4, D=64, chunk=64, num_hashes=4,
                num_buckets=128)


def _grows_at_most(smaller_key, factor, law):
    """This row's time over the row at half the length: at most `factor` (what `law` predicts, plus a margin)."""
    def check(row, rows):
        other = rows.get(smaller_key)
        if other is None or other.get("time_ms") is None or row.get("time_ms") is None:
            return None
        return row["time_ms"] <= factor * other["time_ms"]

    def got(row, rows):
        return f"{row['time_ms'] / rows[smaller_key]['time_ms']:.2f}x"
    return Goal(f"time x{factor:g} or less per doubling of T ({law})", check, got)


def lsh_cases(config):
    """Causal LSH attention (hashing included) and causal dense attention on the same qk / v at growing T: LSH
    should grow as T log T (here O(T): counting sort, fixed chunk), dense as T^2."""
    from ..softmax import attention, lsh_attention
    s = _lsh_shapes(config["scale"])
    H, D, C, R, nb = s["H"], s["D"], s["chunk"], s["num_hashes"], s["num_buckets"]
    cases = []
    for i, T in enumerate(s["Ts"]):
        def setup(T=T, lsh=True):
            qk, v = randn((1, T, H, D), "float32", 1), randn((1, T, H, D), "float32", 2)
            out = empty_like(v)
            if lsh:
                rot = randn((H, D, R, nb // 2), "float32", 3)
                return Prepared(lambda: lsh_attention(qk, v, rot, chunk_length=C, causal=True, out=out,
                                                      check_inputs=False))
            keys = qk / ((qk * qk).mean(-1)[..., None] + 1e-6) ** 0.5 / D ** 0.5  # Reformer's shared-QK keys
            return Prepared(lambda: attention(qk, keys, v, causal=True, scale=1.0, out=out, check_inputs=False))

        prev = f"softmax lsh LSH T={length_text(s['Ts'][i - 1])}" if i else None
        lsh_goals = [_grows_at_most(prev, 2.6, "T log T: 2.17x")] if prev else []
        dense_key = f"softmax lsh dense T={length_text(T)}"
        if i == len(s["Ts"]) - 1:
            lsh_goals.append(faster_than(dense_key, 4.0))
        shape = f"T={T} H={H} D={D}"
        cases.append(BenchCase("softmax lsh", f"LSH T={length_text(T)}", f"{shape} chunk={C} hashes={R} buckets={nb}", setup,
                               flops=2.0 * R * T * 2 * C * 2 * D * H, goals=lsh_goals))
        cases.append(BenchCase("softmax lsh", f"dense T={length_text(T)}", f"{shape} causal", lambda T=T: setup(T, False),
                               flops=4.0 * T * (T + 1) / 2 * H * D))
    return cases
