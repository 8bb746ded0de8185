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
from evalrun.view.queries import EXACT, LISTED, NO_LABEL, SPECS, ResultQuery
from evalrun.watermark.naming import short_name, short_names

#: per-token score classes of real-valued evidence (exp-family shares average 1 without the watermark)
SCORE_BUCKETS = (0.5, 1.0, 2.0, 3.0)

#: -log10 p above this is drawn at it (a p of 1e-300 would flatten the rest of the curve), and the
#: curve says so
P_CAP = 50.0

#: The pages fit a 1280 px window without scrolling sideways: tables are never wider than the
#: page (``max-width``); a cell breaks between words (a word keeps its column wide enough, so short
#: ids are never cut to make room), a spec after its commas (``<wbr>``), texts and the report's
#: wide tables anywhere; labels, ids and numbers (``.nw``) never; charts scale with their viewBox.
CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#fafbfc}
header{background:#1d2330;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:baseline}
header a{color:#cfe0ff;text-decoration:none}header strong{font-size:16px}
main{padding:12px 16px;max-width:1400px;box-sizing:border-box}
table{border-collapse:collapse;margin:6px 0 14px;max-width:100%}th,td{border:1px solid #d8dde6;padding:3px 7px;
text-align:left;vertical-align:top;overflow-wrap:break-word}th{background:#eef1f6}th a{color:inherit}
.nw{white-space:nowrap;overflow-wrap:normal}td.num{text-align:right;font-variant-numeric:tabular-nums}
table.report{font-size:12px}table.report th,table.report td{padding:2px 4px;overflow-wrap:anywhere}
form.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:end;background:#eef1f6;padding:8px;border-radius:4px}
form.filters label{display:flex;flex-direction:column;font-size:12px}select,input{font:inherit;max-width:260px}
pre,.text{white-space:pre-wrap;overflow-wrap:anywhere;background:#fff;border:1px solid #d8dde6;padding:8px;
border-radius:4px;max-width:1100px;box-sizing:border-box}td pre{margin:4px 0;max-height:16em;overflow-y:auto}
.tokens span{border-radius:2px}.tok-green{background:#b6e3b6}.tok-red{background:#f3b9b9}.tok-skip{color:#8a93a3}
.tok-s0{background:#f3b9b9}.tok-s1{background:#f7dcc0}.tok-s2{background:#eef0c0}.tok-s3{background:#cdeac0}
.tok-s4{background:#9bd69b}.size-mark{outline:2px solid #1f5fbf}
del{background:#f3b9b9}ins{background:#b6e3b6;text-decoration:none}
.note{color:#5b6474}.error{color:#a01818}.pager{display:flex;gap:12px}.matched{overflow-wrap:anywhere}
.spec{text-decoration:underline dotted #8a93a3}code.spec{text-decoration:none}code.command{overflow-wrap:anywhere}
.legend span{padding:0 6px;margin-right:6px}svg{background:#fff;border:1px solid #d8dde6;max-width:100%;height:auto}
img{max-width:100%;height:auto}svg a circle:hover{stroke:#000;stroke-width:2}
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


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, table_id: str = "",
          classes: Sequence[str] = (), table_class: str = "") -> str:
    """``rows`` hold HTML already escaped (cells built with :func:`clean`); ``classes`` are the
    columns' classes, in order (``nw``: never broken, ``num``: a number, right-aligned)."""
    def attr(i: int) -> str:
        return f" class='{classes[i]}'" if i < len(classes) and classes[i] else ""

    head = "".join(f"<th{attr(i)}>{h}</th>" for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f"<td{attr(i)}>{c}</td>" for i, c in enumerate(row)) + "</tr>" for row in rows)
    id_attr = f" id='{table_id}'" if table_id else ""
    class_attr = f" class='{table_class}'" if table_class else ""
    return f"<table{id_attr}{class_attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def breakable(value: Any) -> str:
    """``value`` escaped, free to break after its commas and slashes: a spec or a model path is
    one long word that would otherwise set its column's width."""
    return clean(value).replace(",", ",<wbr>").replace("/", "/<wbr>")


def spec_html(spec: Any, names: Mapping[str, str] | None = None) -> str:
    """A watermark spec as a person reads it: its short name (``kgw γ=0.5``), the full spec on
    hover; a spec with no shorter name (or one that two specs share) as it is."""
    text = "" if spec is None else str(spec)
    short = (names or {}).get(text) or short_name(text)
    if short == text:
        return breakable(text)
    return f"<span class='spec' title='{clean(text)}'>{clean(short)}</span>"


def full_spec(spec: Any) -> str:
    """A full spec, as the result's page states it (free to break after its commas)."""
    return f"<code class='spec'>{breakable(spec)}</code>"


def named(spec: str, names: Mapping[str, str] | None = None) -> str:
    """``short (full spec)`` as HTML: where the page must say exactly which spec it means."""
    short = (names or {}).get(spec) or short_name(spec)
    return clean(spec) if short == spec else f"{clean(short)} ({full_spec(spec)})"


def error_page(status: int, message: str) -> str:
    return layout(f"{status}", f"<p class='error'>{clean(message)}</p><p><a href='/'>back to the results</a></p>")


# -- browse ---------------------------------------------------------------------------------
def _select(name: str, values: Sequence[str], chosen: str | None, labels: Mapping[str, str] | None = None) -> str:
    """A menu of ``values`` (shown as ``labels``, the value on hover); a ``chosen`` value that is
    none of them (a scheme name typed into the address) stays chosen, so the form keeps it."""
    extra = [chosen] if chosen and chosen not in values else []
    options = ["<option value=''>(any)</option>"] + [
        f"<option value='{clean(v)}' title='{clean(v)}'{' selected' if v == chosen else ''}>"
        f"{clean((labels or {}).get(v, v))}</option>" for v in [*values, *extra]]
    return f"<label>{name}<select name='{name}'>{''.join(options)}</select></label>"


def filter_form(query: ResultQuery, facets: Mapping[str, Sequence[str]], runs: Sequence[Mapping[str, Any]],
                names: Mapping[str, str] | None = None) -> str:
    fields = [_select(name, facets.get(name, []), getattr(query, name), names if name == "watermark" else None)
              for name in EXACT]
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


def matched_notes(asked: Mapping[str, str | None], matched: Mapping[str, Sequence[str]],
                  available: Mapping[str, Sequence[str]], names: Mapping[str, str] | None = None) -> str:
    """What each spec filter matched, when that is not just the spec it names (``watermark=kgw
    matched: kgw γ=0.5 (kgw:…), …``), and for a filter that matched nothing, the values there are:
    a scheme or short name finds its specs, and a typo says what to type instead."""
    notes = []
    for name, specs in matched.items():
        value = asked.get(name)
        if value is None or list(specs) == [value]:
            continue
        what = f"<code>{clean(name)}={clean(value)}</code>"
        if specs:
            notes.append(f"<p class='note matched' id='matched-{clean(name)}'>{what} matched: "
                         + ", ".join(named(s, names) for s in specs) + "</p>")
        else:
            notes.append(f"<p class='error matched' id='matched-{clean(name)}'>{what} matched nothing; available: "
                         + (", ".join(named(s, names) for s in available.get(name, ())) or "none") + "</p>")
    return "".join(notes)


#: the listing's columns that never break (ids and numbers; a label is a span that never breaks,
#: beside a failure's reason that may)
_UNBROKEN = {"result_id", "repetition", "score", "latency_ms", "run_id"}
_NUMERIC = {"repetition", "score", "latency_ms"}


def results_table(query: ResultQuery, listing: Mapping[str, Any], names: Mapping[str, str] | None = None) -> str:
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
                cells.append(f"<span class='nw'>{clean(value)}</span>" if value is not None else
                             f"<span class='nw'>(none)</span> <span class='note'>{clean((r['error'] or 'ungraded')[:80])}"
                             "</span>")
            elif column == "watermark":
                cells.append(spec_html(value, names))
            elif column in ("attack", "model", "case_id"):
                cells.append(breakable(value))
            elif column == "run_id":
                cells.append(f"<span title='{clean(value)}'>{clean(str(value)[:12])}</span>")
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
    classes = [" ".join(c for c in ("nw" if col in _UNBROKEN else "", "num" if col in _NUMERIC else "") if c)
               for col in LISTED]
    return (f"<div class='pager'>{''.join(pager)}</div>" + table(headers, rows, table_id="results", classes=classes)
            + f"<p class='note'>as JSON: <a href='{href('/api/results', query.params())}'>/api/results</a></p>")


def browse_page(query: ResultQuery, listing: Mapping[str, Any], facets: Mapping[str, Sequence[str]],
                runs: Sequence[Mapping[str, Any]], db: str, names: Mapping[str, str] | None = None) -> str:
    """The results page; ``names`` are the stored watermarks' short names (full spec on hover)."""
    intro = (f"<p class='note'>Store {clean(db)}: {len(runs)} run(s). Filter, sort by a column, open a result by "
             "its id. The watermark and attack filters also take a scheme name (<code>kgw</code>: every kgw spec) "
             "or a short name (<code>kgw γ=0.5</code>).</p>")
    notes = matched_notes({name: getattr(query, name) for name in SPECS}, listing.get("matched", {}), facets, names)
    return layout("Results", intro + filter_form(query, facets, runs, names) + notes
                  + results_table(query, listing, names))


# -- runs -----------------------------------------------------------------------------------
def runs_page(runs: Sequence[Mapping[str, Any]], packs: Sequence[Mapping[str, Any]]) -> str:
    rows = [[f"<a href='{href('/', {'run': r['run_id']})}'>{clean(r['run_id'])}</a>", clean(r["status"]),
             clean(r["started_at"]), clean(r["finished_at"]), _num(r["results"]),
             clean((r["git_sha"] or "")[:12]) + (" (dirty)" if r["git_dirty"] else ""), clean(r["evalrun_version"]),
             f"<code class='command'>{clean(' '.join(map(str, r['argv'] or [])))}</code>"] for r in runs]
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
    return table(["", ""], rows, classes=["nw"]) + f"<details><summary>configuration</summary><pre>{clean(config)}</pre></details>"


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


def _ticks(top: float, most: int = 5) -> list[float]:
    """Round tick values from 0 up to ``top``, at most ``most`` + 1 of them (steps 1, 2, 5 × 10^k)."""
    raw = top / max(most, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(top / step) + 1)]


def p_curve(tokens: Sequence[Mapping[str, Any]], threshold: float, size: int | None) -> str:
    """-log10 of the running p-value along the text, with the threshold and the size marked,
    both axes labelled; values above :data:`P_CAP` are drawn at it, and the chart says from
    which token on, so a flat top never reads as a p-value that stopped falling."""
    width, height, left, right, top_pad, bottom = 720, 200, 56, 16, 24, 40
    raw = [-math.log10(max(t["p"], 1e-300)) for t in tokens]  # p = 0 (underflow) as 1e-300
    values = [min(P_CAP, v) for v in raw]
    capped = [i for i, v in enumerate(raw) if v > P_CAP]
    top = max([*values, -math.log10(threshold), 1.0]) * 1.1
    n = max(len(values), 1)
    base = height - bottom

    def xy(i: int, v: float) -> tuple[float, float]:
        return left + (width - left - right) * (i + 1) / n, base - (base - top_pad) * v / top

    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in enumerate(values)))
    ty = xy(0, -math.log10(threshold))[1]
    parts = [f"<svg class='pcurve' width='{width}' height='{height}' viewBox='0 0 {width} {height}' role='img' "
             f"aria-label='running p-value along the text'>",
             f"<text x='{left}' y='14' font-size='11'>-log10 p after each token (dashed: p = {threshold:g})</text>",
             f"<g class='axes' stroke='#555'><line x1='{left}' y1='{base}' x2='{width - right}' y2='{base}'/>"
             f"<line x1='{left}' y1='{top_pad}' x2='{left}' y2='{base}'/></g>"]
    for v in _ticks(top):
        y = xy(0, v)[1]
        parts.append(f"<text class='y-tick' x='{left - 4}' y='{y + 3.5:.1f}' font-size='10' text-anchor='end'>"
                     f"{v:g}</text><line x1='{left - 3}' y1='{y:.1f}' x2='{left}' y2='{y:.1f}' stroke='#555'/>")
    for t in [1, *(t for t in _ticks(n, 6) if t >= 2)]:
        x = xy(int(t) - 1, 0)[0]
        parts.append(f"<text class='x-tick' x='{x:.1f}' y='{base + 13}' font-size='10' text-anchor='middle'>"
                     f"{int(t)}</text><line x1='{x:.1f}' y1='{base}' x2='{x:.1f}' y2='{base + 3}' stroke='#555'/>")
    parts += [f"<text class='x-label' x='{(left + width - right) / 2:.0f}' y='{height - 6}' font-size='11' "
              "text-anchor='middle'>tokens of the text</text>",
              f"<text class='y-label' x='14' y='{(top_pad + base) / 2:.0f}' font-size='11' text-anchor='middle' "
              f"transform='rotate(-90 14 {(top_pad + base) / 2:.0f})'>−log10 p</text>",
              f"<line x1='{left}' y1='{ty:.1f}' x2='{width - right}' y2='{ty:.1f}' stroke='#a01818' "
              f"stroke-dasharray='4'><title>threshold p = {threshold:g}</title></line>",
              f"<polyline fill='none' stroke='#1f5fbf' stroke-width='1.5' points='{line}'/>"]
    if capped:
        note = (f"capped: from token {capped[0] + 1}, p < 1e-{P_CAP:g} is drawn at {P_CAP:g} "
                f"(lowest p = {min(t['p'] for t in tokens):.3g})")
        parts.append(f"<text class='capped' x='{width - right}' y='14' font-size='11' text-anchor='end' "
                     f"fill='#a01818'>{clean(note)}<title>{clean(note)}</title></text>")
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
    summary = (f"Under {full_spec(found['watermark'])}: p = {_num(found['p_value'])} over {len(tokens)} tokens; "
               + (f"p first reaches {found['threshold']:g} after token {size} (the watermark size, outlined)."
                  if size is not None else f"p never reaches {found['threshold']:g}."))
    legend = ("<p class='legend note'>Colour: <span class='tok-green'>green / high score</span>"
              "<span class='tok-red'>red / low score</span><span class='tok-skip'>not scored</span>"
              + ("" if found["evidence"] != ["p"] else " (this scheme gives the running p-value only)") + "</p>")
    note = f"<p class='note'>{clean(found['tokenizer_note'])}</p>" if found.get("tokenizer_note") else ""
    return (f"<p class='evidence-summary'>{summary}</p>{legend}{note}<div class='text tokens'>{''.join(spans)}</div>"
            + p_curve(tokens, found["threshold"], size))


#: a parsed list longer than this is counted, not listed (MAUVE's 100 bootstrap replicates)
LISTED_VALUES = 4


def _parsed_value(value: Any) -> str:
    """One parsed field as text: numbers to 4 significant digits, a watermark spec by its short
    name, short lists written out, long ones counted."""
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "–"
    if isinstance(value, float):
        return _num(value, 4)
    if isinstance(value, (list, tuple)):
        if len(value) > LISTED_VALUES:
            return f"{len(value)} values"
        return "[" + ", ".join(_parsed_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return ", ".join(f"{clean(k)} {_parsed_value(v)}" for k, v in value.items())
    return clean(short_name(str(value)))


def judge_answer(judgement: Mapping[str, Any]) -> str:
    """A judge's answer as its parsed value (the label and quality first, then the other
    fields), with the raw answer folded: a group judge's raw answer (MAUVE's, with its 100
    resampled values) would otherwise fill the page for one number."""
    parsed = dict(judgement["parsed"] or {})
    first = [k for k in ("label", "quality") if k in parsed]
    fields = [f"<span class='field'><b>{clean(k)}</b> {_parsed_value(parsed[k])}</span>"
              for k in [*first, *sorted(k for k in parsed if k not in first)]]
    shown = " · ".join(fields) if fields else "<span class='note'>(no parsed value)</span>"
    raw = judgement["raw"]
    folded = ("" if raw is None else f"<details><summary>raw answer ({len(raw):,} characters)</summary>"
              f"<pre>{clean(raw)}</pre></details>")
    return f"<div class='parsed'>{shown}</div>{folded}"


def _kv(mapping: Mapping[str, Any]) -> str:
    return table(["field", "value"], [[clean(k), clean(json.dumps(v, sort_keys=True) if isinstance(v, (dict, list))
                                                       else v)] for k, v in sorted(mapping.items())])


def result_page(detail: Mapping[str, Any], evidence: Mapping[str, Any], *, watermark_choices: Sequence[str],
                chosen: str | None, key_given: bool) -> str:
    d = detail
    head = table(["pack", "case", "model", "watermark", "attack", "repetition", "label", "score"], [[
        clean(d["pack"]), breakable(d["case_id"]), breakable(d["model"]), spec_html(d["watermark"]),
        breakable(d["attack"]), _num(d["repetition"]), f"<span id='label'>{clean(d['label'])}</span>", _num(d["score"])]],
        table_id="head", classes=["", "", "", "", "", "nw", "nw", "nw"])
    if short_name(d["watermark"]) != d["watermark"]:  # the full spec, stated where one result is studied
        head += f"<p class='note' id='full-watermark'>watermark: {full_spec(d['watermark'])}</p>"
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
        names = short_names(watermark_choices)  # two choices never read alike
        links = " ".join(f"<a href='{href('/results/' + str(d['result_id']), {'watermark': w})}'"
                         f"{' class=chosen' if w == chosen else ''}>{spec_html(w, names)}</a>" for w in watermark_choices)
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
        parts.append(table(["judge", "method", "answer", "error"], [[
            clean(j["judge"]), clean(j["method"]), judge_answer(j), clean(j["error"])] for j in d["judgements"]],
            table_id="judgements"))
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
def compare_help(runs: Sequence[Mapping[str, Any]], watermarks: Sequence[str],
                 names: Mapping[str, str] | None = None) -> str:
    """What a blank comparison page asks for, and ready comparisons to start from: an empty
    form alone does not say that A and B are two runs or two watermarks, nor what is paired."""
    tips = [
        "<p>Pick A and B in one of the two forms: <b>two runs</b> (results paired on pack, case, model, watermark, "
        "attack and repetition: the same evaluation before and after a change) or <b>two watermarks</b> (paired on "
        "pack, case, model, attack and repetition: what one scheme detects that the other does not; "
        "<code>none</code> as A is the unwatermarked baseline). The page counts the pairs, shows how their labels "
        "moved, and lists the pairs whose label changed.</p>",
        "<p class='note'>A watermark can also be given by its scheme or short name in the address "
        "(<code>/compare?watermark_a=none&amp;watermark_b=kgw</code>) when it names one stored spec.</p>"]
    if len(runs) < 2:
        tips.append(f"<p class='note'>This store holds {len(runs)} run(s): comparing runs needs two.</p>")
    marked = [w for w in watermarks if w != "none"]
    starts = [("none", b) for b in marked] if "none" in watermarks else []
    starts += [(a, b) for i, a in enumerate(marked) for b in marked[i + 1:]]
    if starts:
        tips.append("<p>Start from: " + ", ".join(
            f"<a class='start' href='{href('/compare', {'watermark_a': a, 'watermark_b': b})}'>{spec_html(a, names)}"
            f" vs {spec_html(b, names)}</a>" for a, b in starts[:8]) + "</p>")
    elif len(watermarks) < 2:
        tips.append(f"<p class='note'>This store holds {len(watermarks)} watermark(s): comparing watermarks needs "
                    "two.</p>")
    return f"<div id='compare-help'>{''.join(tips)}</div>"


def compare_page(params: Mapping[str, str], runs: Sequence[Mapping[str, Any]], watermarks: Sequence[str],
                 found: Mapping[str, Any] | None, error: str | None, names: Mapping[str, str] | None = None) -> str:
    """Two runs or two watermarks side by side; blank, what to pick (:func:`compare_help`)."""
    run_ids = [r["run_id"] for r in runs]
    run_labels = {r["run_id"]: f"{r['run_id'][:12]} ({(r['started_at'] or '')[:16]})" for r in runs}
    forms = ("<form class='filters' method='get' action='/compare' id='compare-runs'>"
             + _select("run_a", run_ids, params.get("run_a"), run_labels)
             + _select("run_b", run_ids, params.get("run_b"), run_labels)
             + "<button type='submit'>compare runs</button></form>"
             "<form class='filters' method='get' action='/compare' id='compare-watermarks'>"
             + _select("watermark_a", watermarks, params.get("watermark_a"), names)
             + _select("watermark_b", watermarks, params.get("watermark_b"), names)
             + "<button type='submit'>compare watermarks</button></form>")
    body = [forms]
    if not params:
        body.append(compare_help(runs, watermarks, names))
    if error:
        body.append(f"<p class='error' id='compare-error'>{clean(error)}</p>")
    if found is not None:
        body.append(matched_notes(params, found.get("matched", {}), {}, names))
        a, b = (spec_html(found[k], names) if found["by"] == "watermark" else clean(found[k]) for k in ("a", "b"))
        body.append(f"<p id='compare-summary'>{found['pairs']:,} pairs on the same cases; {found['changed']:,} "
                    f"changed label (A = {a}, B = {b}).</p>")
        if not found["pairs"]:
            paired = "pack, case, model, " + ("watermark, " if found["by"] == "run" else "") + "attack and repetition"
            body.append(f"<p class='note' id='no-pairs'>No result of A has a result of B with the same {paired}: "
                        "they were run on different cases, packs or attacks.</p>")
        body.append(table(["label A", "label B", "count"], [[clean(t["label_a"]), clean(t["label_b"]),
                                                              _num(t["count"])] for t in found["transitions"]],
                          table_id="transitions", classes=["nw", "nw", "num"]))
        rows = [[clean(r["pack"]), clean(r["case_id"]), clean(r["model"]), clean(r["attack"]),
                 f"<a class='nw' href='/results/{int(r['a_id'])}'>{clean(r['label_a'])}</a>",
                 f"<a class='nw' href='/results/{int(r['b_id'])}'>{clean(r['label_b'])}</a>",
                 _num(r["score_a"]), _num(r["score_b"]),
                 _num(None if r["score_a"] is None or r["score_b"] is None else r["score_b"] - r["score_a"])]
                for r in found["rows"]]
        listed = "Pairs" if params.get("all") in ("1", "true") else "Pairs whose label changed"
        body.append(f"<h2>{listed}</h2>" + table(
            ["pack", "case", "model", "attack", "A", "B", "score A", "score B", "B − A"], rows, table_id="pairs",
            classes=["", "", "", "", "", "", "num nw", "num nw", "num nw"]))
    return layout("Compare", "".join(body))


# -- charts ---------------------------------------------------------------------------------
class SpecText:
    """Watermark specs inside the report's text (titles, cells, paragraphs) written as their short
    names: the report states every spec in full, which crowds its tables past the page's width.
    In HTML each short name keeps its full spec on hover; in an SVG text the whole text's
    ``<title>`` holds the original."""

    def __init__(self, names: Mapping[str, str] | None) -> None:
        self.names = {k: v for k, v in (names or {}).items() if v != k}
        # longest first, and never inside a longer spec-like word (``skip=0.0`` of ``skip=0.05``)
        alternatives = "|".join(re.escape(k) for k in sorted(self.names, key=len, reverse=True))
        self.pattern = (re.compile(rf"(?<![\w.,=])(?:{alternatives})(?![\w=]|[.,:]\w)") if alternatives
                        else None)

    def plain(self, text: str) -> str:
        """``text`` with short names, as plain text (escape it before use)."""
        return text if self.pattern is None else self.pattern.sub(lambda m: self.names[m.group()], text)

    def html(self, text: Any) -> str:
        """``text`` escaped, each spec in it as :func:`spec_html`."""
        text = "" if text is None else str(text)
        if self.pattern is None:
            return clean(text)
        out, at = [], 0
        for m in self.pattern.finditer(text):
            out += [clean(text[at:m.start()]), spec_html(m.group(), self.names)]
            at = m.end()
        return "".join(out) + clean(text[at:])


def _fit(text: str, chars: int) -> str:
    """``text`` in at most ``chars`` characters, cut at a word (or comma) with an ellipsis."""
    if len(text) <= chars:
        return text
    cut = max(text.rfind(" ", 0, chars), text.rfind(",", 0, chars))
    return text[: cut if cut > chars // 2 else chars - 1].rstrip(" ,") + "…"


def tamper_svg(panel: Any, links: Mapping[str, str], specs: SpecText | None = None) -> str:
    """One tamper-resistance plot (MarkMyWords Fig. 3): each attack a point (quality retention,
    detection rate) that names itself on hover and opens its results; the lower hull drawn. The
    header above the plot (never over its points) names the watermark by its short name, then
    the model, pack and R; a line too long for the plot is cut at a word, the whole on hover."""
    specs = specs or SpecText(None)
    width, height, pad, top = 380, 310, 40, 54
    xs = [q for q, _ in [*panel.points.values(), *panel.excluded.values()]]
    right = max([1.0, *xs]) * 1.05

    def xy(q: float, d: float) -> tuple[float, float]:
        return pad + (width - 2 * pad) * q / right, height - pad - (height - pad - top) * d

    hull = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(q, d) for q, d in panel.hull))
    resistance = "n/a" if panel.resistance is None else f"{panel.resistance:.3f}"
    name, _, where = panel.title.partition(chr(10))
    lines = [specs.plain(name), f"{where} · R = {resistance}" if where else f"R = {resistance}"]
    whole = " · ".join([panel.title.replace(chr(10), " · "), f"R = {resistance}"])
    chars = (width - 2 * 8) // 6  # about 6 px a character at 11 px
    parts = [f"<svg class='tamper' width='{width}' height='{height}' viewBox='0 0 {width} {height}' role='img' "
             "aria-label='tamper resistance'>", f"<title>{clean(whole)}</title>",
             f"<text x='8' y='16' font-size='12' font-weight='600'>{clean(_fit(lines[0], chars - 2))}</text>",
             f"<text x='8' y='32' font-size='11'>{clean(_fit(lines[1], chars))}</text>",
             f"<line x1='{pad}' y1='{height - pad}' x2='{width - pad}' y2='{height - pad}' stroke='#555'/>",
             f"<line x1='{pad}' y1='{top}' x2='{pad}' y2='{height - pad}' stroke='#555'/>",
             f"<text x='{width / 2}' y='{height - 8}' font-size='11' text-anchor='middle'>quality retention</text>",
             f"<text x='12' y='{(height + top) / 2}' font-size='11' transform='rotate(-90 12 {(height + top) / 2})' "
             "text-anchor='middle'>detection rate</text>",
             f"<polyline fill='none' stroke='#1f5fbf' points='{hull}'/>"]
    for excluded, points in ((False, panel.points), (True, panel.excluded)):
        for attack, (q, d) in sorted(points.items()):
            x, y = xy(q, d)
            tip = f"{attack}: quality retention {q:.3f}, detection rate {d:.3f}" + (" (left out of R)" if excluded else "")
            fill = "none" if excluded else "#1f5fbf"
            parts.append(f"<a href='{clean(links.get(attack, '/'))}'><circle cx='{x:.1f}' cy='{y:.1f}' r='5' "
                         f"fill='{fill}' stroke='#1f5fbf'><title>{clean(tip)}</title></circle></a>")
    return "".join(parts) + "</svg>"


def _report_cell(value: Any, specs: SpecText) -> str:
    """A cell of the report's tables, whose widest has 22 columns: short words (a number, a
    bound of an interval, ``n/a``) never break, so the table squeezes its long words
    (``mmw_book_reports``), not ``0.010`` into ``0.0 10``; a spec is its short name."""
    text = "" if value is None else str(value)
    if specs.pattern is not None and specs.pattern.search(text):
        return specs.html(text)
    return "".join(f"<span class='nw'>{clean(w)}</span>" if 0 < len(w) <= 8 and not w.isspace() else clean(w)
                   for w in re.split(r"(\s+)", text))


def _report_block(block: Any, specs: SpecText) -> str:
    """One block of the report's benchmark sections (paragraph, table, chart), as the page shows
    it: specs by their short names, the report's wide tables in the page's smaller table type."""
    kind = type(block).__name__
    if kind == "Paragraph":
        return f"<p>{specs.html(block.text)}</p>"
    if kind == "Table":
        caption = f"<p class='note'>{specs.html(block.caption)}</p>" if block.caption else ""
        rows = [[_report_cell(c, specs) for c in row] for row in block.rows]
        return caption + table([clean(h) for h in block.headers], rows, table_id=f"report-{block.id}",
                               table_class="report")
    if kind == "Figure":
        return f"<figure><img src='/charts/{clean(block.filename)}' alt='{clean(block.alt)}'></figure>"
    return ""


def charts_page(charts: Any, names: Mapping[str, str] | None = None) -> str:
    """The report's benchmark numbers and charts; ``names``: the stored watermarks' short names."""
    specs = SpecText(names)
    body = [f"<p class='note'>{specs.html(charts.note)}</p>"]
    if charts.panels:
        body.append("<h2>Tamper resistance (MarkMyWords Fig. 3)</h2><p class='note'>Hover a point to see its attack; "
                    "click it to open that attack's results. Hollow points are paraphrases, left out of R.</p>")
        body += [tamper_svg(panel, links, specs) for panel, links in charts.panels]
    for section in charts.sections:
        level = min(6, max(2, section.level))
        body.append(f"<h{level}>{specs.html(section.title)}</h{level}>")
        body += [_report_block(b, specs) for b in section.blocks]
    return layout("Charts", "".join(body))


CSS_BYTES = CSS.strip().encode("utf-8")
__all__ = ["CSS_BYTES", "NO_LABEL", "browse_page", "charts_page", "clean", "compare_page", "error_page",
           "result_page", "runs_page", "word_diff"]
