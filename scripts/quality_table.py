"""Perplexity and file size of one model in several weight types: the README's quality table.

    .venv/bin/python scripts/quality_table.py MODEL [MODEL ...] [-c 512] [--chunks 20] [--text FILE]
    .venv/bin/python scripts/quality_table.py --from .models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --types F32,BF16,Q8_0,Q6_K,Q4_K_M,Q4_K:pure,Q4_0 --work /tmp/quality [--calibration auto] [-c 512] \
        [--chunks 20]

MODEL: GGUF files or Hugging Face checkpoint directories, compared in the order given (the first is the baseline
of the delta column). --from SOURCE makes the rows itself: SOURCE (a checkpoint directory, or a GGUF that
transformers dequantizes into one) written as F32 / BF16 safetensors and quantized by `attnzoo quantize` into each
GGUF type (with --calibration, importance-weighted too: llama.cpp's imatrix, on a text apart from the scored
windows). The types are llama-quantize's file types: Q4_K (like Q2_K, Q3_K and Q5_K) names its Q4_K_M mixture and
is labelled so; TYPE:pure is `--type TYPE --pure`, every matrix in TYPE (the head and embedding too), the single
type. Perplexity is `attnzoo perplexity`'s (llama.cpp's definition) on the first --chunks windows of the
text, by default The Adventures of Sherlock Holmes from the Debian package golang-github-bkaradzic-go-lz4-dev.
Prints a Markdown table with the CPU it ran on. Not part of `make test`: minutes per row on 2 cores.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(ROOT, "build", "attnzoo"))


def _cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import attnzoo
    return attnzoo.cpu_info()["model"]


def model_bytes(path):
    """The weights' bytes on disk: the GGUF file, or a directory's safetensors (or its one GGUF)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    files = glob.glob(os.path.join(path, "*.safetensors")) or glob.glob(os.path.join(path, "*.gguf"))
    if not files:
        raise FileNotFoundError(f"{path}: neither *.safetensors nor a .gguf file")
    return sum(os.path.getsize(f) for f in files)


def weight_type(path):
    """The type most of the weight bytes are stored in (GGUF: its ggml type; safetensors: the dtype)."""
    if os.path.isdir(path) and not glob.glob(os.path.join(path, "*.safetensors")):
        path = glob.glob(os.path.join(path, "*.gguf"))[0]
    counts = {}
    if os.path.isfile(path):
        import gguf
        for t in gguf.GGUFReader(path).tensors:
            name = t.tensor_type.name
            counts[name] = counts.get(name, 0) + int(t.n_bytes)
    else:
        import struct
        for f in glob.glob(os.path.join(path, "*.safetensors")):
            with open(f, "rb") as fh:
                n = struct.unpack("<Q", fh.read(8))[0]
                header = json.loads(fh.read(n))
            for key, t in header.items():
                if key != "__metadata__":
                    counts[t["dtype"]] = counts.get(t["dtype"], 0) + t["data_offsets"][1] - t["data_offsets"][0]
    main = max(counts, key=counts.get)
    others = sorted((k for k in counts if k != main), key=lambda k: -counts[k])
    return main + (f" (+{', '.join(others)})" if others else "")


def read_text(path):
    if path is None:
        from attnzoo.perplexity import default_text
        path = default_text()
    with open(path, encoding="utf-8", newline="") as f:  # the bytes as `attnzoo perplexity -f` reads them
        return path, f.read()


def tokens_of(path, text):
    """The text's ids and BOS by the first model's tokenizer: every row scores the same tokens (a checkpoint
    written by transformers from a GGUF may carry a slightly different tokenizer)."""
    import attnzoo
    tokenizer = attnzoo.Model.load(path).tokenizer
    if tokenizer is None:
        sys.exit(f"{path}: no tokenizer (the first model gives the text's tokens)")
    return attnzoo._core.perplexity_tokens(tokenizer._native, text)


def measure(path, ids, bos, n_ctx, chunks):
    import attnzoo
    import numpy as np
    m = attnzoo.Model.load(path)
    start = time.perf_counter()
    r = m.perplexity(np.asarray(ids, dtype=np.int32), n_ctx=n_ctx, n_chunks=chunks, bos=bos)
    return r, time.perf_counter() - start


def dequantized_checkpoint(source, work, dtype):
    """A Hugging Face directory of SOURCE's weights in dtype ("F32" or "BF16"); a GGUF is dequantized by
    transformers (its Q/K rows put back in Hugging Face order)."""
    out = os.path.join(work, f"hf-{dtype.lower()}")
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    import torch
    import transformers
    if dtype != "F32":
        source = dequantized_checkpoint(source, work, "F32")
    kwargs = {}
    directory = source
    if os.path.isfile(source):
        directory, kwargs["gguf_file"] = os.path.split(os.path.abspath(source))
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32, **kwargs)
    if kwargs:  # transformers will not save a model it loaded from GGUF: the same weights in a fresh one
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        fresh = type(model)(config)
        fresh.load_state_dict(model.state_dict())
        model = fresh
    model.to(torch.bfloat16 if dtype == "BF16" else torch.float32).save_pretrained(out, safe_serialization=True)
    transformers.AutoTokenizer.from_pretrained(directory, **kwargs).save_pretrained(out)
    return out


def calibration_text(path, text, work):
    """--calibration auto: the text's second half, apart from the windows scored at its start."""
    if path != "auto":
        return path
    out = os.path.join(work, "calibration-second-half.txt")
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.write(text[len(text) // 2:])
    return out


# llama-quantize's names for its _M mixtures (and its Q2_K mixture, Q2_K_M in attnzoo)
MIXTURE_ALIASES = {"Q2_K": "Q2_K_M", "Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}


def type_row(spelled):
    """--types entry -> (the row's label, `attnzoo quantize` arguments, file name part)."""
    t, _, option = spelled.partition(":")
    if option not in ("", "PURE"):
        sys.exit(f"--types: '{spelled}': the only option after ':' is pure (TYPE:pure)")
    if option:
        return f"{t} (pure)", ["--type", t, "--pure"], f"{t}-pure"
    return MIXTURE_ALIASES.get(t, t), ["--type", t], MIXTURE_ALIASES.get(t, t)


def make_rows(source, types, work, calibration=None, calibration_tokens=16384):
    """The files to compare: F32 / BF16 checkpoints and one `attnzoo quantize` GGUF per other type (and with
    --calibration, the importance-weighted one beside it for every type it changes)."""
    os.makedirs(work, exist_ok=True)
    rows = []
    for spelled in types:
        if spelled in ("F32", "BF16"):
            rows.append((dequantized_checkpoint(source, work, spelled), spelled))
            continue
        label, type_args, file_part = type_row(spelled)
        t = type_args[1]
        variants = [("", [])]
        if calibration and t not in ("Q8_0", "F16"):  # llama.cpp's imatrix leaves these unchanged
            variants.append(("-imatrix", ["--calibration", calibration, "--calibration-tokens", str(calibration_tokens)]))
        for suffix, flags in variants:
            out = os.path.join(work, f"model-{file_part}{suffix}.gguf")
            if not os.path.exists(out):
                hf = dequantized_checkpoint(source, work, "F32")
                if subprocess.run([CLI, "quantize", "--help"], capture_output=True).returncode != 0:
                    sys.exit(f"{CLI} has no `quantize` command: build it, or pass the files to compare as MODEL")
                subprocess.run([CLI, "quantize", "-m", hf, "-o", out, *type_args, *flags], check=True)
            rows.append((out, label + (" importance-weighted" if suffix else "")))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help="GGUF files or checkpoint directories (first: the baseline)")
    parser.add_argument("--from", dest="source", help="make the rows from this checkpoint directory or GGUF")
    parser.add_argument("--types", default="F32,BF16,Q8_0,Q6_K,Q4_K_M,Q4_K:pure,Q4_0",
                        help="with --from: the weight types (llama-quantize's; TYPE:pure for --pure)")
    parser.add_argument("--work", default=os.path.join(ROOT, ".models", "quality"), help="with --from: where")
    parser.add_argument("--calibration", help="with --from: also quantize importance-weighted (attnzoo quantize "
                        "--calibration) on this text; auto: the second half of the evaluated text")
    parser.add_argument("--calibration-tokens", type=int, default=16384, help="tokens of calibration text run")
    parser.add_argument("--text", help="UTF-8 text (default: Sherlock Holmes from the Debian package)")
    parser.add_argument("-c", "--ctx-size", type=int, default=512)
    parser.add_argument("--chunks", type=int, default=20, help="windows scored per model (-1: the whole text)")
    args = parser.parse_args(argv)
    rows = [(m, None) for m in args.models]
    text_path, text = read_text(args.text)
    if args.source:
        os.makedirs(args.work, exist_ok=True)
        calibration = calibration_text(args.calibration, text, args.work) if args.calibration else None
        rows += make_rows(args.source, [t.strip().upper() for t in args.types.split(",") if t.strip()], args.work,
                          calibration, args.calibration_tokens)
    if not rows:
        parser.error("give MODEL files or --from SOURCE")
    ids, bos = tokens_of(rows[0][0], text)
    chunks = None if args.chunks < 0 else args.chunks
    print(f"perplexity on {os.path.basename(text_path)}, -c {args.ctx_size}, "
          f"{'all' if chunks is None else chunks} windows; {_cpu_name()}, {os.cpu_count()} cores", flush=True)
    print("\n| model | weights | stored as (by bytes) | size (MiB) | PPL | +/- | vs first | s |\n"
          "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |", flush=True)
    base = None
    for path, label in rows:
        r, seconds = measure(path, ids, bos, args.ctx_size, chunks)
        base = base or r.ppl
        delta = f"{100 * (r.ppl / base - 1):+.2f}%"
        err = "" if math.isnan(r.ppl_error) else f"{r.ppl_error:.4f}"
        stored = weight_type(path)
        print(f"| {os.path.basename(os.path.normpath(path))} | {label or stored.split(' ')[0]} | {stored} | "
              f"{model_bytes(path) / 2**20:.1f} | {r.ppl:.4f} | {err} | {delta} | {seconds:.0f} |", flush=True)
    print(f"\n{r.n_scored} tokens scored per row, of the text's {r.n_tokens} (tokenized by the first model's "
          "tokenizer for every row).")


if __name__ == "__main__":
    main()
