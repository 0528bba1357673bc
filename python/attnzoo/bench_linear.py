"""The linear family in the kernel benchmark: chunked prefill vs our recurrent form vs our softmax prefill.

For each sequence length it times, on the same machine in the same run, the chunked (prefill) form and the
recurrent (decode) form of every family that has both (Gated DeltaNet, KDA, simple GLA, GLA, retention, linear
attention, DeltaNet, Mamba-2), and our flash softmax attention at the
same shape; it reports the crossover length where linear overtakes softmax, the state bytes per sequence against
the KV-cache bytes softmax would need, and the decode step's state streaming rate against memory bandwidth.
"""
import numpy as np

from . import _core


def _shapes(scale):
    """decode_batch 0: as many sequences as it takes for their states to be twice the last-level cache."""
    if scale == "full":
        return {"H": 16, "K": 128, "lengths": [512, 2048, 8192, 32768], "softmax_max_T": 8192, "decode_batch": 0}
    if scale == "quick":
        return {"H": 4, "K": 128, "lengths": [512, 2048], "softmax_max_T": 2048, "decode_batch": 0}
    return {"H": 2, "K": 32, "lengths": [64, 128], "softmax_max_T": 128, "decode_batch": 4}


def _inputs(T, H, K, seed):
    """Normalised q/k (as every real delta layer feeds them), mild decays, beta in (0, 1)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, T, H, K), dtype=np.float32)
    k = rng.standard_normal((1, T, H, K), dtype=np.float32)
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((1, T, H, K), dtype=np.float32)
    g = -np.abs(rng.standard_normal((1, T, H), dtype=np.float32)) * 0.1
    gk = -np.abs(rng.standard_normal((1, T, H, K), dtype=np.float32)) * 0.1
    beta = rng.uniform(0.1, 0.9, (1, T, H)).astype(np.float32)
    return q, k, v, g, gk, beta


def _families(q, k, v, g, gk, beta):
    """(name, chunked call, recurrent call) for each family, on the same inputs."""
    from . import linear as L
    T, H, K = q.shape[1], q.shape[2], q.shape[3]
    x = v.reshape(1, T, H, K)
    dt = np.full((1, T, H), 0.05, np.float32)
    A = -np.ones(H, np.float32)
    B, C = k.reshape(1, T, H, K), q.reshape(1, T, H, K)  # one group per head: SSD with state [P=K, N=K]
    return [
        ("gated delta rule", lambda: L.chunk_gated_delta_rule(q, k, v, g, beta),
         lambda: L.recurrent_gated_delta_rule(q, k, v, g, beta)),
        ("kda", lambda: L.chunk_kda(q, k, v, gk, beta), lambda: L.recurrent_kda(q, k, v, gk, beta)),
        ("simple gla", lambda: L.chunk_simple_gla(q, k, v, g), lambda: L.recurrent_simple_gla(q, k, v, g)),
        ("gla", lambda: L.chunk_gla(q, k, v, gk), lambda: L.recurrent_gla(q, k, v, gk=gk)),
        ("retention", lambda: L.chunk_retention(q, k, v), lambda: L.recurrent_retention(q, k, v)),
        ("linear attention", lambda: L.chunk_linear_attn(q, k, v, normalize=False),
         lambda: L.recurrent_linear_attn(q, k, v, normalize=False)),
        ("delta rule", lambda: L.chunk_delta_rule(q, k, v, beta), lambda: L.recurrent_delta_rule(q, k, v, beta)),
        ("mamba2", lambda: L.mamba2_chunk_scan(x, dt, A, B, C, check_inputs=False),
         lambda: L.mamba2_recurrent(x, dt, A, B, C, check_inputs=False)),
    ]


def _time(fn, timing):
    return _core.median_time(fn, timing["warmup"], timing["min_runs"], timing["max_runs"],
                             timing["min_seconds"])["median_s"]


def run_linear(scale, timing, peaks, progress=lambda s: None):
    """Returns {"shape": ..., "rows": [...], "crossover": {...}, "decode": [...]}; rows per (family, T)."""
    from .softmax import attention
    s = _shapes(scale)
    H, K = s["H"], s["K"]
    rows, softmax_ms = [], {}
    for T in s["lengths"]:
        q, k, v, g, gk, beta = _inputs(T, H, K, seed=T)
        if T <= s["softmax_max_T"]:
            progress(f"timing softmax prefill T={T} H={H} D={K} (linear comparison)")
            out = np.empty_like(q)
            softmax_ms[T] = 1e3 * _time(lambda: attention(q, k, v, causal=True, out=out, check_inputs=False), timing)
        for name, chunk, recurrent in _families(q, k, v, g, gk, beta):
            progress(f"timing {name} chunk / recurrent T={T} H={H} K=V={K}")
            c = 1e3 * _time(chunk, timing)
            r = 1e3 * _time(recurrent, timing)
            state_bytes = H * K * K * 4
            rows.append({"family": name, "T": T, "chunk_ms": c, "recurrent_ms": r, "chunk_vs_recurrent": r / c,
                         "softmax_ms": softmax_ms.get(T), "state_bytes": state_bytes,
                         "kv_bytes_f32": 2 * T * H * K * 4})
    crossover = {}
    for name in {r["family"] for r in rows}:
        faster = [r["T"] for r in rows if r["family"] == name and r["softmax_ms"] is not None
                  and r["chunk_ms"] < r["softmax_ms"]]
        crossover[name] = min(faster) if faster else None
    decode = _decode_rows(s, timing, peaks, progress)
    return {"shape": f"H={H} K=V={K} f32, one sequence", "rows": rows, "crossover": crossover, "decode": decode}


def _decode_rows(s, timing, peaks, progress):
    """One recurrent step for a batch whose states exceed the last-level cache: read + write of every state."""
    from . import linear as L
    H, K = s["H"], s["K"]
    # Enough sequences that their states are twice the last-level cache: the step must stream from memory.
    l3 = _core.cpu_info()["l3_bytes"] or (32 << 20)
    B = s["decode_batch"] if s["decode_batch"] else -(-2 * l3 // (H * K * K * 4))
    rng = np.random.default_rng(1)
    q = rng.standard_normal((B, 1, H, K), dtype=np.float32)
    k = q / np.linalg.norm(q, axis=-1, keepdims=True)
    v = rng.standard_normal((B, 1, H, K), dtype=np.float32)
    g = np.full((B, 1, H), -0.1, np.float32)
    beta = np.full((B, 1, H), 0.5, np.float32)
    state = rng.standard_normal((B, H, K, K), dtype=np.float32)
    progress(f"timing gated delta rule decode step batch={B} H={H} K=V={K}")
    t = _time(lambda: L.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=state,
                                                   output_final_state=True), timing)
    moved = 2.0 * state.nbytes
    gbps = moved / t * 1e-9
    return [{"family": "gated delta rule", "batch": B, "state_mib": state.nbytes / 2**20, "ms": t * 1e3,
             "gbps": gbps, "fraction_of_bandwidth": gbps / peaks["memory"]["gbps"] if peaks else None}]


def format_linear(section):
    lines = ["", f"linear family ({section['shape']}): chunked prefill vs recurrent form vs our softmax prefill",
             f"{'family':18} {'T':>6} {'chunk ms':>10} {'recurrent ms':>13} {'chunk gain':>10} {'softmax ms':>11}"
             f" {'state KiB':>10} {'KV KiB (f32)':>13}"]
    for r in section["rows"]:
        sm = "-" if r["softmax_ms"] is None else f"{r['softmax_ms']:.2f}"
        lines.append(f"{r['family']:18} {r['T']:6d} {r['chunk_ms']:10.2f} {r['recurrent_ms']:13.2f} "
                     f"{r['chunk_vs_recurrent']:9.2f}x {sm:>11} {r['state_bytes'] / 1024:10.0f} "
                     f"{r['kv_bytes_f32'] / 1024:13.0f}")
    cross = ", ".join(f"{k}: {'T=' + str(v) if v else 'not within the measured lengths'}"
                      for k, v in sorted(section["crossover"].items()))
    lines.append(f"crossover (first measured T where chunked linear beats softmax): {cross}")
    for d in section["decode"]:
        frac = "" if d["fraction_of_bandwidth"] is None else f", {d['fraction_of_bandwidth']:.0%} of bandwidth"
        lines.append(f"decode step {d['family']}: batch {d['batch']}, {d['state_mib']:.0f} MiB of state, "
                     f"{d['ms']:.2f} ms, {d['gbps']:.1f} GB/s read+write{frac} (target >= 60%)")
    return lines
