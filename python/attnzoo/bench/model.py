"""Model benchmark: prefill and decode speed of a loaded checkpoint, against this machine's measured peaks.

    python -m attnzoo.bench.model model -m DIR [--prompt 512] [--gen 128] [--contexts 64,512,2048] [--json]
                                        [--dtype float32|bfloat16|auto] [--linear-prefill chunked|recurrent]
                                        [--prefix 2048] [--prefix-new 32] [--snapshot-interval-blocks 32]
                                        [--speculative ngram|draft [--num-speculative-tokens 4]
                                         [--draft-model DIR] [--prompt-lookup-max 3] [--prompt-lookup-min 1]]
                                        [--llama-bench PATH [--llama-bench-args ARGS]]

In one run: the f32 FMA peak and the streaming read bandwidth (attnzoo.bench's probes, best of a run at the
start and one at the end), then
  prefill   a random prompt of --prompt tokens through a fresh sequence (median of --repeats runs): tokens/s,
            and the projection GEMMs' GFLOP/s as a fraction of the peak of the products that ran (`attnzoo
            inspect`'s "products" line): the f32 FMA peak, bf16 on AMX tiles or vdpbf16ps, or 8-bit integers on
            vpdpbusd (prompts over block weights on the VNNI rows);
  decode    --gen single-token steps after that prompt: tokens/s, and the weight bytes each step streams
            (every layer's projections and the lm_head as held) / step time, as a fraction of the bandwidth;
  contexts  shorter decode runs after prompts of several lengths: attention layers slow down as their KV
            cache grows, linear / SSM layers (fixed-size state) stay flat;
  prefix    time to first token for a --prefix-token shared prefix + --prefix-new new tokens, cold (prefix cache
            cleared) and on a prefix-cache hit (the prefix's KV blocks, and for recurrent layers the state
            snapshot at its end, restored from the pool);
  pool      the model's memory pool: size, block size, blocks per sequence and bytes per token for each layer
            type, all from the layers' CacheSpecs (Model.inspect()).
  speculative (with --speculative) greedy decoding of --gen tokens plainly and with exact speculative decoding:
            speedup, acceptance rate, mean acceptance length (attnzoo.bench.speculative).
  llama.cpp (with --llama-bench PATH, a GGUF -m) llama.cpp's llama-bench on the same file, prompt / generation
            lengths and threads, beside our prefill / decode with the ratio (attnzoo.bench.llama_bench);
            --llama-bench-args passes more of its flags. If llama-bench fails, the report keeps our rows and
            says why it failed, and the exit status is 1.
--linear-prefill=recurrent makes linear / SSM mixers run prompts token by token on their recurrent kernels
(what the chunked kernels buy); softmax attention is unaffected.
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

from .. import _core
from . import llama_bench as llama
from .harness import better_peaks, bf16_peak_name, measure_peaks
from .model_report import format_report

PROBE_SCALES = ("full", "quick", "tiny")
LINEAR_PREFILL = ("chunked", "recurrent")
MATMUL_PRECISIONS = ("auto", "highest", "high", "medium")
SOFTMAX_KINDS = ("attention", "sliding_attention")


# --- what the model costs per token ------------------------------------------------------------------------

def _safetensors_headers(model_dir):
    """{tensor name: shape} from every *.safetensors header in the directory (reads headers only); for a GGUF
    (the file, or a directory holding one) its tensors under their Hugging Face names."""
    if _core.find_model_gguf(model_dir):
        return {t["name"]: t["shape"] for t in _core.model_tensors(model_dir)}
    shapes = {}
    for name in sorted(os.listdir(model_dir)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(model_dir, name), "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        shapes.update({k: v["shape"] for k, v in header.items() if k != "__metadata__"})
    return shapes


def layer_matrix_elements(model_dir):
    """Elements of the 2-D weights inside the decoder layers: a token costs 2 FLOPs per element in the
    projections (dense models; a mixture of experts would count only its active experts)."""
    return sum(int(np.prod(s)) for k, s in _safetensors_headers(model_dir).items()
               if len(s) == 2 and ".layers." in k)


def attention_flops(info, start, tokens):
    """Score and value FLOPs of the softmax layers for `tokens` new queries after `start` cached tokens."""
    hq, d = info["num_attention_heads"], info["head_dim"]
    total = 0
    for layer in info["layers"]:
        if layer["kind"] not in SOFTMAX_KINDS:
            continue
        for i in range(start, start + tokens):  # query i sees keys 0..i (its last `window` with a window)
            total += min(i + 1, layer["window"]) if layer["window"] else i + 1
    return 4.0 * hq * d * total


def cache_bytes_read(info, context):
    """Bytes of per-sequence memory a decode step reads at `context` tokens: the visible part of every KV cache
    and every fixed-size state."""
    total = 0
    for layer in info["layers"]:
        c = layer["cache"]
        visible = min(context, c["window"]) if c["window"] else context
        total += c["bytes_per_token"] * visible + c["fixed_bytes"]
    return total


def pool_report(info, lengths):
    """The memory pool as Model.inspect() describes it, with the blocks a sequence of each length holds and the
    bytes per token / per sequence of each layer type (the same CacheSpecs the pool is sized from)."""
    pool = info["pool"]
    B = pool["block_tokens"]
    types = {}
    for layer in info["layers"]:
        c = layer["cache"]
        name = f"{layer['kind']} ({c['kind']})"
        # The paged part is in the pool's KV dtype; recurrent state is always f32 (CacheSpec).
        dtype = c["dtype"] if c["paged_tensors"] else "float32"
        entry = types.setdefault(name, {"layers": 0, "dtype": dtype, "bytes_per_token": c["bytes_per_token"],
                                        "fixed_bytes": c["fixed_bytes"]})
        entry["layers"] += 1
    paged = pool["num_blocks"] > 0
    return {"bytes": pool["bytes"], "block_tokens": B, "num_blocks": pool["num_blocks"],
            "block_bytes": pool["block_bytes"], "state_slots": pool["state_slots"],
            "state_slot_bytes": pool["state_slot_bytes"], "snapshot_slots": pool["snapshot_slots"],
            "blocks_per_sequence": {n: -(-n // B) if paged else 0 for n in sorted(set(lengths))},
            "layer_types": types}


# --- timing ------------------------------------------------------------------------------------------------

def _decode_steps(model, seq, n, rng):
    """n single-token steps on seq; returns each step's seconds."""
    times = []
    for _ in range(n):
        token = np.array([rng.integers(model.vocab_size)], np.int32)
        t0 = time.perf_counter()
        model.forward(token, seq=seq, last_only=True)
        times.append(time.perf_counter() - t0)
    return times


def _decode_row(info, context, times, bandwidth):
    step = float(np.median(times))
    weights = info["decode_weight_bytes"]
    cache = cache_bytes_read(info, context)
    # What memory explains: the bytes the step must read at the measured bandwidth; the rest of the step is
    # fixed cost (pool dispatches, small ops, kernels below bandwidth), shown per layer.
    moved_s = (weights + cache) / (bandwidth * 1e9) if bandwidth else None
    return {"context": context, "tokens": len(times), "seconds": float(sum(times)),
            "tokens_per_s": len(times) / sum(times), "median_step_ms": step * 1e3,
            "weight_bytes_per_token": weights, "cache_bytes_per_token": cache,
            "weight_gbps": weights / step * 1e-9, "total_gbps": (weights + cache) / step * 1e-9,
            "fraction_of_bandwidth": weights / step * 1e-9 / bandwidth if bandwidth else None,
            "bytes_share_of_step": moved_s / step if moved_s is not None else None,
            "fixed_us_per_layer": (step - moved_s) / max(info["num_layers"], 1) * 1e6 if moved_s is not None else None}


def _prefix_cache_row(model, rng, prefix, new, hits=3):
    """Time to first token of prefix + new tokens: cold (prefix cache cleared first, one run: it is the long one),
    then the median of `hits` other requests sharing the prefix, served from the cache."""
    shared = rng.integers(model.vocab_size, size=prefix).astype(np.int32)

    def first_token(clear):
        if clear:
            model.clear_prefix_cache()
        seq = model.new_sequence()
        tail = rng.integers(model.vocab_size, size=new).astype(np.int32)
        t0 = time.perf_counter()
        model.forward(np.concatenate([shared, tail]), seq=seq, last_only=True)
        return time.perf_counter() - t0, seq.cached_tokens  # seq goes: its blocks stay cached for the next

    cold, _ = first_token(True)
    runs = [first_token(False) for _ in range(hits)]
    hit = float(np.median([t for t, _ in runs]))
    return {"prefix": prefix, "new": new, "cold_seconds": cold, "hit_seconds": hit, "hit_runs": hits,
            "speedup": cold / hit, "cached_tokens": min(c for _, c in runs)}


def default_contexts(prompt, max_positions):
    contexts = sorted({max(1, prompt // 8), prompt, prompt * 4})
    return [c for c in contexts if not max_positions or c < max_positions] or [min(prompt, max_positions - 1)]


def _config_positions(model_dir):
    """The model's context as the engine derives it from the config (max_position_embeddings, or YaRN's extension),
    0 when unbounded; read without loading the weights. ValueError naming the file for a missing or bad config."""
    return int(_core.model_context_length(model_dir))


def _check_fits(model_dir, prompt, gen, prefix, prefix_new):
    max_pos = _config_positions(model_dir)
    if max_pos and prompt + gen > max_pos:
        raise ValueError(f"--prompt {prompt} + --gen {gen} = {prompt + gen} tokens exceed the model's context "
                         f"of {max_pos} ({_core.context_origin}): pass a smaller --prompt / --gen")
    if max_pos and prefix and prefix + prefix_new > max_pos:
        raise ValueError(f"--prefix {prefix} + --prefix-new {prefix_new} = {prefix + prefix_new} tokens exceed the "
                         f"model's context of {max_pos} ({_core.context_origin}): pass a smaller --prefix")


def run_model_bench(model_dir, prompt=512, gen=128, contexts=None, context_gen=None, dtype="auto",
                    linear_prefill="chunked", matmul_precision="auto", repeats=3, probes="quick", seed=0,
                    progress=None, prefix=None, prefix_new=32, block_size=16, kv_cache_dtype="auto",
                    kv_cache_bytes=None, snapshot_interval_blocks=32, speculative=None, llama_bench=None,
                    llama_bench_args=(), timeline=False, batch_invariant=False, device="auto"):
    """Measures the machine, then the model; returns the document `--json` prints.

    contexts: prompt lengths for the decode-vs-context sweep (None: prompt/8, prompt, 4 * prompt within the
    model's max_position_embeddings); context_gen: decode steps at each (None: min(gen, 32)).
    probes: scale of the peak probes ("full", "quick" or "tiny" for tests).
    matmul_precision: "auto" (each projection at its weights' precision), "highest" (f32 products) or "medium"
    (bf16 products on AVX-512-BF16 CPUs, see attnzoo.set_float32_matmul_precision); where the projections take
    bf16 products they are compared with the bf16 product peak.
    prefix / prefix_new: the prefix-cache row's shared prefix and new tokens (prefix 0: no such row; None: 2048,
    or no row when the model's max_position_embeddings is shorter).
    block_size, kv_cache_dtype, kv_cache_bytes, snapshot_interval_blocks: the memory pool, as Model.load takes
    them (snapshots every 32 blocks = 512 tokens: a hybrid can hit a prefix at any multiple of 512 tokens for
    a few state copies per prompt).
    speculative: None, or bench_speculative.speculative_row's keyword arguments (method, num_speculative_tokens,
    draft_model, prompt_lookup_min / max): a row of plain against speculative greedy decoding of `gen` tokens.
    timeline: add the pool's per-job timeline of a decode step after the prompt (bench/timeline.py).
    batch_invariant: run with batch-invariant numerics (attnzoo.set_batch_invariant), to measure what they cost.
    device: where the model runs (Model.load's device; the document's "device" says where it did).
    llama_bench: None, or the path of llama.cpp's llama-bench, run on the model's GGUF with the same prompt, gen,
    threads and repeats after our runs (model_dir must be a GGUF, or a directory holding one).
    llama_bench_args: more llama-bench arguments for both of its runs (e.g. ["--repack", "0"]). Where llama-bench
    fails, our rows stand and the document's llama_bench section carries the error instead of its rows.
    """
    from ..model import Model
    if prompt < 1 or gen < 1 or repeats < 1:
        raise ValueError("prompt, gen and repeats must be >= 1")
    if linear_prefill not in LINEAR_PREFILL:
        raise ValueError(f"linear_prefill: expected one of {', '.join(LINEAR_PREFILL)}, got {linear_prefill!r}")
    if matmul_precision not in MATMUL_PRECISIONS:
        raise ValueError(f"matmul_precision: expected one of {', '.join(MATMUL_PRECISIONS)}, "
                         f"got {matmul_precision!r}")
    if (prefix is not None and prefix < 0) or prefix_new < 1:
        raise ValueError("prefix must be >= 0 and prefix_new >= 1")
    if probes not in PROBE_SCALES:
        raise ValueError(f"probes: expected one of {', '.join(PROBE_SCALES)}, got {probes!r}")
    _check_fits(model_dir, prompt, gen, prefix, prefix_new)  # before the probes and the load: seconds
    gguf = None
    if llama_bench:
        llama.check_executable(llama_bench)
        gguf = llama.model_gguf(model_dir)
        llama_bench_args = llama.check_args(llama_bench_args)
    elif llama_bench_args:
        raise ValueError("llama_bench_args: only with llama_bench (--llama-bench PATH)")
    say = progress or (lambda s: None)
    rng = np.random.default_rng(seed)
    config = _core.bench_config(probes)

    say("measuring FMA peak and memory bandwidth")
    peaks = measure_peaks(config)
    say(f"loading {model_dir} ({dtype})")
    previous_mode, previous_precision = _core.linear_prefill(), _core.get_float32_matmul_precision()
    previous_invariant = _core.batch_invariant()
    # Before the load: what "auto" resolves to (Model.formats) depends on the precision.
    _core.set_float32_matmul_precision(matmul_precision)
    _core.set_batch_invariant(bool(batch_invariant))
    _core.set_linear_prefill(linear_prefill)
    try:
        t0 = time.perf_counter()
        model = Model.load(model_dir, dtype=dtype, block_size=block_size, kv_cache_dtype=kv_cache_dtype,
                           kv_cache_bytes=kv_cache_bytes, snapshot_interval_blocks=snapshot_interval_blocks,
                           device=device)
        load_s = time.perf_counter() - t0
        info = model.inspect()
        max_pos = info["max_position_embeddings"]
        if max_pos and prompt + gen > max_pos:
            raise ValueError(f"prompt + gen ({prompt + gen}) exceeds the model's max_position_embeddings "
                             f"({max_pos})")
        notes = []
        if prefix is None:
            prefix = 2048 if not max_pos or 2048 + prefix_new <= max_pos else 0
        if max_pos and prefix + prefix_new > max_pos:
            raise ValueError(f"prefix + prefix_new ({prefix + prefix_new}) exceeds the model's "
                             f"max_position_embeddings ({max_pos})")
        contexts = sorted(set(contexts)) if contexts else default_contexts(prompt, max_pos)
        if any(c < 1 for c in contexts):
            raise ValueError("contexts must be >= 1")
        context_gen = context_gen or min(gen, 32)
        linear_layers = sum(1 for l in info["layers"] if l["kind"] not in SOFTMAX_KINDS)

        # Warm-up: touches every weight page once so the first timed run does not pay the mapping in.
        model.forward(rng.integers(model.vocab_size, size=min(prompt, 8)).astype(np.int32), last_only=True)
        say(f"prefill {prompt} tokens x {repeats}")
        prefill_times, prefill_cached, seq = [], 0, None
        for _ in range(repeats):
            # A new random prompt each run: the same one again would be served from the prefix cache.
            ids = rng.integers(model.vocab_size, size=prompt).astype(np.int32)
            seq = model.new_sequence()
            t0 = time.perf_counter()
            model.forward(ids, seq=seq, last_only=True)
            prefill_times.append(time.perf_counter() - t0)
            prefill_cached = max(prefill_cached, seq.cached_tokens)
        say(f"decode {gen} tokens after {prompt}")
        decode_times = _decode_steps(model, seq, gen, rng)
        step_timeline = None
        if timeline:
            from .timeline import record_step
            say("decode step timeline")
            step_timeline = record_step(model, seq, rng)

        sweep = []
        seq = model.new_sequence()
        for c in contexts:
            say(f"decode {context_gen} tokens at context {c}")
            if seq.length < c:  # grow the one sequence through every context in turn
                model.forward(rng.integers(model.vocab_size, size=c - seq.length).astype(np.int32), seq=seq,
                              last_only=True)
            sweep.append((seq.length, _decode_steps(model, seq, context_gen, rng)))
        del seq
        spec_row = None
        if speculative:
            from .speculative import speculative_row
            say(f"speculative decoding ({speculative['method']}): {gen} greedy tokens, plain and speculative")
            spec_row = speculative_row(model, gen=gen, **speculative)
        prefix_row = None
        if prefix:
            say(f"time to first token: {prefix}-token shared prefix + {prefix_new}, cold and on a prefix hit")
            prefix_row = _prefix_cache_row(model, rng, prefix, prefix_new)
    finally:
        _core.set_linear_prefill(previous_mode)
        _core.set_float32_matmul_precision(previous_precision)
        _core.set_batch_invariant(previous_invariant)

    llama_rows = llama_error = None
    if llama_bench:  # after ours, before the closing peak probes: both sides see the same machine state
        say(f"llama-bench: pp{prompt} / tg{gen} on {gguf}, {_core.num_threads()} threads x {repeats}")
        try:
            llama_rows = llama.run(llama_bench, gguf, prompt, gen, _core.num_threads(), repeats,
                                   extra=llama_bench_args)
        except ValueError as e:  # our rows, minutes of measurement, still stand
            llama_error = str(e)

    say("measuring the peaks again")
    peaks = better_peaks(peaks, measure_peaks(config))
    fma, bandwidth = peaks["fma"]["gflops"], peaks["memory"]["gbps"]
    products, int8_rows = prompt_products(info["formats"], prompt)
    # The engine's ceiling: AMX tiles where they run, else vdpbf16ps; for the integer rows vpdpbusd (VNNI), the
    # AVX2 rows' vpmaddubsw + vpmaddwd (AVX-VNNI's vpdpbusd for the regrouped ones where the CPU has it), the f32
    # FMA peak for the portable int16 rows.
    ceiling = {"bf16": bf16_peak_name(),
               "int8": {"VNNI": "vnni_int8", "AVX2": "avx2_int8",
                        "AVX-VNNI": "avx_vnni_int8"}.get(int8_rows, "fma")}.get(products, "fma")
    if ceiling != "fma":
        p = config["probes"]
        probe = {"amx_bf16": _core.measure_amx_bf16_peak, "bf16_dot": _core.measure_bf16_dot_peak,
                 "vnni_int8": _core.measure_vnni_int8_peak, "avx2_int8": _core.measure_avx2_int8_peak,
                 "avx_vnni_int8": lambda s, r: _core.measure_avx2_int8_peak(s, r, avx_vnni=True)}[ceiling]
        peaks[ceiling] = max((probe(p["fma_seconds"], p["fma_runs"]) for _ in range(2)), key=lambda d: d["gflops"])

    prefill_s = float(np.median(prefill_times))
    linear_flops = 2.0 * layer_matrix_elements(model_dir) * prompt + 2.0 * info["hidden_size"] * info["vocab_size"]
    attn_flops = attention_flops(info, 0, prompt)
    prefill = {"tokens": prompt, "runs": repeats, "seconds": prefill_s, "min_seconds": float(min(prefill_times)),
               "cached_tokens": prefill_cached,
               "tokens_per_s": prompt / prefill_s,
               "linear_gflop": linear_flops * 1e-9, "attention_gflop": attn_flops * 1e-9,
               "linear_gflops": linear_flops / prefill_s * 1e-9,
               "total_gflops": (linear_flops + attn_flops) / prefill_s * 1e-9}
    prefill["fraction_of_fma_peak"] = prefill["linear_gflops"] / fma
    prefill["products"] = products
    prefill["ceiling_gflops"] = fma if ceiling == "fma" else peaks[ceiling]["gflops"]
    prefill["ceiling"] = ceiling
    prefill["fraction_of_ceiling"] = prefill["linear_gflops"] / prefill["ceiling_gflops"]
    decode = _decode_row(info, prompt, decode_times, bandwidth)
    by_context = [_decode_row(info, c, times, bandwidth) for c, times in sweep]

    cpu = _core.cpu_info()
    if matmul_precision == "medium" and products == "f32":
        notes.append("--matmul-precision=medium has no effect here: no bf16 tiles (no AMX or AVX-512-BF16, or off: "
                     "see attnzoo info; products stay f32)")
    if linear_prefill == "recurrent" and not linear_layers:
        notes.append("--linear-prefill=recurrent has no effect: the model has no linear / SSM layers")
    return {
        "model": {"directory": os.path.abspath(model_dir), "architecture": info["architecture"],
                  "parameter_count": info["parameter_count"], "weights_dtype": info["weights_dtype"],
                  "checkpoint_dtype": info["checkpoint_dtype"], "num_layers": info["num_layers"],
                  "layer_kinds": sorted({l["kind"] for l in info["layers"]}), "linear_layers": linear_layers,
                  "decode_weight_bytes": info["decode_weight_bytes"], "load_seconds": load_s},
        "machine": {"cpu": cpu["model"], "cpu_description": cpu["description"],
                    "microarchitecture": cpu["microarchitecture"], "threads": _core.num_threads(),
                    "target": _core.active_target(),
                    "load_average": os.getloadavg()[0]},
        "settings": {"prompt": prompt, "gen": gen, "contexts": contexts, "context_gen": context_gen,
                     "dtype": dtype, "linear_prefill": linear_prefill, "matmul_precision": matmul_precision,
                     "batch_invariant": bool(batch_invariant), "device": model.device,
                     "repeats": repeats, "probes": probes, "prefix": prefix, "prefix_new": prefix_new,
                     "block_size": block_size, "kv_cache_dtype": kv_cache_dtype, "formats": info["formats"],
                     "snapshot_interval_blocks": snapshot_interval_blocks},
        "pool": pool_report(info, [prompt + gen, *contexts, prefix + prefix_new]),
        "prefix_cache": prefix_row,
        "speculative": spec_row,
        "peaks": peaks,
        "prefill": prefill,
        "decode": decode,
        "decode_by_context": by_context,
        "timeline": step_timeline,
        "llama_bench": None if not llama_bench else {
            "path": os.path.abspath(llama_bench), "gguf": os.path.abspath(gguf), "threads": _core.num_threads(),
            "args": list(llama_bench_args), "error": llama_error,
            "build_commit": llama_rows[0]["build_commit"] if llama_rows else None, "rows": llama_rows or [],
            "comparison": llama.comparison({"prefill": prefill, "decode": decode}, llama_rows or [])},
        "note": "; ".join(notes),
    }


def prompt_products(formats, prompt):
    """(products, int8 rows) a prompt of `prompt` tokens runs on, from Model.inspect()'s formats: "int8" with the
    rows ("VNNI", "AVX2", "AVX-VNNI", "portable") where prompts of that length take the integer rows (every length, or up to
    formats["int8_prompt_max_tokens"]), else the panels' "f32" / "bf16" and ""."""
    rows, limit = formats.get("int8_rows") or "", formats.get("int8_prompt_max_tokens") or 0
    if formats["prefill_products"] == "int8":
        return "int8", rows or "VNNI"
    if rows and 8 < prompt <= limit:
        return "int8", rows
    return formats["prefill_products"], ""


def _int_list(text):
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def _byte_size(text):
    """4G, 512M, 64K (powers of 1024) or plain bytes, as `attnzoo generate --kv-cache-memory` takes them."""
    shift = {"K": 10, "M": 20, "G": 30, "T": 40}.get(text[-1:].upper(), 0)
    try:
        n = int(text[:-1] if shift else text)
    except ValueError:
        n = 0
    if n <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive size such as 4G, 512M or 1048576, got {text!r}")
    return n << shift


def main(argv=None):
    parser = argparse.ArgumentParser(prog="attnzoo bench model", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["model"], help="what to benchmark")
    parser.add_argument("-m", "--model", required=True,
                        help="a Hugging Face checkpoint directory, a .gguf file or a directory holding one")
    parser.add_argument("--prompt", type=int, default=512, help="prompt tokens for prefill (default 512)")
    parser.add_argument("--gen", type=int, default=128, help="decode steps after the prompt (default 128)")
    parser.add_argument("--contexts", type=_int_list, help="prompt lengths for the decode sweep, e.g. 64,512,2048")
    parser.add_argument("--context-gen", type=int, help="decode steps at each sweep length (default min(gen, 32))")
    parser.add_argument("--dtype", default="auto", choices=["float32", "bfloat16", "auto"],
                        help="precision the weights are held in (default: as stored)")
    parser.add_argument("--linear-prefill", default="chunked", choices=list(LINEAR_PREFILL),
                        help="linear / SSM mixers' prompt path (recurrent: token by token, to measure the chunked "
                             "kernels' gain)")
    parser.add_argument("--matmul-precision", default="auto", choices=list(MATMUL_PRECISIONS),
                        help="projections: auto (default) = each at its weights' precision (block-quantized and "
                             "bfloat16-held weights as medium, f32 weights as highest), highest = f32 products, "
                             "medium = bf16 products with f32 accumulation on AVX-512-BF16 CPUs, and 8-bit "
                             "activations in quantized decode GEMVs (torch.set_float32_matmul_precision's names)")
    parser.add_argument("--repeats", type=int, default=3, help="prefill runs; the median is reported")
    parser.add_argument("--probes", default="quick", choices=list(PROBE_SCALES), help="size of the peak probes")
    parser.add_argument("--prefix", type=int,
                        help="shared prefix tokens for the prefix-cache row (default 2048 where the model's "
                             "positions reach it; 0: skip it)")
    parser.add_argument("--prefix-new", type=int, default=32, help="new tokens after the shared prefix (default 32)")
    parser.add_argument("--snapshot-interval-blocks", type=int, default=32,
                        help="recurrent-state snapshots every this many blocks (default 32: 512 tokens)")
    parser.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16", "int8", "fp8"],
                        help="element type of the paged KV cache (default: follows --dtype)")
    parser.add_argument("--block-size", type=int, default=16, help="tokens per KV block (default 16)")
    parser.add_argument("--kv-cache-memory", type=_byte_size,
                        help="the memory pool's budget, e.g. 4G (default: a quarter of the free memory)")
    parser.add_argument("--speculative", choices=["ngram", "draft"],
                        help="add a row: greedy decoding with exact speculative decoding against without")
    parser.add_argument("--num-speculative-tokens", type=int, default=4, help="guesses per step (default 4)")
    parser.add_argument("--draft-model", help="the draft model (directory or .gguf) for --speculative draft")
    parser.add_argument("--prompt-lookup-max", type=int, default=3, help="longest n-gram looked up (default 3)")
    parser.add_argument("--prompt-lookup-min", type=int, default=1, help="shortest n-gram looked up (default 1)")
    parser.add_argument("--llama-bench", metavar="PATH",
                        help="llama.cpp's llama-bench (scripts/build_llama_bench.sh builds it): adds its pp / tg "
                             "rows for the same GGUF (-m), lengths and threads beside ours, with the ratio")
    parser.add_argument("--llama-bench-args", metavar="ARGS", default="",
                        help="more llama-bench arguments for both of its runs, as one shell-quoted string (e.g. "
                             "'--repack 0'); the flags bench model sets itself (-m -p -n -d -t -r -o) are refused")
    parser.add_argument("--timeline", action="store_true",
                        help="add where one decode step goes: the thread pool's jobs by op, and the serial time "
                             "between them")
    parser.add_argument("--batch-invariant", action="store_true",
                        help="batch-invariant numerics (the same logits whatever runs beside a token), to measure "
                             "their cost against a run without")
    parser.add_argument("--device", default="auto",
                        help="where the model runs: auto, cpu, cuda or cuda:N (as Model.load's device)")
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of the report")
    args = parser.parse_args(argv)
    if not os.path.exists(args.model):
        parser.error(f"model path not found: {args.model}")
    if not os.path.isdir(args.model) and not (os.path.isfile(args.model) and args.model.endswith(".gguf")):
        parser.error(f"-m: {args.model!r} is neither a directory nor a .gguf file")
    if args.draft_model and args.speculative != "draft":
        parser.error("--draft-model: only --speculative draft uses a draft model")
    if args.speculative == "draft" and not args.draft_model:
        parser.error("--speculative draft: needs --draft-model")
    if args.llama_bench_args and not args.llama_bench:
        parser.error("--llama-bench-args: only with --llama-bench PATH")
    try:
        llama_bench_args = llama.extra_args(args.llama_bench_args)
    except ValueError as e:
        parser.error(str(e))
    speculative = None
    if args.speculative:
        speculative = dict(method=args.speculative, num_speculative_tokens=args.num_speculative_tokens,
                           draft_model=args.draft_model, prompt_lookup_min=args.prompt_lookup_min,
                           prompt_lookup_max=args.prompt_lookup_max)
    progress = lambda s: print(f"  {s} ...", file=sys.stderr, flush=True)
    try:
        doc = run_model_bench(args.model, prompt=args.prompt, gen=args.gen, contexts=args.contexts,
                              context_gen=args.context_gen, dtype=args.dtype, linear_prefill=args.linear_prefill,
                              matmul_precision=args.matmul_precision, repeats=args.repeats, probes=args.probes,
                              progress=progress, prefix=args.prefix, prefix_new=args.prefix_new,
                              snapshot_interval_blocks=args.snapshot_interval_blocks, block_size=args.block_size,
                              kv_cache_dtype=args.kv_cache_dtype, kv_cache_bytes=args.kv_cache_memory,
                              speculative=speculative, llama_bench=args.llama_bench,
                              llama_bench_args=llama_bench_args, timeline=args.timeline,
                              batch_invariant=args.batch_invariant, device=args.device)
    except (ValueError, OSError) as e:  # bad arguments and unreadable checkpoints: one line, no traceback
        print(f"attnzoo bench model: {e}", file=sys.stderr)
        return 1
    print(json.dumps(doc, indent=2) if args.json else format_report(doc))
    failed = doc["llama_bench"] and doc["llama_bench"]["error"]
    if failed:  # printed in the report too; the status tells a script that the side-by-side is missing
        print(f"attnzoo bench model: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
