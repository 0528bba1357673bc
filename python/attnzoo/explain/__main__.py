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
    progress = lambda s: print(f"  {s} ...", file=sys.stderr, flush=True)
    ctx = Context(prompt=args.prompt, full=args.full, model_dir=args.model, progress=progress)
    page, sections = build_page(args.section, ctx)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(page)
    if args.facts:
        with open(args.facts, "w", encoding="utf-8") as f:
            json.dump({s.id: s.facts for s in sections}, f, indent=1, default=str)
    print(f"wrote {args.output} ({len(page.encode()) / 1024:.0f} KiB, {len(sections)} sections)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
