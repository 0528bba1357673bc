"""Where one decode step goes across the thread pool (`attnzoo bench model --timeline`).

The pool records every job the stepping thread submits (label, start, end, tasks, whether it ran on the workers);
the step splits into time inside jobs, grouped by what submitted them (a projection's name with its layer number
taken out, "mixer" for attention / recurrent kernels, "ffn", "block" for norms, "output" for the head), and serial
time between jobs on the calling thread. Jobs handed to workers pay a hand-off each; a step with many short
parallel jobs is bound by that fixed cost, not by bandwidth.
"""
import re
import time

import numpy as np

from .. import _core

_LAYER = re.compile(r"\.\d+\.")


def op_name(label):
    """A projection's module name without its layer index ("model.layers.3.self_attn.q_proj" ->
    "model.layers.N.self_attn.q_proj"), so one row sums the op over every layer."""
    return _LAYER.sub(".N.", label) if label else "(unlabelled)"


def summarize(records, step_ns):
    """The timeline document of one step: totals, and one row per op sorted by time."""
    ops = {}
    inside = 0
    for op, start, end, tasks, parallel in records:
        row = ops.setdefault(op_name(op), {"op": op_name(op), "jobs": 0, "parallel_jobs": 0, "us": 0.0, "tasks": 0})
        row["jobs"] += 1
        row["parallel_jobs"] += int(parallel)
        row["us"] += (end - start) / 1e3
        row["tasks"] += tasks
        inside += end - start
    rows = sorted(ops.values(), key=lambda r: -r["us"])
    for r in rows:
        r["mean_us"] = r["us"] / r["jobs"]
    parallel = [end - start for _, start, end, _, p in records if p]
    return {"step_us": step_ns / 1e3, "jobs": len(records), "parallel_jobs": len(parallel),
            "inside_jobs_us": inside / 1e3, "between_jobs_us": max(step_ns - inside, 0) / 1e3,
            "median_parallel_job_us": float(np.median(parallel)) / 1e3 if parallel else None,
            "threads": _core.num_threads(), "ops": rows}


def record_step(model, seq, rng, steps=5):
    """The timeline of the median of `steps` single-token decode steps on seq (the first is a warm-up)."""
    runs = []
    for _ in range(steps):
        token = np.array([rng.integers(model.vocab_size)], np.int32)
        _core.timeline_start()
        t0 = time.perf_counter_ns()
        try:
            model.forward(token, seq=seq, last_only=True)
        finally:
            records = _core.timeline_stop()
        runs.append((time.perf_counter_ns() - t0, records))
    runs = sorted(runs[1:] or runs, key=lambda r: r[0])
    step_ns, records = runs[len(runs) // 2]
    return summarize(records, step_ns)


def format_timeline(t, top=12):
    lines = [f"Decode step timeline ({t['threads']} threads): {t['step_us']:.0f} us = {t['inside_jobs_us']:.0f} us "
             f"in {t['jobs']} pool jobs ({t['parallel_jobs']} on the workers, median "
             f"{t['median_parallel_job_us'] or 0:.1f} us) + {t['between_jobs_us']:.0f} us serial between jobs",
             f"  {'op':<44} {'jobs':>5} {'parallel':>8} {'total us':>9} {'mean us':>8}"]
    for r in t["ops"][:top]:
        lines.append(f"  {r['op'][-44:]:<44} {r['jobs']:>5} {r['parallel_jobs']:>8} {r['us']:>9.1f} {r['mean_us']:>8.2f}")
    if len(t["ops"]) > top:
        rest = t["ops"][top:]
        lines.append(f"  {'(' + str(len(rest)) + ' more ops)':<44} {sum(r['jobs'] for r in rest):>5} "
                     f"{sum(r['parallel_jobs'] for r in rest):>8} {sum(r['us'] for r in rest):>9.1f}")
    return "\n".join(lines)
