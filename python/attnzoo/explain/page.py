"""The page: one self-contained HTML file (inline CSS, inline SVG, a little vanilla JS; nothing fetched).

Light and dark mode follow prefers-color-scheme; @media print hides the controls and keeps every figure.
Animated figures hold their frames as sibling <div class="frame"> elements stepped by a slider or a play
button (open the file with ?frame=last to start them at their last step). The script also records its own errors on <html data-js-errors>, so a headless browser can check it.
"""
from dataclasses import dataclass, field
from typing import Dict, List

from .svg import esc


@dataclass
class Section:
    id: str
    title: str
    body: str                       # HTML: text and figures
    facts: Dict[str, object] = field(default_factory=dict)  # the numbers drawn, for tests and --json
    figures: int = 0


def figure(content, notice, caption=""):
    """A static figure: `notice` is the one line saying what to look at."""
    cap = f'<div class="caption">{caption}</div>' if caption else ""
    return (f'<figure class="fig">{content}{cap}<figcaption><b>Notice:</b> {esc(notice)}</figcaption>'
            '</figure>')


def animated_figure(frames, notice, captions=None, interval_ms=900):
    """frames: list of HTML/SVG strings; captions: one line per frame shown beside the slider."""
    captions = captions or [""] * len(frames)
    divs = "".join(f'<div class="frame" data-caption="{esc(c)}"{"" if i == 0 else " hidden"}>{f}</div>'
                   for i, (f, c) in enumerate(zip(frames, captions)))
    n = len(frames)
    return (f'<figure class="fig anim" data-interval="{int(interval_ms)}"><div class="frames">{divs}</div>'
            f'<div class="controls"><button type="button" class="play" aria-label="play">&#9654; play</button>'
            f'<input type="range" min="0" max="{n - 1}" value="0" step="1" aria-label="step">'
            f'<span class="step">1/{n}</span> <span class="frame-caption">{esc(captions[0])}</span></div>'
            f'<figcaption><b>Notice:</b> {esc(notice)}</figcaption></figure>')


def table(header, rows, cls="data"):
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


CSS = """
:root { --bg:#fdfdfc; --fg:#1d1f21; --muted:#5f6368; --rule:#d9d9d6; --plot:#f4f4f1; --grid:#e2e2de;
  --c0:#e8e8e4; --c1:#2f6fb3; --c2:#e08a1e; --c3:#3a9a5b; --c4:#b8465b; --c5:#8a63b8; --c6:#9aa0a6; --c7:#c9b037;
  --pos:#d1495b; --neg:#2e86ab; color-scheme: light dark; }
@media (prefers-color-scheme: dark) {
  :root { --bg:#15171a; --fg:#e6e6e3; --muted:#a0a4a8; --rule:#33373c; --plot:#1d2024; --grid:#2c3035;
    --c0:#2a2d31; --c1:#5b9be0; --c2:#f0a445; --c3:#5cc47f; --c4:#e06c80; --c5:#b08ee0; --c6:#6b7075; --c7:#e3cd5a;
    --pos:#f07386; --neg:#5fb3d9; }
}
html { background: var(--bg); color: var(--fg); }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1040px; margin: 0 auto;
  padding: 1.2em 1.4em 4em; }
h1 { font-size: 1.7em; margin: .2em 0; } h2 { font-size: 1.3em; margin: 2em 0 .4em; border-top: 1px solid var(--rule);
  padding-top: 1em; } h3 { font-size: 1.05em; margin: 1.2em 0 .3em; }
p, li { max-width: 78ch; } .muted, .meta { color: var(--muted); } code { font-size: .92em; }
nav ul { columns: 2; list-style: none; padding-left: 0; }
.fig { margin: 1em 0 1.6em; padding: .6em .8em; border: 1px solid var(--rule); border-radius: 6px; }
.fig svg { max-width: 100%; height: auto; display: block; margin: .3em 0; }
.fig figcaption { font-size: .92em; color: var(--muted); margin-top: .3em; }
.fig .row { display: flex; flex-wrap: wrap; gap: 1.2em; align-items: flex-start; }
.fig .row > div { flex: 0 1 auto; } .sub { font-size: .88em; text-align: center; color: var(--muted); }
.controls { display: flex; gap: .7em; align-items: center; flex-wrap: wrap; font-size: .9em; margin-top: .3em; }
.controls input[type=range] { width: 260px; } .controls button { font: inherit; padding: .1em .7em; }
.frame-caption { color: var(--fg); }
svg text { fill: var(--fg); font-family: system-ui, sans-serif; font-size: 11px; }
svg text.small { font-size: 9.5px; fill: var(--muted); } svg text.axis { font-size: 11px; fill: var(--muted); }
svg text.big { font-size: 13px; font-weight: 600; }
.c0 { fill: var(--c0); } .c1 { fill: var(--c1); } .c2 { fill: var(--c2); } .c3 { fill: var(--c3); }
.c4 { fill: var(--c4); } .c5 { fill: var(--c5); } .c6 { fill: var(--c6); } .c7 { fill: var(--c7); }
.pos { fill: var(--pos); } .neg { fill: var(--neg); }
svg rect, svg path { shape-rendering: crispEdges; }
.frame-box { fill: none; stroke: var(--rule); } .plot-bg { fill: var(--plot); }
.grid { stroke: var(--grid); stroke-width: 1; } .vline { stroke: var(--muted); stroke-dasharray: 3 3; }
.hl { fill: none; stroke: var(--fg); stroke-width: 2; }
polyline.line { fill: none; stroke-width: 2.2; shape-rendering: auto; }
polyline.c1, .marker.c1 { stroke: var(--c1); } polyline.c2, .marker.c2 { stroke: var(--c2); }
polyline.c3, .marker.c3 { stroke: var(--c3); } polyline.c4, .marker.c4 { stroke: var(--c4); }
polyline.c5, .marker.c5 { stroke: var(--c5); } polyline.c6, .marker.c6 { stroke: var(--c6); }
polyline.c7, .marker.c7 { stroke: var(--c7); } polyline.c0 { stroke: var(--muted); }
.marker { fill: var(--bg); stroke-width: 2.2; }
.legend { display: flex; flex-wrap: wrap; gap: .3em 1.1em; font-size: .88em; }
.swatch { display: inline-block; width: .9em; height: .9em; margin-right: .35em; vertical-align: -.1em;
  border-radius: 2px; } .swatch.c0 { background: var(--c0); } .swatch.c1 { background: var(--c1); }
.swatch.c2 { background: var(--c2); } .swatch.c3 { background: var(--c3); } .swatch.c4 { background: var(--c4); }
.swatch.c5 { background: var(--c5); } .swatch.c6 { background: var(--c6); } .swatch.c7 { background: var(--c7); }
table.data { border-collapse: collapse; font-size: .88em; margin: .5em 0; font-variant-numeric: tabular-nums; }
table.data th, table.data td { border-bottom: 1px solid var(--rule); padding: .2em .7em; text-align: right; }
table.data th:first-child, table.data td:first-child { text-align: left; }
.check { font-family: ui-monospace, monospace; font-size: .9em; }
.ok { color: var(--c3); } .bad { color: var(--c4); }
@media print {
  html { background: #fff; color: #000; } .controls button, .controls input { display: none; }
  .fig { break-inside: avoid; } h2 { break-before: auto; } nav { display: none; }
}
"""

JS = r"""
(function () {
  var root = document.documentElement, errors = [];
  function note(msg) { errors.push(String(msg)); root.setAttribute('data-js-errors', errors.join(' | ')); }
  window.addEventListener('error', function (e) { note(e.message || 'error'); });
  var origError = console.error;
  console.error = function () { note(Array.prototype.join.call(arguments, ' ')); origError.apply(console, arguments); };
  function setup(fig) {
    var frames = fig.querySelectorAll('.frame'), slider = fig.querySelector('input[type=range]');
    var step = fig.querySelector('.step'), cap = fig.querySelector('.frame-caption');
    var button = fig.querySelector('button.play'), timer = null;
    var interval = parseInt(fig.getAttribute('data-interval') || '900', 10);
    function show(i) {
      for (var j = 0; j < frames.length; j++) frames[j].hidden = (j !== i);
      slider.value = String(i);
      step.textContent = (i + 1) + '/' + frames.length;
      cap.textContent = frames[i].getAttribute('data-caption') || '';
    }
    function stop() { if (timer) { clearInterval(timer); timer = null; button.innerHTML = '&#9654; play'; } }
    slider.addEventListener('input', function () { stop(); show(parseInt(slider.value, 10)); });
    button.addEventListener('click', function () {
      if (timer) { stop(); return; }
      button.innerHTML = '&#10074;&#10074; pause';
      if (parseInt(slider.value, 10) === frames.length - 1) show(0);
      timer = setInterval(function () {
        var i = parseInt(slider.value, 10) + 1;
        if (i >= frames.length) { stop(); return; }
        show(i);
      }, interval);
    });
    show(startAtLast ? frames.length - 1 : 0);
  }
  var startAtLast = /[?&]frame=last/.test(location.search);  // screenshots and print views
  var anims = document.querySelectorAll('figure.anim');
  for (var i = 0; i < anims.length; i++) setup(anims[i]);
  var figs = document.querySelectorAll('figure.fig'), drawn = 0;
  for (var k = 0; k < figs.length; k++) if (figs[k].querySelector('svg *')) drawn++;
  root.setAttribute('data-figures', String(figs.length));
  root.setAttribute('data-figures-drawn', String(drawn));
  root.setAttribute('data-ready', 'yes');
})();
"""


def render(sections: List[Section], meta_html: str, title="attnzoo explain") -> str:
    nav = "".join(f'<li><a href="#{s.id}">{esc(s.title)}</a></li>' for s in sections)
    body = "".join(f'<section id="{s.id}" data-figures="{s.figures}"><h2>{esc(s.title)}</h2>{s.body}</section>'
                   for s in sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>How attention works, measured on this machine</h1><p class=\"meta\">{meta_html}</p>"
            f"<nav><ul>{nav}</ul></nav>{body}<script>{JS}</script></body></html>\n")
