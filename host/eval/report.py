"""The HTML report of an eval, as mechanism: one self-contained file (no JavaScript, no
stylesheet or font from elsewhere, works offline) with a table and a chart drawn as inline SVG.

What goes in it is the policy's (scripts/eval.lua ``M.report``): the title, the columns and
their already formatted cells, the chart's points and axis names, notes. This module only lays
that out. Every text in it comes from suites and models (task ids, cell names, answers), so
every one is escaped, in text and attributes alike, and the page's Content-Security-Policy
forbids scripts and every outside resource even if something slipped through.

A report (a dict, as Lua gives it):

    title, subtitle?   strings
    sections           in order, each a table or a chart:
                       {title?, columns: [{key, label, numeric?}] (or strings), rows: [{key: text}]}
                       {title?, chart: {x_label, y_label, x_format ("usd" | "number"),
                                        points: [{label, x, y, low?, high?, note?}]}}
                                        (y, low, high in 0..1; x >= 0)
    notes?             [string]
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import NamedTuple

from ..errors import MossError

W, H = 720, 420                 # the chart's size
LEFT, RIGHT, TOP, BOTTOM = 64, 200, 24, 52  # room for the axes, and for labels on the right
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; } .sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 1em 0; } th, td { padding: 4px 10px; border-bottom: 1px solid #ddd; }
th { text-align: left; background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
svg { background: #fff; border: 1px solid #ddd; } .notes { color: #555; font-size: 0.9em; }
"""


def esc(value) -> str:
    """Any value as text safe in HTML text and in a double-quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def _items(value) -> list:
    if value is None:
        return []
    if isinstance(value, dict):  # a Lua array that arrived as {1: ..., 2: ...}
        return [value[k] for k in sorted(value) if isinstance(k, int)]
    return list(value)


def _num(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


class _Point(NamedTuple):
    label: str
    x: float
    y: float
    interval: tuple[float, float] | None


def _unit(v: float) -> float:
    return min(max(v, 0.0), 1.0)


def _nice_step(span: float) -> float:
    raw = span / 5
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _fmt_x(v: float, how: str) -> str:
    if how == "usd":
        return f"${v:.4f}".rstrip("0").rstrip(".") if v else "$0"
    return f"{v:g}"


def chart_svg(chart: dict) -> tuple[str, list[str]]:
    """The chart as an inline <svg> element, and notes on what could not be drawn."""
    notes: list[str] = []
    how = str(chart.get("x_format") or "number")
    points = []
    for p in _items(chart.get("points")):
        if not isinstance(p, dict):
            continue
        x, y = _num(p.get("x")), _num(p.get("y"))
        if x is None or y is None:
            notes.append(f"not drawn: {p.get('label')} ({p.get('note') or 'no counted attempts'})")
            continue
        lo, hi = _num(p.get("low")), _num(p.get("high"))
        points.append(_Point(str(p.get("label") or ""), max(x, 0.0), _unit(y),
                             None if lo is None or hi is None else (_unit(lo), _unit(hi))))
    xmax = max((p.x for p in points), default=0.0)
    if xmax <= 0:
        xmax = 1.0 if how != "usd" else 0.01
        if points:
            notes.append("every drawn cell cost nothing (or an unpriced model): all sit at 0")
    step = _nice_step(xmax * 1.1)
    top = step * math.ceil(xmax * 1.1 / step)
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def sx(v: float) -> float:
        return LEFT + pw * v / top

    def sy(v: float) -> float:
        return TOP + ph * (1 - v)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           f'role="img" aria-label="{esc(chart.get("title") or "chart")}">']
    out.append(f'<title>{esc(chart.get("title") or "")}</title>')
    for i in range(0, 11, 2):  # y grid: 0..100%
        y = sy(i / 10)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + pw}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{i * 10}%</text>')
    n = round(top / step)
    for i in range(n + 1):  # x ticks
        v = step * i
        x = sx(v)
        out.append(f'<line x1="{x:.1f}" y1="{TOP + ph}" x2="{x:.1f}" y2="{TOP + ph + 4}" stroke="#888"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + ph + 17}" font-size="11" text-anchor="middle">'
                   f'{esc(_fmt_x(v, how))}</text>')
    out.append(f'<line x1="{LEFT}" y1="{TOP + ph}" x2="{LEFT + pw}" y2="{TOP + ph}" stroke="#888"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + ph}" stroke="#888"/>')
    out.append(f'<text x="{LEFT + pw / 2:.1f}" y="{H - 10}" font-size="12" text-anchor="middle">'
               f'{esc(chart.get("x_label") or "")}</text>')
    out.append(f'<text x="14" y="{TOP + ph / 2:.1f}" font-size="12" text-anchor="middle" '
               f'transform="rotate(-90 14 {TOP + ph / 2:.1f})">{esc(chart.get("y_label") or "")}</text>')
    placed: list[tuple[float, float]] = []  # labels so far (x, y): one that would overlap is moved down
    for i, p in enumerate(points):
        colour = COLOURS[i % len(COLOURS)]
        x, y = sx(p.x), sy(p.y)
        tip = f'{p.label}: {100 * p.y:.0f}%'
        if p.interval is not None:
            tip += f' (95% CI {100 * p.interval[0]:.0f}-{100 * p.interval[1]:.0f}%)'
        tip += f', {_fmt_x(p.x, how)}'
        out.append(f'<g class="point"><title>{esc(tip)}</title>')
        if p.interval is not None:
            y1, y2 = sy(p.interval[0]), sy(p.interval[1])
            out.append(f'<line x1="{x:.1f}" y1="{y1:.1f}" x2="{x:.1f}" y2="{y2:.1f}" stroke="{colour}" '
                       f'stroke-width="2"/>')
            for cap in (y1, y2):
                out.append(f'<line x1="{x - 5:.1f}" y1="{cap:.1f}" x2="{x + 5:.1f}" y2="{cap:.1f}" '
                           f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{colour}"/>')
        ly = y + 4
        while any(abs(x - px) < 180 and abs(ly - py) < 14 for px, py in placed):
            ly += 14
        placed.append((x, ly))
        out.append(f'<text x="{x + 9:.1f}" y="{ly:.1f}" font-size="12" fill="{colour}">{esc(p.label)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out), notes


def table_html(section: dict) -> str:
    columns = []
    for c in _items(section.get("columns")):
        if isinstance(c, dict):
            columns.append((str(c.get("key")), str(c.get("label") or c.get("key")), bool(c.get("numeric"))))
        else:
            columns.append((str(c), str(c), False))
    if not columns:
        raise MossError("eval.html: a table section needs columns", kind="usage")
    parts = ["<table><thead><tr>" + "".join(f"<th>{esc(label)}</th>" for _, label, _ in columns)
             + "</tr></thead><tbody>"]
    for row in _items(section.get("rows")):
        if isinstance(row, dict):
            parts.append("<tr>" + "".join(("<td class=\"num\">" if num else "<td>") + esc(row.get(key)) + "</td>"
                                          for key, _, num in columns) + "</tr>")
    parts.append("</tbody></table>")
    return "\n".join(parts)


def render(report: dict) -> str:
    """The whole page, as text."""
    if not isinstance(report, dict):
        raise MossError("eval.html: the report must be a table", kind="usage")
    title = str(report.get("title") or "moss eval")
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">',
             f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{esc(title)}</h1>"]
    if report.get("subtitle"):
        parts.append(f'<p class="sub">{esc(report["subtitle"])}</p>')
    notes = []
    for section in _items(report.get("sections")):
        if not isinstance(section, dict):
            raise MossError("eval.html: each section must be a table", kind="usage")
        if section.get("title"):
            parts.append(f"<h2>{esc(section['title'])}</h2>")
        if isinstance(section.get("chart"), dict):
            svg, more = chart_svg({"title": section.get("title"), **section["chart"]})
            parts.append(svg)
            notes += more
        else:
            parts.append(table_html(section))
    notes += [str(n) for n in _items(report.get("notes"))]
    if notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write(path: str, report: dict) -> str:
    """Write the page to `path` (it must end in .html or .htm; its folder must exist), replacing
    the file and never writing through a link. Returns the absolute path."""
    from . import results

    p = Path(path).expanduser()
    if p.suffix.lower() not in (".html", ".htm"):
        raise MossError(f"--html {path}: the report's file name must end in .html", kind="usage")
    p = Path(p.absolute())
    if not p.parent.is_dir():
        raise MossError(f"--html {path}: no folder {p.parent}", kind="not_found")
    results.write(p, render(report))
    return str(p)
