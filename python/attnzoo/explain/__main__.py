"""python -m attnzoo.explain: writes the explainer page (see attnzoo.explain)."""
import argparse
import json
import os
import sys

from . import SECTION_NAMES, Context, build_page


def main(argv=None):
    parser = argparse.ArgumentParser(prog="attnzoo explain",
                                     description="Explainer page drawn from real kernel runs on this machine.")
    parser.add_argument("-o", "--output", required=True, help="HTML file to write")
    parser.add_argument("--prompt", help="text whose words label the token axes (and feed section 7)")
    parser.add_argument("--section", action="append", choices=sorted(SECTION_NAMES), metavar="NAME",
                        help=f"only these sections (repeatable): {', '.join(SECTION_NAMES)}")
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_true", help="short measurement sweep (the default)")
    speed.add_argument("--full", action="store_true", help="longer sweep, larger shapes")
    parser.add_argument("-m", "--model", help="model directory for section 7 (Inside a model)")
    parser.add_argument("--facts", help="also write the numbers each section drew as JSON to this file")
    args = parser.parse_args(argv)
    if args.model and not os.path.isdir(args.model):
        parser.error(f"model path not found: {args.model}" if not os.path.exists(args.model)
                     else f"-m: {args.model!r} is not a directory")
    # Checked before the slow sections run, not after: the page and the facts go into existing directories.
    for flag, path in (("-o", args.output), ("--facts", args.facts)):
        parent = os.path.dirname(os.path.abspath(path)) if path else None
        if parent and not os.path.isdir(parent):
            parser.error(f"{flag}: directory {parent!r} does not exist")
        if path and os.path.isdir(path):
            parser.error(f"{flag}: {path!r} is a directory")
    if args.prompt is not None:
        # argv bytes that are not UTF-8 arrive as lone surrogates, which no page can be written with.
        try:
            args.prompt.encode("utf-8")
        except UnicodeEncodeError as e:
            parser.error(f"--prompt: not valid UTF-8 (byte {len(args.prompt[:e.start].encode('utf-8'))})")
    progress = lambda s: print(f"  {s} ...", file=sys.stderr, flush=True)
    ctx = Context(prompt=args.prompt, full=args.full, model_dir=args.model, progress=progress)
    page, sections = build_page(args.section, ctx)
    for flag, path, text in (("-o", args.output, page), ("--facts", args.facts, None)):
        if not path:
            continue
        try:  # checked above, but the file can still be unwritable (permissions, a full disk)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text if text is not None else json.dumps({s.id: s.facts for s in sections}, indent=1,
                                                                 default=str))
        except OSError as e:
            parser.exit(1, f"{parser.prog}: error: {flag}: cannot write {path!r}: {e.strerror}\n")
    print(f"wrote {args.output} ({len(page.encode()) / 1024:.0f} KiB, {len(sections)} sections)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
