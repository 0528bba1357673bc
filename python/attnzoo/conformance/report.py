"""The conformance table as text (the terminal), JSON and a standalone HTML page."""
import html
import json

COLUMNS = ("area", "family", "compared", "reference", "worst error", "tolerance", "status")


def _number(x):
    return "" if x is None else ("0" if x == 0 else f"{x:.2e}")


def _cells(r):
    reason = r["reason"]
    status = reason if reason.startswith(r["status"]) else f"{r['status']}: {reason}" if reason else r["status"]
    return (r["area"], r["family"], r["compared"], r["reference"], _number(r["worst_error"]), _number(r["tolerance"]),
            status)


def summary(rows):
    counts = {s: sum(r["status"] == s for r in rows) for s in ("pass", "fail", "skipped")}
    return f"{len(rows)} rows: {counts['pass']} pass, {counts['fail']} fail, {counts['skipped']} skipped"


def text(rows, width=60):
    """Fixed-width columns; long cells are cut to `width` characters (the JSON and HTML keep them whole)."""
    cut = lambda s: s if len(s) <= width else s[:width - 1] + "…"  # noqa: E731
    table = [COLUMNS] + [tuple(cut(c) for c in _cells(r)[:-1]) + (_cells(r)[-1],) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line[:-1], widths)) + "  " + line[-1] for line in table]
    return "\n".join(lines + ["", summary(rows)]) + "\n"


def as_json(rows, meta):
    return json.dumps(dict(meta, summary=summary(rows), rows=rows), indent=1)


def as_html(rows, meta):
    color = {"pass": "#dff0d8", "fail": "#f2dede", "skipped": "#fcf8e3"}
    body = "\n".join("<tr style='background:%s'>%s</tr>" % (
        color[r["status"]], "".join(f"<td>{html.escape(c)}</td>" for c in _cells(r))) for r in rows)
    head = "".join(f"<th>{c}</th>" for c in COLUMNS)
    facts = "".join(f"<li>{html.escape(k)}: {html.escape(str(v))}</li>" for k, v in meta.items())
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>attnzoo conformance</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}}</style></head><body>
<h1>attnzoo conformance</h1><p>{html.escape(summary(rows))}</p><ul>{facts}</ul>
<table><thead><tr>{head}</tr></thead><tbody>
{body}
</tbody></table></body></html>
"""
