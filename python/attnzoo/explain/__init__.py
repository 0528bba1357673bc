"""attnzoo explain: one self-contained HTML page whose figures come from real runs of this engine's kernels.

    python -m attnzoo.explain [--prompt TEXT] [--section NAME ...] [--quick | --full] [-m DIR] -o explain.html

Sections live in their own modules (visibility, tiles, kv_memory, paged, interference, measured,
inside_model, s4_views); each has ID, TITLE and build(ctx) -> page.Section (HTML plus the facts it drew). The page
itself (CSS, slider script) is page.py; SVG drawing is svg.py.
"""
import datetime
import html
import platform
import time
from dataclasses import dataclass
from typing import Callable, List, Optional

from . import inside_model, interference, kv_memory, measured, paged, s4_views, tiles, visibility
from .page import Section, render

SECTION_MODULES = [visibility, tiles, kv_memory, paged, interference, measured, inside_model, s4_views]
SECTION_NAMES = {
    "visibility": visibility, "tiles": tiles, "memory": kv_memory, "paged": paged,
    "interference": interference, "measured": measured, "model": inside_model, "s4": s4_views,
}


@dataclass
class Context:
    prompt: Optional[str] = None
    full: bool = False
    model_dir: Optional[str] = None
    progress: Optional[Callable[[str], None]] = None


def resolve_sections(names):
    """Section modules for names like 'tiles' (see SECTION_NAMES) or their page ids; None = all."""
    if not names:
        return list(SECTION_MODULES)
    by_id = {m.ID: m for m in SECTION_MODULES}
    out = []
    for n in names:
        m = SECTION_NAMES.get(n) or by_id.get(n)
        if m is None:
            raise ValueError(f"section: unknown {n!r}; expected one of {', '.join(SECTION_NAMES)}")
        if m not in out:
            out.append(m)
    return out


def build_sections(names=None, ctx=None) -> List[Section]:
    ctx = ctx or Context()
    say = ctx.progress or (lambda s: None)
    sections = []
    for m in resolve_sections(names):
        say(f"section {m.TITLE}")
        start = time.perf_counter()
        s = m.build(ctx)
        s.facts["seconds"] = time.perf_counter() - start
        sections.append(s)
    return sections


def build_page(names=None, ctx=None):
    """Returns (html text, sections)."""
    from .. import _core
    ctx = ctx or Context()
    sections = build_sections(names, ctx)
    meta = (f"Generated {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} on {html.escape(_core.cpu_info()['description'])}"
            f" ({platform.machine()}), {_core.num_threads()} threads, SIMD target {html.escape(_core.active_target())}. "
            "Every number and matrix below was computed by running attnzoo's kernels while this page was made.")
    return render(sections, meta), sections
