"""python -m attnzoo.conformance (attnzoo conformance): every kernel family and architecture against the installed
references, as a table; --json / --html write it too. Exits 1 when a row fails."""
import argparse
import importlib.metadata
import os
import sys
import time

from . import AREAS, Context, run
from .report import as_html, as_json, summary, text

REFERENCES = ("torch", "transformers", "flash-linear-attention", "fla-core", "gguf", "tokenizers")


def _versions():
    import attnzoo
    found = {"attnzoo": attnzoo.__version__, "target": attnzoo.active_target(), "threads": attnzoo.num_threads()}
    for name in REFERENCES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(prog="attnzoo conformance", description=(
        "Every kernel family and every registered architecture against the reference implementations installed "
        "beside attnzoo (torch, fla's naive references, transformers, the gguf package, HF tokenizers): what was "
        "compared, the worst error, the tolerance, pass / fail, and what was skipped for want of a reference."))
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_true", help="small shapes (the default)")
    speed.add_argument("--full", action="store_true", help="larger shapes")
    parser.add_argument("-m", "--model", action="append", default=[], metavar="PATH",
                        help="also compare this checkpoint (directory or .gguf) with transformers (repeatable)")
    parser.add_argument("--llama-perplexity", metavar="PATH",
                        help="llama.cpp's llama-perplexity binary: its perplexity on the -m GGUF files vs attnzoo's")
    parser.add_argument("--area", action="append", choices=AREAS, metavar="AREA",
                        help=f"only these areas (repeatable): {', '.join(AREAS)}")
    parser.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    parser.add_argument("--html", metavar="FILE", help="write the table as an HTML page")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    for path in args.model:
        if not os.path.exists(path):
            parser.error(f"-m: checkpoint not found: {path}")
    if args.llama_perplexity and not os.access(args.llama_perplexity, os.X_OK):
        parser.error(f"--llama-perplexity: not an executable file: {args.llama_perplexity}")
    for flag, path in (("--json", args.json), ("--html", args.html)):
        parent = os.path.dirname(os.path.abspath(path)) if path else None
        if parent and not os.path.isdir(parent):
            parser.error(f"{flag}: directory {parent!r} does not exist")
    progress = None if args.quiet else (lambda s: print(f"  {s} ...", file=sys.stderr, flush=True))
    ctx = Context(quick=not args.full, models=tuple(args.model), llama_perplexity=args.llama_perplexity,
                  progress=progress)
    start = time.perf_counter()
    rows = run(ctx, areas=args.area)
    meta = dict(_versions(), mode="full" if args.full else "quick", seconds=round(time.perf_counter() - start, 1))
    sys.stdout.write(text(rows))
    for path, render in ((args.json, as_json), (args.html, as_html)):
        if path:
            with open(path, "w", encoding="utf-8") as f:
                f.write(render(rows, meta))
            print(f"wrote {path}")
    return 1 if any(r["status"] == "fail" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
