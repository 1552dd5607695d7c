"""The report's HTML: one self-contained page (styles, scripts and chart data inline; no font or script is
fetched at view time). Pure: sections and the plotting runtime's source in, a string out.

Every text from the store (clause ids, notes, quoted evidence) is escaped as data: trace text can hold markup
and must never become markup. Chart specs travel as JSON inside a `<script type="application/json">`, with
`<`, `>` and `&` written as JSON escapes so no string can close that element.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any

from agent_factory.factory.views.report.model import Block, Quote, Section, Table
from agent_factory.factory.views.results import StoreFacts

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d232b;background:#f6f7f9}
header{background:#1d2b3a;color:#fff;padding:18px 28px}header h1{margin:0 0 4px;font-size:22px}
header p{margin:0;color:#c9d3de}nav{padding:8px 28px;background:#e8ecf1;font-size:13px}
nav a{margin-right:12px;color:#24527a;text-decoration:none}main{padding:8px 28px 40px;max-width:1180px}
section{background:#fff;border:1px solid #dde2e8;border-radius:6px;margin:18px 0;padding:4px 20px 16px}
h2{font-size:18px;margin:14px 0 4px}h3{font-size:15px;margin:16px 0 4px}.intro,.note{color:#4a5662}
.absent{background:#fff6e0;border-left:4px solid #d9a400;padding:8px 12px;margin:10px 0}
table{border-collapse:collapse;margin:8px 0;font-size:12.5px;width:100%}
th,td{border-bottom:1px solid #e4e8ed;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f3f6}td.n{white-space:nowrap}.chart{margin:8px 0}.block{overflow-x:auto}
.quotes{margin:6px 0}.quote{background:#f4f4f0;border-left:3px solid #8a9aa9;margin:6px 0;padding:6px 10px;
white-space:pre-wrap;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.quote .who{display:block;color:#5d6b78;font-family:system-ui,sans-serif;font-size:11.5px}
.spine{display:flex;align-items:stretch;gap:6px;margin:10px 0}.box{flex:1;border:1px solid #b9c4cf;
border-radius:6px;padding:8px 10px;background:#f7fafc}.box b{display:block;margin-bottom:4px}
.arrow{align-self:center;font-size:20px;color:#7b8794}.across{border:1px dashed #7b8794;border-radius:6px;
padding:6px 10px;margin:6px 0;background:#fbfbf4}.apart{display:flex;gap:12px;margin-top:10px}
.apart .box{background:#f5f3fa}.line{font-size:12.5px}
"""
"""The page's styles (system fonts only: nothing to fetch)."""

BOOT = """
(function () {
  var specs = JSON.parse(document.getElementById("af-specs").textContent);
  var keys = Object.keys(specs), done = 0, failed = [];
  document.body.setAttribute("data-plots", "pending");
  Promise.all(keys.map(function (k) {
    return vegaEmbed("#" + k, specs[k], {renderer: "svg", actions: false}).then(function () { done += 1; })
      .catch(function (e) { failed.push(k); console.error("plot " + k + " failed: " + e); });
  })).then(function () {
    document.body.setAttribute("data-plots", failed.length ? "failed" : "rendered");
    document.body.setAttribute("data-plots-rendered", String(done));
  });
})();
"""
"""Draws every chart with vega-embed (SVG) and records on <body> whether all rendered (the browser test reads
`data-plots` and `data-plots-rendered`)."""


def _json_script(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _inline_js(source: str) -> str:
    # A bundled library may hold the text "</script" inside a string; break it so the element is not closed.
    return source.replace("</script", "<\\/script")


def _table(t: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in t.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _quotes(quotes: Sequence[Quote]) -> str:
    if not quotes:
        return ""
    items = "".join(
        f'<div class="quote"><span class="who">{escape(q.finding)} · unit {escape(q.unit_id)} · {escape(q.field)}'
        f"</span>{escape(q.text)}</div>" for q in quotes)
    return f'<div class="quotes"><h4>Evidence (redacted)</h4>{items}</div>'


def _block(b: Block) -> str:
    parts = [f"<h3>{escape(b.title)}</h3>"]
    if b.note:
        parts.append(f'<p class="note">{escape(b.note)}</p>')
    if b.chart is not None:
        parts.append(f'<div class="chart" id="{escape(b.chart.key)}" data-chart="{escape(b.chart.title)}"></div>')
    if b.table is not None:
        parts.append(_table(b.table))
    parts.append(_quotes(b.quotes))
    return '<div class="block">' + "".join(parts) + "</div>"


def _box(name: str, title: str, lines: Sequence[str]) -> str:
    body = "".join(f'<span class="line">{escape(x)}</span><br>' for x in lines)
    return f'<div class="box" data-component="{escape(name)}"><b>{escape(title)}</b>{body}</div>'


def _spine(extra: dict[str, Any]) -> str:
    boxes: dict[str, list[str]] = extra["boxes"]
    titles: dict[str, str] = extra["titles"]
    chain = '<span class="arrow">→</span>'.join(_box(c, titles[c], boxes.get(c, [])) for c in extra["spine"])
    across = "".join(
        f'<div class="across" data-component="{escape(c)}"><b>{escape(titles[c])}</b> (across every stage): '
        + "".join(f'<span class="line">{escape(x)}</span> ' for x in boxes.get(c, [])) + "</div>"
        for c in extra["across"])
    apart = "".join(_box(c, titles[c], boxes.get(c, [])) for c in extra["apart"])
    return f'<div class="spine">{chain}</div>{across}<div class="apart">{apart}</div>'


def _section(s: Section) -> str:
    parts = [f'<section id="{escape(s.key)}" data-section="{escape(s.key)}"><h2>{escape(s.title)}</h2>']
    if s.intro:
        parts.append(f'<p class="intro">{escape(s.intro)}</p>')
    if "spine" in s.extra:
        parts.append(_spine(s.extra))
    if s.absent is not None:
        parts.append(f'<div class="absent" data-absent="1">{escape(s.absent)}</div>')
    parts.extend(_block(b) for b in s.blocks)
    return "".join(parts) + "</section>"


def render_html(sections: Sequence[Section], facts: StoreFacts, *, runtime_js: str, generated: str) -> str:
    """The whole page. `runtime_js` defines `vegaEmbed` (the inlined vega, vega-lite and vega-embed bundle)."""
    specs = {b.chart.key: b.chart.spec for s in sections for b in s.blocks if b.chart is not None}
    nav = "".join(f'<a href="#{escape(s.key)}">{escape(s.title)}</a>' for s in sections)
    segs = ", ".join(f"{k} {v:,}" for k, v in facts.segments.items())
    sub = (f"store {facts.path} · real traffic: {facts.turns:,} turns, {facts.sessions:,} sessions, "
           f"{facts.users:,} users, {facts.spans:,} spans · segments: {segs} · quarantined {facts.quarantined:,} · "
           f"last run {facts.last_run or 'never'} · generated {generated}")
    body = "".join(_section(s) for s in sections)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>Agent Factory report</title>"
        f"<style>{CSS}</style></head><body><header><h1>Agent Factory report</h1><p>{escape(sub)}</p></header>"
        f"<nav>{nav}</nav><main>{body}</main>"
        f'<script type="application/json" id="af-specs">{_json_script(specs)}</script>'
        f"<script>{_inline_js(runtime_js)}</script><script>{BOOT}</script></body></html>"
    )
