"""The text report of `attnzoo bench model` (python -m attnzoo.bench.model): one document from run_model_bench
printed as the tables the README and docs/BENCHMARKS.md quote."""
from .._units import human_parameters
from . import llama_bench as llama


# The instructions behind each integer-row ceiling (bench/model.py picks it from the rows that ran).
_INT8_ENGINES = {"vnni_int8": "vpdpbusd", "avx2_int8": "vpmaddubsw + vpmaddwd",
                 "avx_vnni_int8": "AVX-VNNI vpdpbusd", "fma": "f32 FMA: the portable int16 rows"}


def format_report(doc):
    m, mach, s = doc["model"], doc["machine"], doc["settings"]
    fma, mem = doc["peaks"]["fma"], doc["peaks"]["memory"]
    p, d = doc["prefill"], doc["decode"]
    lines = [
        f"attnzoo bench model: {m['architecture']} ({human_parameters(m['parameter_count'])} parameters, "
        f"{m['num_layers']} layers: {', '.join(m['layer_kinds'])}), weights {m['weights_dtype']}, "
        f"linear prefill {s['linear_prefill']}, matmul precision {s.get('matmul_precision', 'highest')}",
        f"machine         {mach.get('cpu_description', mach['cpu'])}, {mach['threads']} threads, "
        f"target {mach['target']}, "
        f"load average {mach['load_average']:.1f}",
        f"peak f32 FMA    {fma['gflops']:8.1f} GFLOP/s" + (
            f"   peak bf16 products {p['ceiling_gflops']:.1f} GFLOP/s "
            f"({'AMX tiles' if p.get('ceiling') == 'amx_bf16' else 'vdpbf16ps'})"
            if p.get("products") == "bf16"
            else f"   peak int8 products {p['ceiling_gflops']:.1f} GOP/s ({_INT8_ENGINES.get(p.get('ceiling'))}, "
                 "the prompt's integer rows)"
            if p.get("products") == "int8"
            else "  (f32 products: bf16 weights are widened exactly)" if m["weights_dtype"] == "bfloat16"
            else "  (f32 products)"),
        f"memory read     {mem['gbps']:8.1f} GB/s",
        "",
        f"prefill  {p['tokens']:6d} tokens   {p['tokens_per_s']:9.1f} tok/s   {p['seconds'] * 1e3:9.1f} ms "
        f"(median of {p['runs']})   projections {p['linear_gflops']:.1f} GFLOP/s = "
        f"{p.get('fraction_of_ceiling', p['fraction_of_fma_peak']):.1%} of the {p.get('products', 'f32')} "
        f"product peak   (+ attention {p['attention_gflop']:.2f} GFLOP: "
        f"{p['total_gflops']:.1f} GFLOP/s in all)",
        f"decode   {d['tokens']:6d} tokens   {d['tokens_per_s']:9.1f} tok/s   {d['median_step_ms']:9.2f} ms/token "
        f"(median)   weights {d['weight_bytes_per_token'] / 2**20:.0f} MiB/token at {d['weight_gbps']:.1f} GB/s = "
        f"{d['fraction_of_bandwidth']:.1%} of bandwidth",
        f"         bytes moved (weights + cache) at the measured bandwidth explain {d['bytes_share_of_step']:.1%} "
        f"of the step; the rest is {d['fixed_us_per_layer']:.1f} us per layer",
        "",
        "decode by context (attention slows as its cache grows; linear / SSM layers stay flat):",
        f"  {'context':>8}  {'tok/s':>8}  {'ms/token':>9}  {'weights GB/s':>12}  {'cache MiB read':>14}  "
        f"{'of bandwidth':>12}",
    ]
    for r in doc["decode_by_context"]:
        lines.append(f"  {r['context']:8d}  {r['tokens_per_s']:8.1f}  {r['median_step_ms']:9.2f}  "
                     f"{r['weight_gbps']:12.1f}  {r['cache_bytes_per_token'] / 2**20:14.2f}  "
                     f"{r['fraction_of_bandwidth']:12.1%}")
    pc = doc.get("prefix_cache")
    if pc:
        lines += ["", f"prefix cache: time to first token for a {pc['prefix']}-token shared prefix + {pc['new']} new",
                  f"  cold {pc['cold_seconds'] * 1e3:9.1f} ms   hit {pc['hit_seconds'] * 1e3:8.1f} ms (median of "
                  f"{pc.get('hit_runs', 1)}) "
                  f"({pc['cached_tokens']} tokens from the cache)   {pc['speedup']:.1f}x"]
    if doc.get("speculative"):
        from .speculative import format_row
        lines += ["", format_row(doc["speculative"])]
    pool = doc.get("pool")
    if pool:
        state = (f", {pool['state_slots']} state slots x {pool['state_slot_bytes'] / 2**20:.2f} MiB, "
                 f"{pool['snapshot_slots']} snapshot slots" if pool["state_slots"] else "")
        lines += ["", f"memory pool: {pool['bytes'] / 2**20:.0f} MiB, blocks of {pool['block_tokens']} tokens "
                      f"({pool['num_blocks']} x {pool['block_bytes'] / 2**10:.0f} KiB){state}",
                  "  blocks per sequence: " + ", ".join(f"{n} tokens -> {b}"
                                                        for n, b in pool["blocks_per_sequence"].items())]
        for name, t in pool["layer_types"].items():
            lines.append(f"  {t['layers']:3d} x {name:40s} {t['bytes_per_token']:8d} B/token ({t['dtype']})   "
                         f"{t['fixed_bytes'] / 2**20:8.2f} MiB fixed")
    if doc.get("timeline"):
        from .timeline import format_timeline
        lines += ["", format_timeline(doc["timeline"])]
    if doc.get("llama_bench"):
        lines += ["", *llama.format_rows(doc["llama_bench"])]
    if doc["note"]:
        lines += ["", doc["note"]]
    return "\n".join(lines)
