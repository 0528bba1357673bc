"""Two linear-family tables of the kernel benchmark: strong decays and Mamba-2 at real model shapes.

Strong decays: every exp-decay family timed on the same shape with ordinary decays and with strong ones (log
decays down to -16 per step; for Mamba-2, A down to -16 with raw dt in [-4, 0] before softplus, as trained layers
have). Such decays push exp(sum of log decays) into the subnormal range, where x86 cores without flush-to-zero
take a microcode assist per instruction; 'strong / normal' near 1 means the kernel has no subnormal slow path.
Retention has no data-dependent decay (its per-head decays are fixed), so it has no strong-decay row.

Mamba-2 shapes: the chunked SSD scan against our recurrent form at the head counts, head dims, state sizes and
group counts of released models, with the chunked form's GFLOP/s as a fraction of the f32 FMA peak.
"""
import numpy as np

from .. import _core

F32 = np.float32
STRONG_LOG_DECAY = -16.0

# Mamba-2 layers of released models (heads x head dim, d_state, B/C groups).
MAMBA2_MODELS = [
    ("Mamba-2 2.7B-like", dict(H=80, P=64, N=128, G=1)),
    ("Mamba-2 130M-like", dict(H=24, P=64, N=128, G=1)),
    ("Falcon-H1-like", dict(H=32, P=64, N=128, G=8)),
    ("Nemotron-H-like", dict(H=128, P=64, N=128, G=8)),
    ("d_state 64", dict(H=48, P=64, N=64, G=1)),
]
MAMBA2_CHUNK_TARGET = 2.5   # chunked >= 2.5x our recurrent form at T >= 2048
MAMBA2_PEAK_TARGET = 0.30   # chunked >= 30% of the f32 FMA peak at T >= 2048


def _strong_shapes(scale):
    if scale == "full":
        return {"T": 512, "H": 16, "K": 128, "mamba2": dict(H=48, P=64, N=128, G=1), "mamba": dict(D=1536, N=16),
                "rwkv4": 2048}
    if scale == "quick":
        return {"T": 256, "H": 4, "K": 128, "mamba2": dict(H=48, P=64, N=128, G=1), "mamba": dict(D=1536, N=16),
                "rwkv4": 2048}
    return {"T": 48, "H": 2, "K": 16, "mamba2": dict(H=4, P=16, N=16, G=1), "mamba": dict(D=32, N=8), "rwkv4": 64}


def _mamba2_scale(scale):
    """(models, lengths) per scale; full covers T from 512 to 16k on the first model, to 8k on the others."""
    if scale == "full":
        return [(name, s, [512, 2048, 8192] + ([16384] if i == 0 else [])) for i, (name, s) in
                enumerate(MAMBA2_MODELS)]
    if scale == "quick":
        return [(name, s, [2048]) for name, s in MAMBA2_MODELS[:1] + MAMBA2_MODELS[2:4]]
    return [("tiny", dict(H=4, P=16, N=16, G=2), [64, 128])]


def mamba2_chunk_flops(T, H, P, N, G, chunk=64):
    """The chunked form's multiply-adds x 2: per chunk and group the causal half of C B^T (Q x Q / 2 x N); per chunk
    and head the state's contribution C S (Q x N x P), the causal half of the intra-chunk product (Q x Q / 2 x P)
    and the state update (N x Q x P). Every intra-chunk triangle counts half, as src/bench's CUDA count does, so
    the CPU and GPU rows state the same work for a shape."""
    return 2.0 * T * (G * chunk * N / 2 + H * (2 * N * P + chunk * P / 2))


def _mamba2_inputs(T, H, P, N, G, seed, strong):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, T, H, P), dtype=F32)
    B, C = (rng.standard_normal((1, T, G, N), dtype=F32) for _ in range(2))
    A = -np.exp(rng.uniform(0.0, np.log(16.0), H)).astype(F32)  # Mamba-2's A init: [-16, -1]
    lo, hi = (-4.0, 0.0) if strong else (np.log(np.expm1(1e-3)), np.log(np.expm1(0.1)))  # dt' from 1e-3 .. 0.1
    dt = rng.uniform(lo, hi, (1, T, H)).astype(F32)
    return x, dt, A, B, C


def time_median(fn, timing):
    return _core.median_time(fn, timing["warmup"], timing["min_runs"], timing["max_runs"],
                             timing["min_seconds"])["median_s"]


def _decay_calls(s, strong, seed):
    """(family, form, shape, call) for every exp-decay family on one set of inputs."""
    from .. import linear as L
    rng = np.random.default_rng(seed)
    T, H, K = s["T"], s["H"], s["K"]
    q, k, v = (rng.standard_normal((1, T, H, K), dtype=F32) for _ in range(3))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    lo = STRONG_LOG_DECAY if strong else -0.2
    g = rng.uniform(lo, 0.0, (1, T, H)).astype(F32)
    gk = rng.uniform(lo, 0.0, (1, T, H, K)).astype(F32)
    beta = rng.uniform(0.1, 0.9, (1, T, H)).astype(F32)
    shape = f"T={T} H={H} K=V={K}"
    m2 = s["mamba2"]
    x, dt, A, B, C = _mamba2_inputs(T, m2["H"], m2["P"], m2["N"], m2["G"], seed, strong)
    m2_shape = f"T={T} H={m2['H']} P={m2['P']} N={m2['N']} G={m2['G']}"
    m2_kw = dict(dt_softplus=True, check_inputs=False)
    m1 = s["mamba"]
    D, N = m1["D"], m1["N"]
    u = rng.standard_normal((1, D, T), dtype=F32)
    Bm, Cm = (rng.standard_normal((1, N, T), dtype=F32) for _ in range(2))
    A1 = -np.tile(np.arange(1, N + 1, dtype=F32), (D, 1))  # S4D-real init: A[d, n] = -(n + 1)
    delta = rng.uniform(-4.0, 2.0, (1, D, T)).astype(F32) if strong else rng.uniform(-7.0, -2.0, (1, D, T)).astype(F32)
    Cw = s["rwkv4"]
    w4 = np.full(Cw, np.log(-STRONG_LOG_DECAY) if strong else -1.0, F32)  # decay exp(-exp(w)) per step
    u4 = rng.standard_normal(Cw, dtype=F32)
    k4, v4 = (rng.standard_normal((1, T, Cw), dtype=F32) for _ in range(2))
    return [
        ("mamba2", "chunk", m2_shape, lambda: L.mamba2_chunk_scan(x, dt, A, B, C, **m2_kw)),
        ("mamba2", "recurrent", m2_shape, lambda: L.mamba2_recurrent(x, dt, A, B, C, **m2_kw)),
        ("mamba", "selective scan", f"T={T} D={D} N={N}",
         lambda: L.selective_scan_fn(u, delta, A1, Bm, Cm, delta_softplus=True, check_inputs=False)),
        ("gla", "chunk", shape, lambda: L.chunk_gla(q, k, v, gk)),
        ("gla", "recurrent", shape, lambda: L.recurrent_gla(q, k, v, gk=gk, check_inputs=False)),
        ("simple gla", "chunk", shape, lambda: L.chunk_simple_gla(q, k, v, g)),
        ("simple gla", "recurrent", shape, lambda: L.recurrent_simple_gla(q, k, v, g, check_inputs=False)),
        ("kda", "chunk", shape, lambda: L.chunk_kda(q, k, v, gk, beta)),
        ("kda", "recurrent", shape, lambda: L.recurrent_kda(q, k, v, gk, beta, check_inputs=False)),
        ("gated delta rule", "chunk", shape, lambda: L.chunk_gated_delta_rule(q, k, v, g, beta)),
        ("gated delta rule", "recurrent", shape,
         lambda: L.recurrent_gated_delta_rule(q, k, v, g, beta, check_inputs=False)),
        ("rwkv7", "chunk", shape, lambda: L.chunk_rwkv7(q, gk, k, v, -k, k * 0.5, check_inputs=False)),
        ("rwkv7", "recurrent", shape, lambda: L.recurrent_rwkv7(q, gk, k, v, -k, k * 0.5, scale=1.0,
                                                                output_final_state=False, check_inputs=False)),
        ("rwkv4", "wkv", f"T={T} C={Cw}", lambda: L.rwkv4_wkv(w4, u4, k4, v4, check_inputs=False)),
    ]


def run_strong_decay(scale, timing, progress=lambda s: None):
    """Rows (family, form, shape, normal_ms, strong_ms, strong_vs_normal), same shapes, one run."""
    s = _strong_shapes(scale)
    normal, strong = _decay_calls(s, False, 1), _decay_calls(s, True, 1)
    rows = []
    for (family, form, shape, call_n), (_, _, _, call_s) in zip(normal, strong):
        progress(f"timing {family} {form} with normal and strong decays ({shape})")
        n_ms, s_ms = 1e3 * time_median(call_n, timing), 1e3 * time_median(call_s, timing)
        rows.append({"family": family, "form": form, "shape": shape, "normal_ms": n_ms, "strong_ms": s_ms,
                     "strong_vs_normal": s_ms / n_ms})
    return rows


def run_mamba2_shapes(scale, timing, progress=lambda s: None):
    """Rows per (model shape, T): chunked and recurrent ms, their ratio and the chunked form's GFLOP/s."""
    from .. import linear as L
    rows = []
    for name, s, lengths in _mamba2_scale(scale):
        H, P, N, G = s["H"], s["P"], s["N"], s["G"]
        for T in lengths:
            x, dt, A, B, C = _mamba2_inputs(T, H, P, N, G, seed=T, strong=False)
            kw = dict(dt_softplus=True, check_inputs=False)
            progress(f"timing mamba2 chunk / recurrent {name} T={T} H={H} P={P} N={N} G={G}")
            c = time_median(lambda: L.mamba2_chunk_scan(x, dt, A, B, C, **kw), timing)
            r = time_median(lambda: L.mamba2_recurrent(x, dt, A, B, C, **kw), timing)
            rows.append({"model": name, "T": T, "H": H, "P": P, "N": N, "G": G, "chunk_ms": 1e3 * c,
                         "recurrent_ms": 1e3 * r, "chunk_vs_recurrent": r / c,
                         "chunk_gflops": mamba2_chunk_flops(T, H, P, N, G) / c * 1e-9, "fraction_of_peak": None,
                         "met": None})
    return rows


def rate_mamba2(rows, peaks, idle=True):
    """Fraction of the f32 FMA peak, and the targets (>= 2.5x recurrent, >= 30% of peak) from T = 2048 on; the
    peak fraction is judged only on an idle machine (harness.machine_is_idle), the gain always. "missed" lists
    what fell short."""
    for r in rows:
        r["fraction_of_peak"] = r["chunk_gflops"] / peaks["fma"]["gflops"] if peaks else None
        r["missed"] = []
        if r["T"] < 2048 or r["fraction_of_peak"] is None:
            r["met"] = None
            continue
        if r["chunk_vs_recurrent"] < MAMBA2_CHUNK_TARGET:
            r["missed"].append(f"chunk gain {r['chunk_vs_recurrent']:.2f}x < {MAMBA2_CHUNK_TARGET:g}x")
        if idle and r["fraction_of_peak"] < MAMBA2_PEAK_TARGET:
            r["missed"].append(f"{r['fraction_of_peak']:.1%} of peak < {MAMBA2_PEAK_TARGET:.0%}")
        r["met"] = not r["missed"]


def format_strong_decay(rows):
    lines = ["", f"strong decays (log decay down to {STRONG_LOG_DECAY:g} per step; Mamba-2: A to -16, raw dt in "
             "[-4, 0]) vs ordinary ones, same shapes: 'strong / normal' ~ 1 means no subnormal slow path",
             f"{'family':17} {'form':15} {'shape':28} {'normal ms':>10} {'strong ms':>10} {'strong / normal':>16}"]
    for r in rows:
        lines.append(f"{r['family']:17} {r['form']:15} {r['shape']:28} {r['normal_ms']:10.2f} {r['strong_ms']:10.2f} "
                     f"{r['strong_vs_normal']:15.2f}x")
    return lines


def format_mamba2_shapes(rows):
    lines = ["", "Mamba-2 chunked SSD at model shapes (head dim P, d_state N, G groups of B / C; f32, one sequence); "
             f"target from T=2048: chunked >= {MAMBA2_CHUNK_TARGET:g}x recurrent and >= {MAMBA2_PEAK_TARGET:.0%} "
             "of the f32 FMA peak",
             f"{'model':18} {'H':>4} {'P':>3} {'N':>4} {'G':>2} {'T':>6} {'chunk ms':>9} {'recurrent ms':>13} "
             f"{'chunk gain':>10} {'GFLOP/s':>8} {'of peak':>8}"]
    for r in rows:
        frac = "-" if r["fraction_of_peak"] is None else f"{r['fraction_of_peak']:.1%}"
        verdict = {True: "target met", False: "below target: " + "; ".join(r.get("missed", [])), None: ""}[r["met"]]
        lines.append(f"{r['model']:18} {r['H']:4d} {r['P']:3d} {r['N']:4d} {r['G']:2d} {r['T']:6d} "
                     f"{r['chunk_ms']:9.2f} {r['recurrent_ms']:13.2f} {r['chunk_vs_recurrent']:9.2f}x "
                     f"{r['chunk_gflops']:8.1f} {frac:>8} {verdict}".rstrip())
    return lines
