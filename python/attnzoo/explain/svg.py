"""Small inline-SVG builders for the explainer: heatmaps, line charts, bars, legends.

Colours come from CSS classes (c0 .. c7, defined in page.py for light and dark mode) or from fill-opacity over
a fixed hue, so every figure reads on a light and a dark background and in print. Numbers drawn into figures
are whatever the caller measured; nothing here invents data.
"""
import html
import math

CELL_CLASSES = ("c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7")


def esc(text):
    return html.escape(str(text), quote=True)


def _num(x):
    return f"{x:.1f}".rstrip("0").rstrip(".") if isinstance(x, float) else str(x)


def svg(width, height, body, label):
    """An <svg> element with a viewBox (scales with the page) and an accessible label."""
    return (f'<svg viewBox="0 0 {_num(width)} {_num(height)}" width="{_num(width)}" role="img" '
            f'aria-label="{esc(label)}" xmlns="http://www.w3.org/2000/svg">{body}</svg>')


def text(x, y, s, cls="", anchor="start", size=None, rotate=None):
    attrs = f' class="{cls}"' if cls else ""
    if anchor != "start":
        attrs += f' text-anchor="{anchor}"'
    if size:
        attrs += f' font-size="{size}"'
    if rotate is not None:
        attrs += f' transform="rotate({rotate} {_num(x)} {_num(y)})"'
    return f'<text x="{_num(x)}" y="{_num(y)}"{attrs}>{esc(s)}</text>'


def class_grid(cells, x0, y0, cell, classes, titles=None, gap=0.0):
    """Categorical heatmap: cells[r][c] is an index into `classes` (None: nothing drawn). Runs of equal cells
    on a row merge into one rect so a 256x256 matrix stays small. titles: optional {value: tooltip}."""
    out = []
    for r, row in enumerate(cells):
        c = 0
        n = len(row)
        while c < n:
            v = row[c]
            end = c + 1
            if gap == 0:
                while end < n and row[end] == v:
                    end += 1
            if v is not None:
                w = (end - c) * cell - gap
                tip = f"<title>{esc(titles[v])}</title>" if titles and v in titles else ""
                out.append(f'<rect x="{_num(x0 + c * cell)}" y="{_num(y0 + r * cell)}" width="{_num(w)}" '
                           f'height="{_num(cell - gap)}" class="{classes[v]}">{tip}</rect>')
            c = end
    return "".join(out)


def value_grid(values, x0, y0, cell, vmax=None, levels=12):
    """Diverging heatmap of a float matrix: positive in the 'pos' hue, negative in the 'neg' hue, opacity
    proportional to |value| / vmax (quantised to `levels` steps, one <path> per step so frames stay small),
    so zero shows the page background in either colour scheme."""
    rows = len(values)
    cols = len(values[0]) if rows else 0
    if vmax is None:
        vmax = max((abs(float(v)) for row in values for v in row), default=1.0) or 1.0
    paths = {}
    for r in range(rows):
        for c in range(cols):
            v = float(values[r][c])
            level = min(levels, int(round(levels * abs(v) / vmax)))
            if level == 0:
                continue
            paths.setdefault(("pos" if v > 0 else "neg", level), []).append(
                f"M{_num(x0 + c * cell)} {_num(y0 + r * cell)}h{_num(cell)}v{_num(cell)}h-{_num(cell)}z")
    out = [f'<path d="{"".join(d)}" class="{cls}" fill-opacity="{level / levels:.2f}"/>'
           for (cls, level), d in sorted(paths.items())]
    out.append(f'<rect x="{_num(x0)}" y="{_num(y0)}" width="{_num(cols * cell)}" height="{_num(rows * cell)}" '
               'class="frame-box"/>')
    return "".join(out)


LABEL_CHARS = 10  # token labels longer than this end in an ellipsis


def short_label(s):
    """A token as an axis label: whitespace-only tokens shown as their repr, long ones cut with an ellipsis."""
    s = s.strip() or repr(s)
    return s if len(s) <= LABEL_CHARS else s[:LABEL_CHARS - 1] + "\u2026"


def legend_width(items, size=10):
    """The width legend() draws `items` in, so a figure can make room for all of it."""
    return sum(size + 10 + 6.2 * len(label) for _, label in items)


def legend(items, x, y, size=10, step=None):
    """items: [(css class, label)], drawn left to right."""
    out, cx = [], x
    for cls, label in items:
        out.append(f'<rect x="{_num(cx)}" y="{_num(y - size + 1)}" width="{size}" height="{size}" class="{cls}"/>')
        out.append(text(cx + size + 4, y, label, "small"))
        cx += step or (size + 10 + 6.2 * len(label))
    return "".join(out)


def _ticks(lo, hi, log):
    if log:
        a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        ticks = [10.0 ** e for e in range(a, b + 1)]
        if len(ticks) <= 3:
            ticks = sorted({t * m for t in ticks for m in (1, 2, 5)})
        return [t for t in ticks if lo * 0.999 <= t <= hi * 1.001]
    span = hi - lo or 1.0
    step = 10 ** math.floor(math.log10(span / 5))
    for m in (1, 2, 5, 10):
        if span / (step * m) <= 6:
            step *= m
            break
    t = math.ceil(lo / step) * step
    out = []
    while t <= hi + 1e-9 * span:
        out.append(t)
        t += step
    return out


def human_bytes(b):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(b) < 1024 or unit == "TiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.3g} {unit}"
        b /= 1024.0


def human_tokens(n):
    """Token counts the way people say them: 256, 1k, 4k, 128k (binary k)."""
    n = int(n)
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def human_count(x):
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if x >= div:
            return f"{x / div:g}{unit}"
    return f"{x:g}"


def line_chart(series, *, width=640, height=320, xlabel="", ylabel="", xlog=False, ylog=False, xfmt=None,
               yfmt=None, label="chart", markers=(), vlines=(), ylim=None, xticks=None, yticks=None):
    """series: [{"name", "cls", "points": [(x, y)], "dash": bool}]; markers: [{"x", "y", "cls", "title"}]
    (measured points drawn over the lines); vlines: [(x, text)]."""
    xs = [p[0] for s in series for p in s["points"]] + [m["x"] for m in markers]
    ys = [p[1] for s in series for p in s["points"]] + [m["y"] for m in markers]
    if ylim:
        ys = list(ylim)
    xlo, xhi = min(xs), max(xs)
    ylo, yhi = min(ys), max(ys)
    if not ylog and not ylim:
        ylo = min(0.0, ylo)
        yhi = yhi * 1.05 or 1.0
    if ylog and ylo <= 0:
        ylo = min(y for y in ys if y > 0)
    # Vertical-line labels go in a strip above the plot, where no data line can run over them.
    left, right, top, bottom = 64, 14, 26 if vlines else 12, 44
    pw, ph = width - left - right, height - top - bottom

    def fx(x):
        if xlog:
            return left + pw * (math.log(x) - math.log(xlo)) / ((math.log(xhi) - math.log(xlo)) or 1)
        return left + pw * (x - xlo) / ((xhi - xlo) or 1)

    def fy(y):
        if ylog:
            y = max(y, ylo)
            return top + ph - ph * (math.log(y) - math.log(ylo)) / ((math.log(yhi) - math.log(ylo)) or 1)
        return top + ph - ph * (y - ylo) / ((yhi - ylo) or 1)

    out = [f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="plot-bg"/>']
    for t in xticks or _ticks(xlo, xhi, xlog):
        out.append(f'<line x1="{fx(t):.1f}" y1="{top}" x2="{fx(t):.1f}" y2="{top + ph}" class="grid"/>')
        out.append(text(fx(t), top + ph + 14, xfmt(t) if xfmt else _num(t), "small", "middle"))
    for t in [t for t in yticks if ylo <= t <= yhi] if yticks else _ticks(ylo, yhi, ylog):
        out.append(f'<line x1="{left}" y1="{fy(t):.1f}" x2="{left + pw}" y2="{fy(t):.1f}" class="grid"/>')
        out.append(text(left - 4, fy(t) + 3, yfmt(t) if yfmt else _num(t), "small", "end"))
    for x, note in vlines:
        out.append(f'<line x1="{fx(x):.1f}" y1="{top}" x2="{fx(x):.1f}" y2="{top + ph}" class="vline"/>')
        out.append(text(fx(x), top - 6, note, "small", "middle"))
    for s in series:
        pts = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in s["points"])
        dash = ' stroke-dasharray="5 3"' if s.get("dash") else ""
        out.append(f'<polyline points="{pts}" class="line {s["cls"]}"{dash}><title>{esc(s["name"])}</title>'
                   '</polyline>')
    for m in markers:
        out.append(f'<circle cx="{fx(m["x"]):.1f}" cy="{fy(m["y"]):.1f}" r="4" class="marker {m["cls"]}">'
                   f'<title>{esc(m.get("title", ""))}</title></circle>')
    out.append(text(left + pw / 2, height - 6, xlabel, "axis", "middle"))
    out.append(text(12, top + ph / 2, ylabel, "axis", "middle", rotate=-90))
    return svg(width, height, "".join(out), label)


def legend_html(series):
    """A legend under a chart, as HTML (wraps on narrow screens)."""
    items = "".join(f'<span class="key"><span class="swatch {s["cls"]}"></span>{esc(s["name"])}</span>'
                    for s in series)
    return f'<div class="legend">{items}</div>'
