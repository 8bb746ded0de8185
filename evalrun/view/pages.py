"""The viewer's HTML: every page is rendered on the server from the same data its JSON API
returns, with every stored string escaped, and needs no script (the Content-Security-Policy
allows none). Filters are a GET form, sorting and paging are links, hovering shows ``title``
texts, and the charts are inline SVG whose points are links.
"""

from __future__ import annotations

import difflib
import html
import json
import math
import re
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import urlencode

from evalrun._util.display import show_controls
from evalrun.view.queries import EXACT, LISTED, NO_LABEL, ResultQuery

#: per-token score classes of real-valued evidence (exp-family shares average 1 without the watermark)
SCORE_BUCKETS = (0.5, 1.0, 2.0, 3.0)

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#fafbfc}
header{background:#1d2330;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:baseline}
header a{color:#cfe0ff;text-decoration:none}header strong{font-size:16px}
main{padding:12px 16px;max-width:1400px}
table{border-collapse:collapse;margin:6px 0 14px}th,td{border:1px solid #d8dde6;padding:3px 7px;text-align:left;
vertical-align:top}th{background:#eef1f6}th a{color:inherit}td.num{text-align:right;font-variant-numeric:tabular-nums}
form.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:end;background:#eef1f6;padding:8px;border-radius:4px}
form.filters label{display:flex;flex-direction:column;font-size:12px}select,input{font:inherit;max-width:260px}
pre,.text{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #d8dde6;padding:8px;
border-radius:4px;max-width:1100px}
.tokens span{border-radius:2px}.tok-green{background:#b6e3b6}.tok-red{background:#f3b9b9}.tok-skip{color:#8a93a3}
.tok-s0{background:#f3b9b9}.tok-s1{background:#f7dcc0}.tok-s2{background:#eef0c0}.tok-s3{background:#cdeac0}
.tok-s4{background:#9bd69b}.size-mark{outline:2px solid #1f5fbf}
del{background:#f3b9b9}ins{background:#b6e3b6;text-decoration:none}
.note{color:#5b6474}.error{color:#a01818}.pager{display:flex;gap:12px}
.legend span{padding:0 6px;margin-right:6px}svg{background:#fff;border:1px solid #d8dde6}
svg a circle:hover{stroke:#000;stroke-width:2}
"""


def clean(value: Any) -> str:
    """A stored value as safe HTML text: escaped, with control characters and bidi overrides
    made visible (``\\x1b``, ``\\u202e``) instead of acting on the page."""
    return html.escape(show_controls("" if value is None else str(value)), quote=True)


def href(path: str, params: Mapping[str, Any] | None = None) -> str:
    query = urlencode({k: v for k, v in (params or {}).items() if v not in (None, "")})
    return clean(f"{path}?{query}" if query else path)


def layout(title: str, body: str) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{clean(title)} · evalrun view</title>"
            "<link rel='stylesheet' href='/static/view.css'></head><body><header><strong>evalrun view</strong>"
            "<a href='/'>results</a><a href='/runs'>runs</a><a href='/compare'>compare</a><a href='/charts'>charts</a>"
            f"</header><main><h1>{clean(title)}</h1>{body}</main></body></html>")


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.{digits}g}"
    return clean(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, table_id: str = "") -> str:
    """``rows`` hold HTML already escaped (cells built with :func:`clean`)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    id_attr = f" id='{table_id}'" if table_id else ""
    return f"<table{id_attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def error_page(status: int, message: str) -> str:
    return layout(f"{status}", f"<p class='error'>{clean(message)}</p><p><a href='/'>back to the results</a></p>")


# -- browse ---------------------------------------------------------------------------------
def _select(name: str, values: Sequence[str], chosen: str | None, labels: Mapping[str, str] | None = None) -> str:
    options = ["<option value=''>(any)</option>"] + [
        f"<option value='{clean(v)}'{' selected' if v == chosen else ''}>{clean((labels or {}).get(v, v))}</option>"
        for v in values]
    return f"<label>{name}<select name='{name}'>{''.join(options)}</select></label>"


def filter_form(query: ResultQuery, facets: Mapping[str, Sequence[str]], runs: Sequence[Mapping[str, Any]]) -> str:
    fields = [_select(name, facets.get(name, []), getattr(query, name)) for name in EXACT]
    fields.append(_select("run", [r["run_id"] for r in runs], query.run,
                          {r["run_id"]: f"{r['run_id'][:12]} ({r['started_at'][:16]})" for r in runs}))
    fields += [
        f"<label>text contains<input name='q' value='{clean(query.q)}'></label>",
        f"<label>score ≥<input name='score_min' size='5' value='{_num(query.score_min)}'></label>",
        f"<label>score ≤<input name='score_max' size='5' value='{_num(query.score_max)}'></label>",
        f"<input type='hidden' name='sort' value='{clean(query.sort)}'>",
        f"<input type='hidden' name='order' value='{clean(query.order)}'>",
        "<button type='submit' id='apply'>filter</button><a href='/'>clear</a>",
    ]
    return f"<form class='filters' method='get' action='/' id='filters'>{''.join(fields)}</form>"


def results_table(query: ResultQuery, listing: Mapping[str, Any]) -> str:
    headers = []
    for column in LISTED:
        order = "desc" if query.sort == column and query.order == "asc" else "asc"
        arrow = {"asc": " ▲", "desc": " ▼"}[query.order] if query.sort == column else ""
        headers.append(f"<a href='{href('/', query.params(sort=column, order=order, offset=0))}'>{column}{arrow}</a>")
    rows = []
    for r in listing["results"]:
        cells = []
        for column in LISTED:
            value = r[column]
            if column == "result_id":
                cells.append(f"<a class='result-link' href='/results/{int(value)}'>{int(value)}</a>")
            elif column == "label":
                cells.append(clean(value if value is not None else f"(none: {r['error'] or 'ungraded'})"[:80]))
            elif column == "run_id":
                cells.append(clean(str(value)[:12]))
            else:
                cells.append(_num(value))
        rows.append(cells)
    start, total = listing["offset"], listing["total"]
    shown = f"{start + 1}–{start + len(listing['results'])} of {total:,}" if listing["results"] else f"0 of {total:,}"
    pager = [f"<span id='shown'>{shown}</span>"]
    if start > 0:
        pager.append(f"<a rel='prev' href='{href('/', query.params(offset=max(0, start - query.limit)))}'>previous</a>")
    if start + query.limit < total:
        pager.append(f"<a rel='next' href='{href('/', query.params(offset=start + query.limit))}'>next</a>")
    return (f"<div class='pager'>{''.join(pager)}</div>" + table(headers, rows, table_id="results")
            + f"<p class='note'>as JSON: <a href='{href('/api/results', query.params())}'>/api/results</a></p>")


def browse_page(query: ResultQuery, listing: Mapping[str, Any], facets: Mapping[str, Sequence[str]],
                runs: Sequence[Mapping[str, Any]], db: str) -> str:
    intro = (f"<p class='note'>Store {clean(db)}: {len(runs)} run(s). Filter, sort by a column, open a result by "
             "its id.</p>")
    return layout("Results", intro + filter_form(query, facets, runs) + results_table(query, listing))


# -- runs -----------------------------------------------------------------------------------
def runs_page(runs: Sequence[Mapping[str, Any]], packs: Sequence[Mapping[str, Any]]) -> str:
    rows = [[f"<a href='{href('/', {'run': r['run_id']})}'>{clean(r['run_id'])}</a>", clean(r["status"]),
             clean(r["started_at"]), clean(r["finished_at"]), _num(r["results"]),
             clean((r["git_sha"] or "")[:12]) + (" (dirty)" if r["git_dirty"] else ""), clean(r["evalrun_version"]),
             f"<code>{clean(' '.join(map(str, r['argv'] or [])))}</code>"] for r in runs]
    pack_rows = [[f"<a href='{href('/', {'pack': p['pack']})}'>{clean(p['pack'])}</a>", _num(p["results"]),
                  _num(p["errors"]), clean(" ".join(f"{k}={v}" for k, v in sorted(p["labels"].items())))]
                 for p in packs]
    return layout("Runs", table(["run", "status", "started", "finished", "results", "git", "evalrun", "command"],
                                rows, table_id="runs")
                  + "<h2>Packs</h2>" + table(["pack", "results", "errors", "labels"], pack_rows, table_id="packs"))


def provenance(run: Mapping[str, Any] | None) -> str:
    if run is None:
        return "<p class='note'>The run that produced this result is not in the store.</p>"
    config = json.dumps(run["config"], indent=1, sort_keys=True) if run["config"] is not None else ""
    rows = [[k, clean(v)] for k, v in (
        ("run", run["run_id"]), ("status", run["status"]), ("started", run["started_at"]),
        ("finished", run["finished_at"]), ("git", f"{run['git_sha']}{' (dirty)' if run['git_dirty'] else ''}"),
        ("evalrun", run["evalrun_version"]), ("python", run["python"]), ("platform", run["platform"]),
        ("seed", run["seed"]), ("command", " ".join(map(str, run["argv"] or []))))]
    return table(["", ""], rows) + f"<details><summary>configuration</summary><pre>{clean(config)}</pre></details>"


# -- one result -----------------------------------------------------------------------------
def word_diff(before: str, after: str) -> str:
    """``after`` against ``before`` word by word: removed words struck, added ones marked."""
    a, b = re.split(r"(\s+)", before), re.split(r"(\s+)", after)
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(clean("".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(f"<del>{clean(''.join(a[i1:i2]))}</del>")
        if j2 > j1:
            out.append(f"<ins>{clean(''.join(b[j1:j2]))}</ins>")
    return "".join(out)


def _token_class(token: Mapping[str, Any]) -> str:
    if "green" in token:
        return "tok-green" if token["green"] else "tok-red"
    if "scored" in token:
        if not token["scored"]:
            return "tok-skip"
        score = token["score"]
        if score in (0.0, 1.0):
            return "tok-green" if score == 1.0 else "tok-red"
        return f"tok-s{sum(score > b for b in SCORE_BUCKETS)}"
    return ""


def p_curve(tokens: Sequence[Mapping[str, Any]], threshold: float, size: int | None) -> str:
    """-log10 of the running p-value along the text, with the threshold and the size marked."""
    width, height, pad = 720, 160, 30
    values = [min(50.0, -math.log10(max(t["p"], 1e-300))) for t in tokens]
    top = max([*values, -math.log10(threshold), 1.0]) * 1.1
    n = max(len(values), 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        return pad + (width - 2 * pad) * (i + 1) / n, height - pad - (height - 2 * pad) * v / top

    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in enumerate(values)))
    ty = xy(0, -math.log10(threshold))[1]
    parts = [f"<svg class='pcurve' width='{width}' height='{height}' role='img' "
             f"aria-label='running p-value along the text'>",
             f"<line x1='{pad}' y1='{ty:.1f}' x2='{width - pad}' y2='{ty:.1f}' stroke='#a01818' stroke-dasharray='4'>"
             f"<title>threshold p = {threshold:g}</title></line>",
             f"<polyline fill='none' stroke='#1f5fbf' stroke-width='1.5' points='{line}'/>",
             f"<text x='{pad}' y='14' font-size='11'>-log10 p after each token (dashed: p = {threshold:g})</text>"]
    if size is not None:
        x, y = xy(size - 1, values[size - 1])
        parts.append(f"<circle cx='{x:.1f}' cy='{y:.1f}' r='4' fill='#1f5fbf'><title>watermark size: {size} tokens"
                     "</title></circle>")
    return "".join(parts) + "</svg>"


def evidence_block(found: Mapping[str, Any]) -> str:
    tokens = found["tokens"]
    size = found["size"]
    spans = []
    for i, t in enumerate(tokens):
        tip = f"token {i + 1}, id {t['id']}: p = {t['p']:.3g}"
        if t.get("score") is not None:
            tip += f", score {t['score']:.3g}"
        if "green" in t:
            tip += ", green" if t["green"] else ", red"
        classes = " ".join(c for c in (_token_class(t), "size-mark" if size == i + 1 else "") if c)
        spans.append(f"<span class='{classes}' title='{clean(tip)}'>{clean(t['text'])}</span>")
    summary = (f"Under {clean(found['watermark'])}: p = {_num(found['p_value'])} over {len(tokens)} tokens; "
               + (f"p first reaches {found['threshold']:g} after token {size} (the watermark size, outlined)."
                  if size is not None else f"p never reaches {found['threshold']:g}."))
    legend = ("<p class='legend note'>Colour: <span class='tok-green'>green / high score</span>"
              "<span class='tok-red'>red / low score</span><span class='tok-skip'>not scored</span>"
              + ("" if found["evidence"] != ["p"] else " (this scheme gives the running p-value only)") + "</p>")
    note = f"<p class='note'>{clean(found['tokenizer_note'])}</p>" if found.get("tokenizer_note") else ""
    return (f"<p class='evidence-summary'>{summary}</p>{legend}{note}<div class='text tokens'>{''.join(spans)}</div>"
            + p_curve(tokens, found["threshold"], size))


def _kv(mapping: Mapping[str, Any]) -> str:
    return table(["field", "value"], [[clean(k), clean(json.dumps(v, sort_keys=True) if isinstance(v, (dict, list))
                                                       else v)] for k, v in sorted(mapping.items())])


def result_page(detail: Mapping[str, Any], evidence: Mapping[str, Any], *, watermark_choices: Sequence[str],
                chosen: str | None, key_given: bool) -> str:
    d = detail
    head = table(["pack", "case", "model", "watermark", "attack", "repetition", "label", "score"], [[
        clean(d["pack"]), clean(d["case_id"]), clean(d["model"]), clean(d["watermark"]), clean(d["attack"]),
        _num(d["repetition"]), f"<span id='label'>{clean(d['label'])}</span>", _num(d["score"])]])
    prompt = d["prompt"] or {}
    parts = [head, "<h2>Prompt</h2>"]
    if prompt.get("system"):
        parts.append(f"<p class='note'>system</p><div class='text'>{clean(prompt['system'])}</div>")
    parts.append(f"<p class='note'>user</p><div class='text'>{clean(prompt.get('user'))}</div>")
    parts.append("<h2>Output</h2>")
    if d["error"] and d["output"] is None:
        parts.append(f"<p class='error'>{clean(d['error'])}</p>")
    parts.append(f"<div class='text' id='output'>{clean(d['output'])}</div>")
    if d["attack"] != "none":
        parts.append(f"<h2>Attacked text ({clean(d['attack'])})</h2>")
        if d["attacked_output"] is None:
            parts.append(f"<p class='error'>{clean(d['attack_error'] or 'the attack has not been applied')}</p>")
        else:
            parts.append(f"<p class='note'>Word by word against the output: <del>removed</del> <ins>added</ins>.</p>"
                         f"<div class='text' id='diff'>{word_diff(d['output'] or '', d['attacked_output'])}</div>")
    parts.append("<h2 id='evidence'>Token evidence</h2>")
    if watermark_choices:
        links = " ".join(f"<a href='{href('/results/' + str(d['result_id']), {'watermark': w})}'"
                         f"{' class=chosen' if w == chosen else ''}>{clean(w)}</a>" for w in watermark_choices)
        parts.append(f"<p class='note'>detector: {links}</p>")
    if not key_given:
        parts.append("<p class='note' id='needs-key'>Token evidence needs the watermark key: start the viewer with "
                     "--key KEY or EVALRUN_WATERMARK_KEY set. The key stays in the viewer's memory.</p>")
    for name, found in evidence.items():
        parts.append(f"<h3>{clean(name)}</h3>")
        parts.append(f"<p class='error'>{clean(found['error'])}</p>" if "error" in found else evidence_block(found))
    parts.append("<h2>Grade</h2>" + table(["score", "label", "reason", "grader", "graded"], [[
        _num(d["score"]), clean(d["label"]), clean(d["reason"]), clean((d["grader_hash"] or "")[:12]),
        clean(d["graded_at"])]]))
    if d["error"]:
        parts.append(f"<p class='error'>error: {clean(d['error'])}</p>")
    if d["metadata"]:
        parts.append("<details open><summary>grade metadata</summary>" + _kv(d["metadata"]) + "</details>")
    parts.append("<h2>Judge answers</h2>")
    if d["judgements"]:
        parts.append(table(["judge", "method", "raw answer", "parsed", "error"], [[
            clean(j["judge"]), clean(j["method"]), f"<pre>{clean(j['raw'])}</pre>",
            clean(json.dumps(j["parsed"], sort_keys=True)), clean(j["error"])] for j in d["judgements"]]))
    else:
        parts.append("<p class='note'>No judge answered for this result.</p>")
    parts.append("<h2>Latency and tokens</h2>" + table(["latency (ms)", "tokens in", "tokens out", "served model",
                                                         "retries"], [[
        _num(d["latency_ms"], 4), _num(d["tokens_in"]), _num(d["tokens_out"]), clean(d["served_model"]),
        _num(d["retries"])]]))
    if len(d["attacks"]) > 1:
        parts.append("<h2>The same generation under other attacks</h2>" + table(["result", "attack", "label", "score"], [[
            f"<a href='/results/{int(a['result_id'])}'>{int(a['result_id'])}</a>", clean(a["attack"]),
            clean(a["label"]), _num(a["score"])] for a in d["attacks"]]))
    parts.append("<h2>Provenance</h2>" + provenance(d["run"]))
    parts.append(f"<p class='note'>as JSON: <a href='/api/results/{int(d['result_id'])}'>"
                 f"/api/results/{int(d['result_id'])}</a></p>")
    return layout(f"Result {int(d['result_id'])}", "".join(parts))


# -- compare --------------------------------------------------------------------------------
def compare_page(params: Mapping[str, str], runs: Sequence[Mapping[str, Any]], watermarks: Sequence[str],
                 found: Mapping[str, Any] | None, error: str | None) -> str:
    run_ids = [r["run_id"] for r in runs]
    forms = ("<form class='filters' method='get' action='/compare' id='compare-runs'>"
             + _select("run_a", run_ids, params.get("run_a")) + _select("run_b", run_ids, params.get("run_b"))
             + "<button type='submit'>compare runs</button></form>"
             "<form class='filters' method='get' action='/compare' id='compare-watermarks'>"
             + _select("watermark_a", watermarks, params.get("watermark_a"))
             + _select("watermark_b", watermarks, params.get("watermark_b"))
             + "<button type='submit'>compare watermarks</button></form>")
    body = [forms]
    if error:
        body.append(f"<p class='error'>{clean(error)}</p>")
    if found is not None:
        body.append(f"<p id='compare-summary'>{found['pairs']:,} pairs on the same cases; {found['changed']:,} "
                    f"changed label (A = {clean(found['a'])}, B = {clean(found['b'])}).</p>")
        body.append(table(["label A", "label B", "count"], [[clean(t["label_a"]), clean(t["label_b"]),
                                                              _num(t["count"])] for t in found["transitions"]],
                          table_id="transitions"))
        rows = [[clean(r["pack"]), clean(r["case_id"]), clean(r["model"]), clean(r["attack"]),
                 f"<a href='/results/{int(r['a_id'])}'>{clean(r['label_a'])}</a>",
                 f"<a href='/results/{int(r['b_id'])}'>{clean(r['label_b'])}</a>",
                 _num(r["score_a"]), _num(r["score_b"]),
                 _num(None if r["score_a"] is None or r["score_b"] is None else r["score_b"] - r["score_a"])]
                for r in found["rows"]]
        body.append("<h2>Pairs whose label changed</h2>" + table(
            ["pack", "case", "model", "attack", "A", "B", "score A", "score B", "B − A"], rows, table_id="pairs"))
    return layout("Compare", "".join(body))


# -- charts ---------------------------------------------------------------------------------
def tamper_svg(panel: Any, links: Mapping[str, str]) -> str:
    """One tamper-resistance plot (MarkMyWords Fig. 3): each attack a point (quality retention,
    detection rate) that names itself on hover and opens its results; the lower hull drawn."""
    width, height, pad = 380, 300, 40
    xs = [q for q, _ in [*panel.points.values(), *panel.excluded.values()]]
    right = max([1.0, *xs]) * 1.05

    def xy(q: float, d: float) -> tuple[float, float]:
        return pad + (width - 2 * pad) * q / right, height - pad - (height - 2 * pad) * d

    hull = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(q, d) for q, d in panel.hull))
    parts = [f"<svg class='tamper' width='{width}' height='{height}' role='img' aria-label='tamper resistance'>",
             f"<text x='{pad}' y='16' font-size='12'>{clean(panel.title.replace(chr(10), ' · '))}</text>",
             f"<line x1='{pad}' y1='{height - pad}' x2='{width - pad}' y2='{height - pad}' stroke='#555'/>",
             f"<line x1='{pad}' y1='{pad}' x2='{pad}' y2='{height - pad}' stroke='#555'/>",
             f"<text x='{width / 2}' y='{height - 8}' font-size='11' text-anchor='middle'>quality retention</text>",
             f"<text x='12' y='{height / 2}' font-size='11' transform='rotate(-90 12 {height / 2})' "
             "text-anchor='middle'>detection rate</text>",
             f"<polyline fill='none' stroke='#1f5fbf' points='{hull}'/>"]
    for excluded, points in ((False, panel.points), (True, panel.excluded)):
        for name, (q, d) in sorted(points.items()):
            x, y = xy(q, d)
            tip = f"{name}: quality retention {q:.3f}, detection rate {d:.3f}" + (" (left out of R)" if excluded else "")
            fill = "none" if excluded else "#1f5fbf"
            parts.append(f"<a href='{clean(links.get(name, '/'))}'><circle cx='{x:.1f}' cy='{y:.1f}' r='5' "
                         f"fill='{fill}' stroke='#1f5fbf'><title>{clean(tip)}</title></circle></a>")
    resistance = "n/a" if panel.resistance is None else f"{panel.resistance:.3f}"
    parts.append(f"<text x='{width - pad}' y='{pad - 6}' font-size='12' text-anchor='end'>R = {resistance}</text>")
    return "".join(parts) + "</svg>"


def _report_block(block: Any) -> str:
    """One block of the report's benchmark sections (paragraph, table, chart), as the page shows it."""
    kind = type(block).__name__
    if kind == "Paragraph":
        return f"<p>{clean(block.text)}</p>"
    if kind == "Table":
        caption = f"<p class='note'>{clean(block.caption)}</p>" if block.caption else ""
        return caption + table([clean(h) for h in block.headers], [[clean(c) for c in row] for row in block.rows],
                               table_id=f"report-{block.id}")
    if kind == "Figure":
        return f"<figure><img src='/charts/{clean(block.filename)}' alt='{clean(block.alt)}'></figure>"
    return ""


def charts_page(charts: Any) -> str:
    body = [f"<p class='note'>{clean(charts.note)}</p>"]
    if charts.panels:
        body.append("<h2>Tamper resistance (MarkMyWords Fig. 3)</h2><p class='note'>Hover a point to see its attack; "
                    "click it to open that attack's results. Hollow points are paraphrases, left out of R.</p>")
        body += [tamper_svg(panel, links) for panel, links in charts.panels]
    for section in charts.sections:
        level = min(6, max(2, section.level))
        body.append(f"<h{level}>{clean(section.title)}</h{level}>")
        body += [_report_block(b) for b in section.blocks]
    return layout("Charts", "".join(body))


CSS_BYTES = CSS.strip().encode("utf-8")
__all__ = ["CSS_BYTES", "NO_LABEL", "browse_page", "charts_page", "clean", "compare_page", "error_page",
           "result_page", "runs_page", "word_diff"]
