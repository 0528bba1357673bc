"""The linear family in the kernel benchmark: chunked prefill vs our recurrent form vs our softmax prefill.

For each sequence length it times, on the same machine in the same run, the chunked (prefill) form and the
recurrent (decode) form of every family that has both (Gated DeltaNet, KDA, simple GLA, GLA, retention, linear
attention, DeltaNet, Mamba-2, RWKV-7), and our flash softmax attention at the
same shape; it reports the crossover length where linear overtakes softmax, the state bytes per sequence against
the KV-cache bytes softmax would need, and the decode step's state streaming rate against memory bandwidth
(Gated DeltaNet and KDA, batch 1 and 16, through the C++ entry and the Python API; see _decode_rows), then
the Mamba-2 model-shape and strong-decay tables of ssm.py.
"""
import numpy as np

from .. import _core


def _shapes(scale):
    """decode_H: heads of the decode-step rows (the issue's H=16 at full and quick scale, where a step is
    cheap); decode_set_bytes: how much state the rotation covers (default four times the last-level cache)."""
    if scale == "full":
        return {"H": 16, "K": 128, "lengths": [512, 2048, 8192, 32768], "softmax_max_T": 8192, "decode_H": 16}
    if scale == "quick":
        return {"H": 4, "K": 128, "lengths": [512, 2048], "softmax_max_T": 2048, "decode_H": 16}
    return {"H": 2, "K": 32, "lengths": [64, 128], "softmax_max_T": 128, "decode_H": 2, "decode_set_bytes": 1 << 20}


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
    from .. import linear as L
    T, H, K = q.shape[1], q.shape[2], q.shape[3]
    x = v.reshape(1, T, H, K)
    dt = np.full((1, T, H), 0.05, np.float32)
    A = -np.ones(H, np.float32)
    B, C = k.reshape(1, T, H, K), q.reshape(1, T, H, K)  # one group per head: SSD with state [P=K, N=K]
    # RWKV-7 as its blocks call it: a = -kk, b = kk * iclr with kk the normalised key, per-channel log decay.
    iclr = beta[..., None]
    a_rw, b_rw = -k, k * iclr
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
        ("rwkv7", lambda: L.chunk_rwkv7(q, gk, k, v, a_rw, b_rw, check_inputs=False),
         lambda: L.recurrent_rwkv7(q, gk, k, v, a_rw, b_rw, scale=1.0, output_final_state=False,
                                   check_inputs=False)),
    ]


def time_median(fn, timing):
    return _core.median_time(fn, timing["warmup"], timing["min_runs"], timing["max_runs"],
                             timing["min_seconds"])["median_s"]


def run_linear(scale, timing, peaks, progress=lambda s: None):
    """Returns {"shape": ..., "rows": [...], "crossover": {...}, "decode": [...]}; rows per (family, T)."""
    from ..softmax import attention
    s = _shapes(scale)
    H, K = s["H"], s["K"]
    rows, softmax_ms = [], {}
    for T in s["lengths"]:
        q, k, v, g, gk, beta = _inputs(T, H, K, seed=T)
        if T <= s["softmax_max_T"]:
            progress(f"timing softmax prefill T={T} H={H} D={K} (linear comparison)")
            out = np.empty_like(q)
            softmax_ms[T] = 1e3 * time_median(lambda: attention(q, k, v, causal=True, out=out, check_inputs=False), timing)
        for name, chunk, recurrent in _families(q, k, v, g, gk, beta):
            progress(f"timing {name} chunk / recurrent T={T} H={H} K=V={K}")
            c = 1e3 * time_median(chunk, timing)
            r = 1e3 * time_median(recurrent, timing)
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
    from .ssm import rate_mamba2, run_mamba2_shapes, run_strong_decay
    mamba2 = run_mamba2_shapes(scale, timing, progress)
    rate_mamba2(mamba2, peaks)
    return {"shape": f"H={H} K=V={K} f32, one sequence", "rows": rows, "crossover": crossover, "decode": decode,
            "mamba2_shapes": mamba2, "strong_decay": run_strong_decay(scale, timing, progress)}


DECODE_TARGET = 0.60  # of the measured read bandwidth, for the in-place decode step


def _decode_inputs(family, B, H, K, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, 1, H, K), dtype=np.float32)
    k = q / np.linalg.norm(q, axis=-1, keepdims=True)
    v = rng.standard_normal((B, 1, H, K), dtype=np.float32)
    g = np.full((B, 1, H, K) if family == "kda" else (B, 1, H), -0.1, np.float32)
    beta = np.full((B, 1, H), 0.5, np.float32)
    return q, k, v, g, beta


def _decode_calls(family, q, k, v, g, beta):
    """(path, call(state)) for one decode step: the C++ entry alone (preallocated output, state updated in
    place, no value scans), the Python API's decode path, and the Python API's default (allocating) call."""
    from .. import linear as L
    entry = _core.recurrent_kda if family == "kda" else _core.recurrent_gated_delta_rule
    api = L.recurrent_kda if family == "kda" else L.recurrent_gated_delta_rule
    o = np.empty_like(v)
    return [
        ("kernel in place", lambda s: entry(q, k, v, g, beta, o, s, s, None, None, False, 64, False)),
        ("python in place", lambda s: api(q, k, v, g, beta, initial_state=s, inplace_final_state=True,
                                          check_inputs=False)),
        ("python default", lambda s: api(q, k, v, g, beta, initial_state=s, output_final_state=True)),
    ]


def _decode_rows(s, timing, peaks, progress):
    """One recurrent step (T = 1) of Gated DeltaNet and KDA at batch 1 and 16, with states that come from memory.

    Method: a call reads and writes B*H*K*V*4 bytes of state. Enough independent state sets are allocated that
    together they are four times the last-level cache (or s["decode_set_bytes"] at tiny scale), and successive
    timed calls rotate through them, so each call finds its state evicted by the calls before it, as a model's
    layers do in a real decode step. GB/s = 2 x state bytes / median time; the fraction is of the measured read
    bandwidth; the target (>= 60%) applies to the in-place rows. "python default" is the allocating
    out-of-place call with value checks, for comparison.
    """
    H, K = s["decode_H"], s["K"]
    l3 = _core.cpu_info()["l3_bytes"] or (32 << 20)
    pool_bytes = s.get("decode_set_bytes") or 4 * l3
    rows = []
    for B in (1, 16):
        state_bytes = B * H * K * K * 4
        sets = max(2, -(-pool_bytes // state_bytes))
        base = np.random.default_rng(B).standard_normal((B, H, K, K), dtype=np.float32) * 0.1
        states = [base.copy() for _ in range(sets)]
        for family in ("gated delta rule", "kda"):
            q, k, v, g, beta = _decode_inputs(family, B, H, K, seed=B)
            for path, call in _decode_calls(family, q, k, v, g, beta):
                progress(f"timing {family} decode step ({path}) batch={B} H={H} K=V={K}, {sets} state sets")
                turn = [0]

                def step():
                    call(states[turn[0] % sets])
                    turn[0] += 1
                t = time_median(step, timing)
                rows.append({"family": family, "path": path, "batch": B, "H": H, "K": K, "state_sets": sets,
                             "state_mib": state_bytes / 2**20, "llc_mib": l3 / 2**20,
                             "ms": t * 1e3, "gbps": 2.0 * state_bytes / t * 1e-9,
                             "target": DECODE_TARGET if path.endswith("in place") else None,
                             "fraction_of_bandwidth": None, "met": None})
        del states
    rate_decode(rows, peaks)
    return rows


def rate_decode(rows, peaks, idle=True):
    """Fills each decode row's fraction of the measured bandwidth and whether its target is met (None when the
    row has no target, or the machine was not idle: see harness.machine_is_idle)."""
    for d in rows:
        d["fraction_of_bandwidth"] = d["gbps"] / peaks["memory"]["gbps"] if peaks else None
        d["met"] = (None if d["target"] is None or d["fraction_of_bandwidth"] is None or not idle
                    else d["fraction_of_bandwidth"] >= d["target"])


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
    if section["decode"]:
        d0 = section["decode"][0]
        pool = min(d["state_sets"] * d["state_mib"] for d in section["decode"])
        lines += ["", f"decode step (T=1, H={d0['H']}, K=V={d0['K']} f32): GB/s = state read + written once per "
                  f"call; successive calls take the next of 'sets' independent states",
                  f"  (>= {pool:.0f} MiB in all, last-level cache {d0['llc_mib']:.0f} MiB: the state comes from "
                  "memory when that exceeds the cache); 'kernel' = the C++ entry alone, 'python default' = the "
                  "allocating call with value checks",
                  f"{'family':18} {'path':16} {'batch':>5} {'state MiB':>9} {'sets':>5} {'ms':>8} {'GB/s':>7} "
                  f"{'of bw':>6}"]
    for d in section["decode"]:
        frac = "-" if d["fraction_of_bandwidth"] is None else f"{d['fraction_of_bandwidth']:.0%}"
        verdict = ""
        if d["met"] is True:
            verdict = f"target met (>={d['target']:.0%} of bandwidth)"
        elif d["met"] is False:
            verdict = f"below target: >={d['target']:.0%} of bandwidth (measured {frac})"
        lines.append(f"{d['family']:18} {d['path']:16} {d['batch']:5d} {d['state_mib']:9.2f} {d['state_sets']:5d} "
                     f"{d['ms']:8.3f} {d['gbps']:7.1f} {frac:>6} {verdict}".rstrip())
    from .ssm import format_mamba2_shapes, format_strong_decay
    return lines + format_mamba2_shapes(section["mamba2_shapes"]) + format_strong_decay(section["strong_decay"])
