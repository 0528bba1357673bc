"""Section 5 - memory that interferes: the state matrix of four linear-family layers on a key-recall task.

Writes (key, value) pairs one token at a time through the recurrent kernels, carrying the state between
calls, then reads every key written so far back out of the state with the same kernel (beta = 0 / k = 0: a
pure read, o = S^T q). Some keys are written twice with a new value, which is where additive memory fails.
"""
import math

import numpy as np

from ..linear import (chunk_delta_rule, chunk_gated_delta_rule, chunk_kda, chunk_linear_attn, recurrent_delta_rule,
                      recurrent_gated_delta_rule, recurrent_kda, recurrent_linear_attn)
from .page import Section, animated_figure, figure
from .svg import legend_html, line_chart, svg, text, value_grid

ID = "memory-interference"
TITLE = "5. Memory that interferes"

K = V = 16
GATE = math.log(0.96)
KDA_GATES = np.log(np.linspace(0.999, 0.85, K)).astype(np.float32)


def _task(rng, distinct=12, writes=26):
    keys = rng.standard_normal((distinct, K)).astype(np.float32)
    keys /= np.linalg.norm(keys, axis=1, keepdims=True)
    order = list(range(distinct)) + list(rng.integers(0, distinct, writes - distinct))
    values = rng.integers(0, V, writes)
    return keys, order, values


class Method:
    def __init__(self, name, cls, recurrent, chunk, gate):
        self.name, self.cls, self.recurrent, self.chunk, self.gate = name, cls, recurrent, chunk, gate

    def _args(self, q, k, v, write, n):
        """The kernel's extra arguments: beta (1 to write, 0 to read) and the log decay g."""
        if self.gate is None:
            return {}
        beta = np.full((n, q.shape[1], 1), 1.0 if write else 0.0, np.float32)
        if self.gate == "none":
            return {"beta": beta}
        if self.gate == "scalar":
            return {"g": np.full((n, q.shape[1], 1), GATE if write else 0.0, np.float32), "beta": beta}
        g = np.broadcast_to(KDA_GATES if write else np.zeros(K, np.float32), (n, q.shape[1], 1, K))
        return {"g": np.ascontiguousarray(g), "beta": beta}

    def call(self, fn, q, k, v, state, write):
        n = q.shape[0]
        kw = self._args(q, k, v, write, n)
        if self.gate is None:
            kw["normalize"] = False
        o, st = fn(q, k, v, scale=1.0, initial_state=state, output_final_state=True, **kw)
        return o, st

    def write(self, state, key, value_vec):
        q = key[None, None, None, :]
        return self.call(self.recurrent, q, q, value_vec[None, None, None, :], state, True)[1]

    def read(self, state, keys):
        n = keys.shape[0]
        q = keys[:, None, None, :]
        zeros_k = np.zeros_like(q)
        zeros_v = np.zeros((n, 1, 1, V), np.float32)
        states = np.ascontiguousarray(np.broadcast_to(state, (n,) + state.shape[1:]))
        o, _ = self.call(self.recurrent, q, zeros_k, zeros_v, states, False)
        return o[:, 0, 0, :]


METHODS = [Method("linear attention (additive)", "c4", recurrent_linear_attn, chunk_linear_attn, None),
           Method("DeltaNet", "c1", recurrent_delta_rule, chunk_delta_rule, "none"),
           Method("Gated DeltaNet", "c3", recurrent_gated_delta_rule, chunk_gated_delta_rule, "scalar"),
           Method("KDA", "c5", recurrent_kda, chunk_kda, "channel")]


def run_task(seed=7):
    rng = np.random.default_rng(seed)
    keys, order, values = _task(rng)
    eye = np.eye(V, dtype=np.float32)
    results = {}
    for m in METHODS:
        state = np.zeros((1, 1, K, V), np.float32)
        states, accuracy, latest = [], [], {}
        for key_id, val in zip(order, values):
            state = m.write(state, keys[key_id], eye[val])
            latest[key_id] = int(val)
            ids = sorted(latest)
            recalled = m.read(state, keys[ids])
            accuracy.append(float(np.mean([int(np.argmax(recalled[i])) == latest[k] for i, k in enumerate(ids)])))
            states.append(state[0, 0].copy())
        # The same writes in one chunked call must end in the same state.
        q = keys[order][None, :, None, :]
        vv = eye[values][None, :, None, :]
        _, final = m.call(m.chunk, q, q, vv, None, True)
        results[m.name] = {"states": states, "accuracy": accuracy,
                           "chunk_vs_steps_max_abs_diff": float(np.max(np.abs(final[0, 0] - state[0, 0])))}
    return keys, order, values, results


def _frames(order, values, results):
    cell = 9
    size = K * cell
    vmax = {n: max(float(np.max(np.abs(s))) for s in r["states"]) for n, r in results.items()}
    frames, captions = [], []
    seen = set()
    for t, (key_id, val) in enumerate(zip(order, values)):
        update = key_id in seen
        seen.add(key_id)
        body = []
        for i, m in enumerate(METHODS):
            x = 6 + i * (size + 24)
            r = results[m.name]
            body.append(text(x, 12, m.name.split(" (")[0], "big"))
            body.append(value_grid(r["states"][t], x, 18, cell, vmax[m.name]))
            body.append(text(x, size + 32, f"recall {r['accuracy'][t]:.0%}   |S| = "
                             f"{float(np.linalg.norm(r['states'][t])):.2f}", ""))
        frames.append(svg(6 + 4 * (size + 24), size + 40, "".join(body), f"states after write {t + 1}"))
        captions.append(f"write {t + 1}: key {key_id} -> value {val}" + (" (update of a key seen before)" if update
                                                                           else ""))
    return frames, captions


def build(ctx):
    keys, order, values, results = run_task()
    facts = {m.name: {"accuracy": results[m.name]["accuracy"],
                      "chunk_vs_steps_max_abs_diff": results[m.name]["chunk_vs_steps_max_abs_diff"]} for m in METHODS}
    frames, captions = _frames(order, values, results)
    series = [{"name": m.name, "cls": m.cls, "points": [(t + 1, a) for t, a in enumerate(results[m.name]["accuracy"])]}
              for m in METHODS]
    chart = line_chart(series, width=640, height=260, xlabel="writes so far", ylabel="recall accuracy",
                       ylim=(0, 1.0), vlines=[(12.5, "updates begin")], yfmt=lambda y: f"{y:.0%}",
                       label="recall accuracy per step")
    diffs = ", ".join(f"{m.name.split(' (')[0]} {results[m.name]['chunk_vs_steps_max_abs_diff']:.1e}" for m in METHODS)
    body = [f"<p>A linear-attention layer remembers in a K x V matrix S ({K} x {V} here). The task: write "
            "12 random unit keys, each with a one-hot value, then keep writing, now often to keys already stored "
            "(new values). After every write, every key stored so far is read back (o = S<sup>T</sup>k) and "
            "counts as recalled when its largest entry is the latest value. Additive linear attention "
            "(S += k v<sup>T</sup>) piles every write on top of the others; the delta rule first subtracts "
            "what S already returns for k (S += β k (v - S<sup>T</sup>k)<sup>T</sup>), so rewriting a key "
            "replaces its value; Gated DeltaNet also decays the whole state (×0.96 per write) and KDA decays "
            "each key channel at its own rate (×0.999 … ×0.85). Every state below came out of the recurrent "
            "kernels, one token per call, carrying the state.</p>",
            animated_figure(frames, "watch |S| (Frobenius norm) under each map: additive memory only "
                                    "accumulates, the delta rule replaces what a rewritten key returned.", captions,
                            interval_ms=700),
            figure(chart + legend_html(series),
                   "after the updates start, additive memory keeps returning stale values; the delta rule "
                   "recalls what was written last.",
                   caption=f"Check: the same writes through the chunked kernels end in the same state (max "
                           f"|diff|: <span class=\"check\">{diffs}</span>).")]
    return Section(ID, TITLE, "".join(body), facts, figures=2)
